"""The per-destination limit (``WEBFETCH_MAX_CALLS_PER_HOST``) counts one server as one
destination however its address is written.

The limit keys a call by the guard's canonical host (``runs.destinations.destination_of``),
not by ``urlsplit(url).hostname``: one IPv6 address with a zero group expanded or a leading
zero is the same destination, and under declared ``WEBFETCH_NAT64_PREFIXES`` a NAT64 form
of an IPv4 address counts as the IPv4 address it embeds, whatever its suffix bits (under a
shorter RFC 6052 prefix such as the RFC 8215 ``64:ff9b:1::/48`` the guard ignores them, so
one server would otherwise have 2**56 spellings).  Otherwise a model would spread one slow
server over as many slots as it has spellings.
"""

from __future__ import annotations

import pytest

from django_webfetch import runs
from django_webfetch.egress.policy import policy_for
from django_webfetch.models import CallState, HostListEntry, ToolGroup
from django_webfetch.net import UrlGuard
from django_webfetch.runs.destinations import destination_of, slots
from tests.settle import settled_call


def _call_while_full(editor, held_url, spelling):
    """A call to ``spelling`` while the one slot of ``held_url``'s destination is in use
    (the runner's thread waits ``WEBFETCH_TIMEOUT`` for it), settled."""
    key = destination_of("fetch_external_url", {"url": held_url})
    held = slots().acquire(f"host:{key}", 1, wait=0, ttl=30)
    try:
        return settled_call(
            runs.request_call(
                "fetch_external_url", {"url": f"http://[{spelling}]/page"}, user=editor
            )
        )
    finally:
        held.release()


# -- IPv6 spellings of one address ---------------------------------------------------------

SERVER_V6 = "2606:4700:10::10"
SPELLINGS_V6 = ["2606:4700:10:0::10", "2606:4700:0010::10", "2606:4700:10:0:0:0:0:10"]


@pytest.fixture
def web_v6(lab_settings, group_factory, settings):
    group_factory("web", enabled=True)
    settings.ROOT_URLCONF = "tests.runs.urls"
    return lab_settings


@pytest.mark.lab
@pytest.mark.parametrize("spelling", SPELLINGS_V6)
def test_every_spelling_of_one_address_is_the_same_destination(spelling):
    assert destination_of("fetch_external_url", {"url": f"http://[{spelling}]/x"}) == (
        destination_of("fetch_external_url", {"url": f"http://[{SERVER_V6}]/x"})
    )


@pytest.mark.lab
@pytest.mark.django_db
@pytest.mark.parametrize("spelling", SPELLINGS_V6)
def test_a_full_host_stays_full_under_another_spelling(web_v6, editor, settings, spelling):
    settings.WEBFETCH_MAX_CALLS_PER_HOST = 1
    settings.WEBFETCH_TIMEOUT = 1
    group = ToolGroup.objects.get(slug="web")
    group.skip_approval_with_allowlist = True
    group.save()
    HostListEntry.objects.create(group=group, list="allow", value=SERVER_V6)
    # The one slot of this server is in use (by a call to its canonical spelling).
    call = _call_while_full(editor, f"http://[{SERVER_V6}]/page", spelling)
    # The same server is full: the call waits, then fails ``destination_busy``, and nothing
    # reaches the server.
    assert (call.state, call.reason) == (CallState.FAILED, "destination_busy"), call.result
    assert not [r for r in web_v6.requests if r.path == "/page"]


# -- NAT64 forms of one IPv4 address -------------------------------------------------------

SERVER_V4 = "11.0.0.10"  # a lab server (public-looking)
PREFIXES = ("64:ff9b::/96", "64:ff9b:1::/48")
SPELLINGS_NAT64 = [
    "64:ff9b::b00:a",  # the well-known prefix (/96)
    "64:ff9b:1:b00:0:a00::",  # /48: 11.0.0 | u octet | 10
    "64:ff9b:1:b00:0:a00:0:1",  # the same, suffix 1 (ignored by the guard)
    "64:ff9b:1:b00:0:a00:dead:beef",  # the same, another suffix
]


@pytest.fixture
def web_nat64(group_factory, settings):
    settings.WEBFETCH_NAT64_PREFIXES = PREFIXES
    settings.ROOT_URLCONF = "tests.runs.urls"
    group = group_factory("web", enabled=True)
    HostListEntry.objects.create(
        group=ToolGroup.objects.get(slug="web"), list="allow", value=SERVER_V4
    )
    return group


@pytest.mark.django_db
@pytest.mark.parametrize("spelling", SPELLINGS_NAT64)
def test_a_nat64_form_of_an_address_is_the_same_destination(web_nat64, spelling):
    policy = policy_for("web")
    # The guard reads both as the allowlisted 11.0.0.10 (one destination, one decision).
    UrlGuard().check(f"http://{SERVER_V4}/x", policy)
    UrlGuard().check(f"http://[{spelling}]/x", policy)
    # So does the limit.
    assert destination_of("fetch_external_url", {"url": f"http://[{spelling}]/x"}) == (
        destination_of("fetch_external_url", {"url": f"http://{SERVER_V4}/x"})
    )


@pytest.mark.lab
@pytest.mark.django_db
@pytest.mark.parametrize("spelling", SPELLINGS_NAT64)
def test_a_full_host_stays_full_under_its_nat64_form(
    lab_settings, web_nat64, editor, settings, spelling
):
    settings.WEBFETCH_MAX_CALLS_PER_HOST = 1
    settings.WEBFETCH_TIMEOUT = 1
    group = ToolGroup.objects.get(slug="web")
    group.skip_approval_with_allowlist = True
    group.save()
    # (The lab has no NAT64 gateway: a call that is taken fails to connect, no route.)
    call = _call_while_full(editor, f"http://{SERVER_V4}/page", spelling)
    # The server's one slot is in use: the call waits and fails ``destination_busy``.
    assert (call.state, call.reason) == (CallState.FAILED, "destination_busy"), (
        call.state,
        call.reason,
        call.result,
    )
