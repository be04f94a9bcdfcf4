"""Conversations that stay (issue 20), in a real browser: the page reopens the editor's
conversation after a reload and follows the paused run to its answer; an editor who left
is told by the toolbar when the approval came and finds the answer; the approver's deny
comment reaches the editor's card; conversations are renamed and deleted.

Each test saves a screenshot of every step under ``tests/artifacts/browser/<test>/``.
"""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.lab]

expect = pytest.importorskip("playwright.sync_api").expect

EXTERNAL = "news.lab.example"
WAITING = re.compile(r"\bis-awaiting_approval\b")


def mark_page(page):
    page.evaluate("window.__notReloaded = true")


def not_reloaded(page):
    return page.evaluate("window.__notReloaded === true")


def last_turn(page):
    return page.locator(".webfetch-turn-assistant").last


def ask_for_a_page(editor, site, path):
    """The editor asks about an external page: the call waits for an approver."""
    editor.goto(f"{site.url}/assistant/")
    editor.locator("#conversation-new").click()
    editor.fill("#chat-input", f"Please summarise http://{EXTERNAL}{path}")
    editor.press("#chat-input", "Enter")
    turn = last_turn(editor)
    call = turn.locator(".webfetch-call").first
    expect(call).to_have_class(WAITING, timeout=30_000)
    expect(turn.locator(".webfetch-progress")).to_have_text("Waiting for an approver…")
    return turn, call


def card_for(admin, site, path):
    admin.goto(f"{site.url}/assistant/#approvals")
    card = admin.locator(f'.webfetch-card:has-text("{path}")')
    expect(card).to_contain_text("editor asks to run fetch_external_url")
    return card


def test_a_reload_reopens_the_conversation_and_the_run_finishes_on_the_page(
    lab, example_site, login, shots
):
    lab.dns.set(EXTERNAL, a=[lab.PUBLIC_V4[0]])
    editor = login("editor")
    turn, call = ask_for_a_page(editor, example_site, "/page?id=reload")
    shots(editor, "the-call-waits")

    editor.reload()
    mark_page(editor)
    # The conversation is back: listed as the current one, the message, the waiting call.
    current = editor.locator(".webfetch-conversation.is-current")
    expect(current).to_contain_text("/page?id=reload")
    expect(editor.locator(".webfetch-turn-user").last).to_contain_text("/page?id=reload")
    turn = last_turn(editor)
    call = turn.locator(".webfetch-call").first
    expect(call).to_have_class(WAITING)
    expect(call).to_contain_text("fetch_external_url")
    expect(turn.locator(".webfetch-progress")).to_have_text("Waiting for an approver…")
    shots(editor, "reopened-after-the-reload")
    assert lab.requests == []

    admin = login("admin")
    card = card_for(admin, example_site, "/page?id=reload")
    card.locator("button.webfetch-approve").click()
    expect(card).to_contain_text("Approved.")

    # The reloaded page follows the run by itself to its answer.
    expect(turn).to_have_attribute("data-state", "completed", timeout=40_000)
    expect(call).to_have_class(re.compile(r"\bis-succeeded\b"))
    answer = turn.locator(".webfetch-answer")
    expect(answer).to_contain_text("Offline rule-based planner")
    expect(answer).to_contain_text(f"fetch_external_url (http://{EXTERNAL}/page?id=reload)")
    shots(editor, "the-answer-arrives-on-the-reopened-page")
    assert not_reloaded(editor)
    assert editor.locator("#assistant").get_attribute("data-transport") in ("stream", "poll")
    assert [(r.host, r.path) for r in lab.requests] == [(EXTERNAL, "/page?id=reload")]


def test_the_editor_leaves_the_admin_approves_the_editor_comes_back_to_the_answer(
    lab, example_site, login, shots
):
    lab.dns.set(EXTERNAL, a=[lab.PUBLIC_V4[0]])
    editor = login("editor")
    ask_for_a_page(editor, example_site, "/page?id=later")
    before = editor.request.get(f"{example_site.url}/assistant/status/").json()["answers"]

    editor.goto(f"{example_site.url}/about/")  # the editor leaves the assistant
    mark_page(editor)
    badge = editor.locator(".webfetch-badges .webfetch-answers")
    expect(badge).to_be_hidden()
    shots(editor, "the-editor-is-elsewhere")

    admin = login("admin")
    waiting = admin.locator(".webfetch-badges .webfetch-waiting")
    admin.goto(f"{example_site.url}/about/")
    expect(waiting).to_contain_text(re.compile(r"[1-9]\d* calls? waits? for your approval"))
    card = card_for(admin, example_site, "/page?id=later")
    card.locator("button.webfetch-approve").click()
    expect(card).to_contain_text("Approved.")

    # The editor's toolbar tells them, without a reload (it reads the status every 10 s).
    expected = before + 1
    label = f"{expected} answer{'s' if expected != 1 else ''} arrived after an approval"
    expect(badge).to_have_text(label, timeout=40_000)
    expect(badge).to_be_visible()
    assert not_reloaded(editor)
    shots(editor, "the-toolbar-says-an-answer-arrived")

    badge.click()
    editor.wait_for_url(re.compile(r"/assistant/"))
    turn = last_turn(editor)
    expect(turn).to_have_attribute("data-state", "completed")
    expect(turn.locator(".webfetch-call").first).to_have_class(re.compile(r"\bis-succeeded\b"))
    expect(turn.locator(".webfetch-answer")).to_contain_text(
        f"fetch_external_url (http://{EXTERNAL}/page?id=later) returned:"
    )
    expect(turn.locator(".webfetch-answer details.webfetch-fenced summary")).to_contain_text(
        "third party"
    )
    shots(editor, "back-to-the-answer")
    # Seen: the badge is gone from the toolbar.
    expect(editor.locator(".webfetch-badges .webfetch-answers")).to_be_hidden(timeout=15_000)
    editor.goto(f"{example_site.url}/about/")
    expect(editor.locator(".webfetch-badges .webfetch-answers")).to_be_hidden()
    assert [(r.host, r.path) for r in lab.requests] == [(EXTERNAL, "/page?id=later")]


