"""Issue 21 (paging) and issue 20 (the final redirect target), without the network.

``render_fenced`` gets real ``FetchResult`` values (the fetcher's own data class); the
stored text and the approval rule are checked against real rows.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_webfetch.models import StoredText, ToolCall
from django_webfetch.net.fetcher import FetchResult, Hop
from django_webfetch.text import Document
from django_webfetch.tools import (
    ToolApprovalRule,
    ToolContext,
    ToolInvocation,
    default_registry,
    paging,
)
from django_webfetch.tools.fetch_external_url import render_fenced

pytestmark = pytest.mark.django_db

REDIRECT_LINE = "Final redirect target (an untrusted URL chosen by the server)"


def _result(*urls: str) -> FetchResult:
    hops = tuple(
        Hop(url, 302 if n < len(urls) - 1 else 200, "203.0.113.9", None, 0.0)
        for n, url in enumerate(urls)
    )
    return FetchResult(urls[0], urls[-1], 200, "text/html", None, b"", hops, 0.0)


@pytest.mark.parametrize("mode", [None, "main", "page", "text"])
def test_no_redirect_no_final_target(mode):
    # Issue 20: the line was written on every fetch that had a mode, redirect or not.
    content = render_fenced("https://a.example/x", _result("https://a.example/x"), "Body", mode)
    assert REDIRECT_LINE not in content
    assert "after" not in content.split("Status: ", 1)[1].split("\n", 1)[0]


@pytest.mark.parametrize("mode", [None, "main", "page", "text"])
def test_after_a_redirect_the_final_target_is_shown(mode):
    # Issue 20: and it was left out after a real redirect when no mode was given.
    result = _result("https://a.example/x", "https://b.example/y")
    content = render_fenced("https://a.example/x", result, "Body", mode)
    status = content.split("Status: ", 1)[1].split("\n", 1)[0]
    assert status.startswith("HTTP 200 after 1 redirect(s)")
    inside = content.split(">>>\n", 1)[1]
    assert f"{REDIRECT_LINE}: https://b.example/y\n\nBody" in inside


def _call(user, conversation="conv"):
    return ToolCall.objects.create(
        tool="fetch_external_url", group="web", user=user, conversation=conversation
    )


def _context(call):
    return ToolContext(user=call.user, call_id=str(call.pk))


def test_a_kept_text_is_found_only_for_its_conversation_user_url_and_mode(editor, user_factory):
    call = _call(editor)
    document = Document("A" * 30_000 + " end", ("https://l.example/",))
    kept = paging.keep(
        "fetch_external_url",
        _context(call),
        "https://a.example/",
        document,
        mode="main",
        status_line="HTTP 200, main content",
    )
    assert kept.call == call and kept.text == document.text and kept.links == ["https://l.example/"]
    later = _context(_call(editor))
    assert paging.find("fetch_external_url", later, "https://a.example/", "main") == kept
    assert paging.find("fetch_external_url", later, "https://a.example/", "page") is None
    assert paging.find("fetch_external_url", later, "https://b.example/", "main") is None
    assert paging.find("read_page", later, "https://a.example/", "main") is None
    other = _context(_call(editor, "another conversation"))
    assert paging.find("fetch_external_url", other, "https://a.example/", "main") is None
    colleague = _context(_call(user_factory(username="colleague")))
    assert paging.find("fetch_external_url", colleague, "https://a.example/", "main") is None
    StoredText.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert paging.find("fetch_external_url", later, "https://a.example/", "main") is None


def test_nothing_is_kept_without_a_conversation(editor):
    document = Document("text")
    assert (
        paging.keep("t", _context(_call(editor, "")), "u", document, mode="main", status_line="s")
        is None
    )
    assert (
        paging.keep(
            "t",
            ToolContext(user=editor, call_id="not-a-uuid"),
            "u",
            document,
            mode="main",
            status_line="s",
        )
        is None
    )
    assert not StoredText.objects.exists()


def test_the_approval_rule_lifts_approval_only_for_a_stored_later_part(editor, group_factory):
    group_factory("web", enabled=True)
    tool = default_registry.get("fetch_external_url")
    first = _call(editor)
    paging.keep(
        "fetch_external_url",
        _context(first),
        "https://a.example/",
        Document("x" * 50_000),
        mode="main",
        status_line="HTTP 200",
    )
    later = _call(editor)
    for arguments, needs in [
        ({"url": "https://a.example/", "page": 2}, False),
        ({"url": "https://a.example/", "page": 1}, True),  # page 1 is a new fetch
        ({"url": "https://a.example/"}, True),
        ({"url": "https://b.example/", "page": 2}, True),  # a new URL
        ({"url": "https://a.example/", "page": 2, "mode": "page"}, True),
    ]:
        invocation = ToolInvocation(tool.name, arguments, editor, str(later.pk))
        assert ToolApprovalRule.requires_approval(tool, invocation, _context(later)) is needs
    # Without a durable call (no conversation) there is nothing to read: approval.
    invocation = ToolInvocation(tool.name, {"url": "https://a.example/", "page": 2}, editor)
    assert ToolApprovalRule.requires_approval(tool, invocation, ToolContext(user=editor))


def test_parts_fit_the_byte_bound_in_any_script():
    # Three bytes a character: a part holds fewer characters, so the fence never cuts it.
    document = Document("漢字" * 40_000)
    first = paging.render_part(document, 1, source_url="https://a.example/", status_line="HTTP 200")
    assert "[text cut to fit the size bound]" not in first.content
    assert first.meta["parts"] >= 6 and first.meta["end"] < 20_000
    missing = paging.render_part(document, 99, source_url="u", status_line="s")
    assert missing.error == "no_such_part" and missing.meta["parts"] == first.meta["parts"]
    assert paging.render_part(Document(""), 1, source_url="u", status_line="s").ok


def test_an_assistant_runs_calls_share_the_text_of_their_conversation(editor, group_factory):
    # Issue 29 finding 6: an assistant run's call carries a per-call reference
    # ("assistant:<run>:<step>:<index>") as its free text; the text kept for one step was
    # never found by the next step, so every later part was a new fetch and a new approval.
    from django_webfetch.assistant.calls import call_ref
    from django_webfetch.models import AssistantRun, Conversation, RunOrigin

    group_factory("web", enabled=True)
    tool = default_registry.get("fetch_external_url")

    def run_in(conversation):
        return AssistantRun.objects.create(conversation=conversation, user=editor)

    def run_call(run, step, index=0):
        return ToolCall.objects.create(
            tool="fetch_external_url",
            group="web",
            user=editor,
            conversation=call_ref(run, step, index),
            **RunOrigin(run.pk, step, index).fields(),
        )

    chat = Conversation.objects.create(owner=editor)
    first_run = run_in(chat)
    first = run_call(first_run, 1)
    kept = paging.keep(
        "fetch_external_url",
        _context(first),
        "https://a.example/",
        Document("x" * 50_000),
        mode="main",
        status_line="HTTP 200",
    )
    assert kept is not None and kept.conversation == f"assistant-conversation:{chat.pk.hex}"
    page_two = {"url": "https://a.example/", "page": 2}
    # The next step of the same run, and a later run of the same conversation, read it.
    for later in (run_call(first_run, 2), run_call(run_in(chat), 1, 3)):
        assert paging.find("fetch_external_url", _context(later), "https://a.example/", "main")
        invocation = ToolInvocation(tool.name, page_two, editor, str(later.pk))
        assert not ToolApprovalRule.requires_approval(tool, invocation, _context(later))
    # Another conversation of the same editor does not; nor does a call that only claims
    # the run's reference as its free text.
    other = run_call(run_in(Conversation.objects.create(owner=editor)), 1)
    forged = _call(editor, call_ref(first_run, 2, 0))
    for call in (other, forged):
        assert (
            paging.find("fetch_external_url", _context(call), "https://a.example/", "main") is None
        )
        invocation = ToolInvocation(tool.name, page_two, editor, str(call.pk))
        assert ToolApprovalRule.requires_approval(tool, invocation, _context(call))


def test_mcp_calls_of_one_token_share_their_text_and_the_text_is_keyed_not_copied(editor):
    first = _call(editor, "mcp:token-7")
    kept = paging.keep(
        "fetch_external_url",
        _context(first),
        "https://a.example/",
        Document("x" * 30_000),
        mode="main",
        status_line="HTTP 200",
    )
    assert "mcp:token-7" not in kept.conversation  # a digest, not the caller's text
    later = _context(_call(editor, "mcp:token-7"))
    assert paging.find("fetch_external_url", later, "https://a.example/", "main") == kept
    another_token = _context(_call(editor, "mcp:token-8"))
    assert paging.find("fetch_external_url", another_token, "https://a.example/", "main") is None
