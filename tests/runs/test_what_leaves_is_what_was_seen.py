"""Review round 4 (issue 29), finding 7 (medium): URL provenance decided on the normalised URL, but
``fetch_external_url`` sent the model's spelling.  A seen link re-spelt (each letter as
itself or as ``%XX``: one bit per letter) counted as seen, ran without approval where the
allowlist skips it, and carried the bits to the allowlisted host.

The check and the use agree on the exact bytes: what is sent is the URL's one canonical
form (``net.urlnorm.normalise_url``), the same string the provenance compares.  Observed
on the wire: the lab's HTTP servers log each request's target as it arrived.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_webfetch import runs
from django_webfetch.net.urlnorm import normalise_url
from django_webfetch.tools.approval import SEEN, url_provenance
from django_webfetch.tools.fetch_external_url import canonical_url
from tests.settle import settled_call as settled

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


# -- the class: two spellings that compare equal send the same bytes ---------------------

UNRESERVED = string.ascii_letters + string.digits + "-._~"
_segment = st.text(UNRESERVED, min_size=1, max_size=8).filter(lambda s: s not in {".", ".."})


def _join(segments: list[str], query: tuple[str, str] | None) -> str:
    return "/".join(["", *segments]) + (f"?{query[0]}={query[1]}" if query else "")


_target = st.builds(
    _join,
    st.lists(_segment, min_size=1, max_size=3),
    st.none() | st.tuples(_segment, _segment),
)


@st.composite
def spelling(draw, target: str, host: str = HOST) -> str:
    """Another spelling of ``http://<host><target>``: every unreserved character of the
    target as itself or as ``%XX`` (either hex case), the scheme and host in any case, the
    default port or not, a fragment or not (RFC 3986 §6.2.2-6.2.3: all equivalent)."""
    out = []
    for char in target:
        if char in UNRESERVED and draw(st.booleans()):
            escape = f"%{ord(char):02X}"
            out.append(escape.lower() if draw(st.booleans()) else escape)
        else:
            out.append(char)
    scheme = "".join(c.upper() if draw(st.booleans()) else c for c in "http")
    name = "".join(c.upper() if draw(st.booleans()) else c for c in host)
    port = ":80" if draw(st.booleans()) else ""
    fragment = "#" + draw(_segment) if draw(st.booleans()) else ""
    return f"{scheme}://{name}{port}{''.join(out)}{fragment}"


@given(data=st.data(), target=_target)
@settings(max_examples=300, deadline=None)
def test_every_spelling_has_one_canonical_form_and_only_it_is_seen(data, target):
    canonical = normalise_url(f"http://{HOST}{target}")
    first = data.draw(spelling(target))
    second = data.draw(spelling(target))
    assert canonical_url(first) == canonical_url(second) == canonical
    assert normalise_url(canonical) == canonical  # one form: idempotent
    seen = frozenset({canonical})
    assert url_provenance(canonical, seen) == SEEN
    # A spelling other than the canonical one is never "seen" by itself: what decides is
    # the form that is sent.
    for other in (first, second):
        assert (url_provenance(other, seen) == SEEN) == (other == canonical)


@given(data=st.data(), target=_target)
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_two_spellings_that_compare_equal_send_identical_bytes(
    allowlisted_web, editor, data, target
):
    """End to end: each spelling requested through ``runs.request_call`` (the allowlist
    lets it run), fetched through the guard, observed as the request target the lab's
    server received."""
    lab = allowlisted_web
    first = data.draw(spelling(target))
    second = data.draw(spelling(target))
    assert normalise_url(first) == normalise_url(second)
    received = []
    for url in (first, second):
        before = len(targets(lab))
        call = settled(runs.request_call("fetch_external_url", {"url": url}, user=editor))
        assert call.finished and not call.requires_approval
        new = targets(lab)[before:]
        assert len(new) == 1, (url, new)
        received.append(new[0])
    assert received[0] == received[1]
    expected = normalise_url(f"http://{HOST}{target}").split(HOST, 1)[1]
    assert received[0] == expected