def test_the_approvers_deny_comment_is_shown_on_the_editors_card(lab, example_site, login, shots):
    lab.dns.set(EXTERNAL, a=[lab.PUBLIC_V4[0]])
    editor = login("editor")
    turn, call = ask_for_a_page(editor, example_site, "/page?id=deny")
    mark_page(editor)

    admin = login("admin")
    card = card_for(admin, example_site, "/page?id=deny")
    comment = "Not this one: the press office sends us the text."
    card.locator("input[name=comment]").fill(comment)
    card.locator("button.webfetch-deny").click()
    expect(card).to_contain_text("Denied.")
    shots(admin, "denied-with-a-comment")

    shown = f"The approver's comment: “{comment}”"
    expect(call).to_have_class(re.compile(r"\bis-denied\b"), timeout=40_000)
    expect(call.locator(".webfetch-comment")).to_have_text(shown)
    expect(turn).to_have_attribute("data-state", "completed", timeout=40_000)
    answer = turn.locator(".webfetch-answer")
    expect(answer).to_contain_text("an approver denied the request")
    assert "[tool error" not in answer.inner_text()
    assert "approval_denied" not in answer.inner_text()
    shots(editor, "the-comment-on-the-card")
    assert not_reloaded(editor)

    editor.reload()  # the comment is part of the run, not of this page's memory
    expect(last_turn(editor).locator(".webfetch-call .webfetch-comment")).to_have_text(shown)
    assert lab.requests == []


def test_conversations_are_renamed_and_deleted(lab, example_site, login, shots):
    editor = login("editor")
    editor.goto(f"{example_site.url}/assistant/")
    editor.locator("#conversation-new").click()
    editor.fill("#chat-input", "Which pages does this site have?")
    editor.press("#chat-input", "Enter")
    expect(last_turn(editor)).to_have_attribute("data-state", "completed", timeout=30_000)
    current = editor.locator(".webfetch-conversation.is-current")
    expect(current.locator(".webfetch-open")).to_have_text("Which pages does this site have?")
    shots(editor, "the-new-conversation-is-listed")

    current.locator(".webfetch-rename").click()
    field = current.locator(".webfetch-rename-form input")
    expect(field).to_be_focused()
    field.fill("Our pages")
    field.press("Enter")
    expect(current.locator(".webfetch-open")).to_have_text("Our pages")
    shots(editor, "renamed")
    editor.reload()
    current = editor.locator(".webfetch-conversation.is-current")
    expect(current.locator(".webfetch-open")).to_have_text("Our pages")
    expect(last_turn(editor).locator(".webfetch-call").first).to_contain_text("list_pages")
    # The rename editor has a Cancel button: it leaves the title as it was (issue 31).
    current.locator(".webfetch-rename").click()
    current.locator(".webfetch-rename-form input").fill("Not this")
    current.locator(".webfetch-rename-cancel").click()
    expect(current.locator(".webfetch-rename-form")).to_have_count(0)
    expect(current.locator(".webfetch-open")).to_have_text("Our pages")
    [(title,)] = example_site.query(
        "SELECT title FROM django_webfetch_conversation WHERE title = ?", "Our pages"
    )

    editor.once("dialog", lambda dialog: dialog.accept())
    current.locator(".webfetch-delete").click()
    expect(editor.locator('.webfetch-conversation:has-text("Our pages")')).to_have_count(0)
    expect(editor.locator("#chat-empty")).to_be_visible()
    expect(editor.locator(".webfetch-turn")).to_have_count(0)
    shots(editor, "deleted")
    assert example_site.query(
        "SELECT COUNT(*) FROM django_webfetch_conversation WHERE title = ?", "Our pages"
    ) == [(0,)]
