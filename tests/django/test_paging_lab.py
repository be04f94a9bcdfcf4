"""Issue 21: a long page read in parts, end to end in the network-namespace lab.

The first call fetches (after its approval) and keeps the whole text with the call; a later
part of the same URL in the same conversation is read from that text: no request reaches
the lab server, no egress event is written, and no approval is asked.  A new URL, another
conversation or another user is a new fetch, with its approval.
"""

from __future__ import annotations

import re

import pytest

from django_webfetch import runs
from django_webfetch.models import CallState, EgressEvent, StoredText
from tests.django.test_lab_tools import BEGIN, END, outside_fence
from tests.settle import settled_call

pytestmark = pytest.mark.django_db

LOCATION_RE = re.compile(r"part (\d+) of (\d+), characters ([\d,]+)–([\d,]+)")


@pytest.fixture
def approver(user_factory):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = user_factory(staff=True, username="approver")
    user.user_permissions.add(
        Permission.objects.get(
            codename="approve_toolcall", content_type__app_label="django_webfetch"
        )
    )
    return get_user_model().objects.get(pk=user.pk)


@pytest.fixture
def web(lab_settings, group_factory, settings):
    settings.WEBFETCH_ASYNC_RUNS = False
    group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    return lab_settings


def _location(result):
    match = LOCATION_RE.search(outside_fence(result.content))
    assert match is not None, outside_fence(result.content)
    number, total, start, end = (int(group.replace(",", "")) for group in match.groups())
    return number, total, start, end


def _ask(editor, arguments, conversation="conv-21"):
    """Request a call and return it once settled: run (on the background runner) or
    waiting for an approval."""
    return settled_call(
        runs.request_call("fetch_external_url", arguments, user=editor, conversation=conversation)
    )


def _approve(call, approver):
    """Approve the call and return it once it ran (on the background runner)."""
    return settled_call(runs.approve(call, by=approver))


def test_a_long_page_is_read_in_parts_without_new_requests(web, editor, approver):
    url = web.url("docs.lab.example", "/page", scheme="https")
    first = _ask(editor, {"url": url})
    assert first.state == CallState.AWAITING_APPROVAL
    first = _approve(first, approver)
    assert first.state == CallState.SUCCEEDED
    result = first.tool_result()
    number, total, start, end = _location(result)
    assert (number, start) == (1, 0) and total == 3
    assert "page=2 reads the next part" in outside_fence(result.content)
    assert result.meta["part"] == 1 and result.meta["parts"] == 3
    assert result.content.count(BEGIN) == 1 and result.content.count(END) == 1
    requests, events = len(web.requests), EgressEvent.objects.count()
    assert StoredText.objects.get().call_id == first.pk

    previous_end = end
    for page in (2, 3):
        later = _ask(editor, {"url": url, "page": page})
        # No approval asked, no request made: the stored text is read.
        assert later.state == CallState.SUCCEEDED and not later.requires_approval
        result = later.tool_result()
        number, total, start, end = _location(result)
        assert (number, total, start) == (page, 3, previous_end)
        assert "from the text already fetched, no new request" in outside_fence(result.content)
        assert result.meta["stored"] is True
        previous_end = end
        assert len(web.requests) == requests and EgressEvent.objects.count() == events
    assert previous_end == result.meta["chars"]
    assert "page=" not in outside_fence(result.content).split("characters")[1]  # the last

    past = _ask(editor, {"url": url, "page": 4})
    assert past.tool_result().error == "no_such_part"


def test_a_new_url_another_conversation_or_user_needs_approval(web, editor, approver, user_factory):
    url = web.url("docs.lab.example", "/page", scheme="https")
    _approve(_ask(editor, {"url": url}), approver)
    assert _ask(editor, {"url": url, "page": 2}).state == CallState.SUCCEEDED
    other_url = web.url("docs.lab.example", "/page?x=1", scheme="https")
    assert _ask(editor, {"url": other_url, "page": 2}).state == CallState.AWAITING_APPROVAL
    assert _ask(editor, {"url": url, "page": 2}, "conv-other").state == (
        CallState.AWAITING_APPROVAL
    )
    colleague = user_factory(staff=True, username="colleague")
    assert _ask(colleague, {"url": url, "page": 2}).state == CallState.AWAITING_APPROVAL
    # The whole page in "page" mode is another text: a new fetch.
    assert _ask(editor, {"url": url, "page": 2, "mode": "page"}).state == (
        CallState.AWAITING_APPROVAL
    )


def test_a_later_part_past_its_time_is_a_new_fetch(web, editor, approver, settings):
    url = web.url("docs.lab.example", "/page", scheme="https")
    _approve(_ask(editor, {"url": url}), approver)
    StoredText.objects.update(expires_at="2000-01-01T00:00:00Z")
    later = _ask(editor, {"url": url, "page": 2})
    assert later.state == CallState.AWAITING_APPROVAL
    requests = len(web.requests)
    later = _approve(later, approver)
    # Approved, it fetches again and gives part 2 of the new text.
    assert len(web.requests) == requests + 1
    assert _location(later.tool_result())[:2] == (2, 3)


def test_a_redirect_shows_the_final_url_in_every_part(web, editor, approver):
    url = web.url("docs.lab.example", "/redirect/302?to=/page", scheme="https")
    call = _approve(_ask(editor, {"url": url}), approver)
    result = call.tool_result()
    assert result.meta["redirects"] == 1, result
    assert "after 1 redirect(s)" in outside_fence(result.content)
    inside = result.content.split(BEGIN, 1)[1]
    assert "Final redirect target (an untrusted URL chosen by the server): https://" in inside
    later = _ask(editor, {"url": url, "page": 2}).tool_result()
    assert "Final redirect target (an untrusted URL chosen by the server)" in later.content
