"""review29, finding 7 (medium): URL provenance decided on the normalised URL, but
``fetch_external_url`` sent the model's spelling.  A seen link re-spelt (each letter as
itself or as ``%XX``: one bit per letter) counted as seen, ran without approval where the
allowlist skips it, and carried the bits to the allowlisted host.

The check and the use agree on the exact bytes: what is sent is the URL's one canonical
form (``net.urlnorm.normalise_url``), the same string the provenance compares.  Observed
on the wire: the lab's HTTP servers log each request's target as it arrived.
"""

from __future__ import annotations

import pytest

from django_webfetch import runs
from django_webfetch.net.urlnorm import normalise_url

from .helpers import settled

pytestmark = pytest.mark.django_db

HOST = "allowed.lab.example"


@pytest.fixture
def allowlisted_web(lab_settings, group_factory, host_entry_factory):
    """``web`` skips approval through its allowlist, and fetches only seen URLs (the
    default); the lab host is on the allowlist."""
    group = group_factory(
        "web", enabled=True, scope="external_filtered", skip_approval_with_allowlist=True
    )
    assert group.fetch_only_seen_urls is True
    lab_settings.dns.set(HOST, a=[lab_settings.PUBLIC_V4[2]])
    host_entry_factory("web", HOST, list="allow")
    return lab_settings


def targets(lab) -> list[str]:
    lab.wait_requests_done()
    return [r.path for r in lab.requests if (r.host or "").startswith(HOST)]


def test_a_seen_link_respelt_with_escapes_carries_no_bits(allowlisted_web, editor):
    lab = allowlisted_web
    seen = lab.url(HOST, "/page")
    seen_urls = frozenset({normalise_url(seen)})
    # Bits 0,1,1,0 of a code: letter 2 and 3 of "page" escaped.
    respelt = lab.url(HOST, "/p%61%67e")
    call = runs.request_call(
        "fetch_external_url",
        {"url": respelt},
        user=editor,
        conversation="chat",
        seen_urls=seen_urls,
    )
    call = settled(call)
    assert call.finished and not call.requires_approval  # it counted as seen
    # Expected: the host received the seen URL's one spelling, not the model's.
    assert targets(lab) == ["/page"]
    assert call.arguments["url"] == normalise_url(seen)

    # The control: a URL the conversation never showed still waits for a human.
    composed = runs.request_call(
        "fetch_external_url",
        {"url": lab.url(HOST, "/page?q=0110")},
        user=editor,
        conversation="chat",
        seen_urls=seen_urls,
    )
    assert composed.state == "awaiting_approval"
    assert targets(lab) == ["/page"]
