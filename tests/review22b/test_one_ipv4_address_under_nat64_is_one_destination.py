"""review22b: the per-destination limit keys a call by the guard's canonical host name
(``parse_url(url).host.name``), but with ``WEBFETCH_NAT64_PREFIXES`` declared the guard
itself treats an IPv4 address and its NAT64 forms as one destination (an allowlist or
denylist entry for ``11.0.0.10`` matches ``[64:ff9b::b00:a]``; the address is classified
by the IPv4 address it embeds).  The limit does not: each NAT64 spelling is another host.
Under a /96 that is one more slot per declared prefix; under a shorter RFC 6052 prefix
(/32../64, e.g. the RFC 8215 local-use ``64:ff9b:1::/48``) the suffix bits are ignored
by the guard, so one IPv4 server has 2**56 spellings, each with its own
``WEBFETCH_MAX_CALLS_PER_HOST`` slots: the limit holds nothing for a model that varies the
suffix."""

from __future__ import annotations

import pytest

from django_webfetch import runs
from django_webfetch.egress.policy import policy_for
from django_webfetch.models import CallState, HostListEntry, ToolGroup
from django_webfetch.net import UrlGuard
from django_webfetch.runs.destinations import destination_of, slots

SERVER = "11.0.0.10"  # a lab server (public-looking)
PREFIXES = ("64:ff9b::/96", "64:ff9b:1::/48")
SPELLINGS = [
    "64:ff9b::b00:a",  # the well-known prefix (/96)
    "64:ff9b:1:b00:0:a00::",  # /48: 11.0.0 | u octet | 10
    "64:ff9b:1:b00:0:a00:0:1",  # the same, suffix 1 (ignored by the guard)
    "64:ff9b:1:b00:0:a00:dead:beef",  # the same, another suffix
]


@pytest.fixture
def web(group_factory, settings):
    settings.WEBFETCH_NAT64_PREFIXES = PREFIXES
    settings.ROOT_URLCONF = "tests.runs.urls"
    group = group_factory("web", enabled=True)
    HostListEntry.objects.create(
        group=ToolGroup.objects.get(slug="web"), list="allow", value=SERVER
    )
    return group


@pytest.mark.django_db
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_nat64_form_of_an_address_is_the_same_destination(web, spelling):
    policy = policy_for("web")
    # The guard reads both as the allowlisted 11.0.0.10 (one destination, one decision).
    UrlGuard().check(f"http://{SERVER}/x", policy)
    UrlGuard().check(f"http://[{spelling}]/x", policy)
    # Expected: one destination for the limit too.  Actual: another host per spelling.
    assert destination_of("fetch_external_url", {"url": f"http://[{spelling}]/x"}) == (
        destination_of("fetch_external_url", {"url": f"http://{SERVER}/x"})
    )


@pytest.mark.lab
@pytest.mark.django_db
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_full_host_stays_full_under_its_nat64_form(lab_settings, web, editor, settings, spelling):
    settings.WEBFETCH_MAX_CALLS_PER_HOST = 1
    settings.WEBFETCH_TIMEOUT = 1
    group = ToolGroup.objects.get(slug="web")
    group.skip_approval_with_allowlist = True
    group.save()
    key = destination_of("fetch_external_url", {"url": f"http://{SERVER}/page"})
    held = slots().acquire(f"host:{key}", 1, wait=0, ttl=30)
    try:
        # (The lab has no NAT64 gateway: a call that is taken fails to connect, no route.)
        call = runs.request_call(
            "fetch_external_url", {"url": f"http://[{spelling}]/page"}, user=editor
        )
    finally:
        held.release()
    # Expected: the server's one slot is in use, the call waits and fails
    # ``destination_busy``.  Actual: it took a slot of its own and was run.
    assert (call.state, call.reason) == (CallState.FAILED, "destination_busy"), (
        call.state,
        call.reason,
        call.result,
    )
