"""review22: the per-destination limit keys a call by ``urlsplit(url).hostname``, not by
the guard's canonical host, so one IPv6 address written another way (a zero group
expanded, a leading zero) is another destination: a model spreads one slow server over as
many slots as it has spellings, and the limit that should keep it to N calls in flight
holds nothing."""

from __future__ import annotations

import pytest

from django_webfetch import runs
from django_webfetch.models import CallState, HostListEntry, ToolGroup
from django_webfetch.runs.destinations import destination_of, slots

pytestmark = pytest.mark.lab


@pytest.fixture
def web(lab_settings, group_factory, settings):
    group_factory("web", enabled=True)
    settings.ROOT_URLCONF = "tests.runs.urls"
    return lab_settings


SERVER = "2606:4700:10::10"
SPELLINGS = ["2606:4700:10:0::10", "2606:4700:0010::10", "2606:4700:10:0:0:0:0:10"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_one_address_is_the_same_destination(spelling):
    assert destination_of("fetch_external_url", {"url": f"http://[{spelling}]/x"}) == (
        destination_of("fetch_external_url", {"url": f"http://[{SERVER}]/x"})
    )


@pytest.mark.django_db
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_full_host_stays_full_under_another_spelling(web, editor, settings, spelling):
    settings.WEBFETCH_MAX_CALLS_PER_HOST = 1
    settings.WEBFETCH_TIMEOUT = 1
    group = ToolGroup.objects.get(slug="web")
    group.skip_approval_with_allowlist = True
    group.save()
    HostListEntry.objects.create(group=group, list="allow", value=SERVER)
    # The one slot of this server is in use (by a call to its canonical spelling).
    key = destination_of("fetch_external_url", {"url": f"http://[{SERVER}]/page"})
    held = slots().acquire(f"host:{key}", 1, wait=0, ttl=30)
    try:
        call = runs.request_call(
            "fetch_external_url", {"url": f"http://[{spelling}]/page"}, user=editor
        )
    finally:
        held.release()
    # Expected: the same server is full, the call waits then fails ``destination_busy``
    # and nothing reaches the server.  Actual: it took a second slot and was fetched.
    assert (call.state, call.reason) == (CallState.FAILED, "destination_busy"), call.result
    assert not [r for r in web.requests if r.path == "/page"]
