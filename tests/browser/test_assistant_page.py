"""The editors' assistant page in a real browser (Chromium driven by Playwright).

Each test saves a screenshot of every step under ``tests/artifacts/browser/<test>/``.
"""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.lab]

expect = pytest.importorskip("playwright.sync_api").expect

EXTERNAL = "news.lab.example"


def mark_page(page):
    """A marker that a reload would wipe out."""
    page.evaluate("window.__notReloaded = true")


def not_reloaded(page):
    return page.evaluate("window.__notReloaded === true")


def server_queries(lab):
    """DNS queries other than Chromium's own background look-ups of Google services."""
    google = (
        ".google.com",
        ".googleapis.com",
        ".gstatic.com",
        ".gvt1.com",
        ".googleusercontent.com",
    )
    return [q.name for q in lab.dns.queries if not q.name.rstrip(".").endswith(google)]


def last_turn(page):
    return page.locator(".webfetch-turn-assistant").last


def test_external_page_waits_for_the_approver_who_approves_from_the_toolbar(
    lab, example_site, login, shots
):
    lab.dns.set(EXTERNAL, a=[lab.PUBLIC_V4[0]])
    editor = login("editor")
    editor.goto(f"{example_site.url}/assistant/")
    mark_page(editor)
    expect(editor.locator("#provider")).to_contain_text("offline planner")
    shots(editor, "editor-opens-the-assistant")

    editor.fill("#chat-input", f"Please summarise http://{EXTERNAL}/page?id=7")
    editor.press("#chat-input", "Enter")
    turn = last_turn(editor)
    call = turn.locator(".webfetch-call").first
    # The request may be held while the run takes its first step (until runs advance in
    # the background): wait for the card as long as for an answer.
    expect(call).to_have_class(re.compile(r"\bis-awaiting_approval\b"), timeout=30_000)
    expect(call).to_contain_text("fetch_external_url")
    expect(call).to_contain_text("waiting for approval")
    expect(turn.locator(".webfetch-progress")).to_have_text("Waiting for an approver…")
    expect(turn.locator(".webfetch-progress")).to_have_class(re.compile(r"\bis-busy\b"))
    shots(editor, "the-call-waits-for-approval")
    assert lab.requests == []  # nothing was fetched before a human approved

    admin = login("admin")
    admin.goto(f"{example_site.url}/about/")
    counter = admin.get_by_text("1 call waits for your approval")
    expect(counter).to_be_visible()
    shots(admin, "approver-sees-the-toolbar-counter")
    counter.click()
    card = admin.locator(f'.webfetch-card:has-text("{EXTERNAL}")')
    expect(card).to_contain_text("editor asks to run fetch_external_url")
    expect(card).to_contain_text("id = 7")
    expect(card.locator(".webfetch-preflight")).to_contain_text("allowed when it was requested")
    expect(card.locator(".webfetch-preflight")).to_contain_text(lab.PUBLIC_V4[0])
    shots(admin, "the-approval-card")
    card.locator("button.webfetch-approve").click()
    expect(card).to_contain_text("Approved.")
    shots(admin, "approved")

    # The editor's page updates by itself: the answer and the fenced text, no reload.
    expect(turn).to_have_attribute("data-state", "completed", timeout=40_000)
    expect(call).to_have_class(re.compile(r"\bis-succeeded\b"))
    expect(turn.locator(".webfetch-answer")).to_contain_text("Offline rule-based planner")
    # The page text is shown once: in the answer that quotes it, not again under its call.
    box = turn.locator(".webfetch-answer details.webfetch-fenced")
    expect(turn.locator("details.webfetch-fenced:visible")).to_have_count(1)
    expect(box).to_have_class(re.compile(r"\bis-third-party\b"))
    expect(box.locator("summary")).to_contain_text("third party (untrusted content)")
    assert box.get_attribute("open") is None  # collapsed by default
    shots(editor, "the-answer-arrives-without-reload")
    box.locator("summary").click()
    expect(box.locator("pre")).to_contain_text("<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce=")
    expect(box.locator("pre")).to_contain_text("Lab page")
    shots(editor, "the-fenced-page-text-opened")
    assert not_reloaded(editor)
    assert [(r.host, r.path) for r in lab.requests] == [(EXTERNAL, "/page?id=7")]


def test_ask_about_this_page_answers_from_read_page_without_approval_or_egress(
    lab, example_site, login, shots
):
    events_before = example_site.egress_events()
    editor = login("editor")
    editor.goto(f"{example_site.url}/about/")
    editor.locator(".cms-toolbar").get_by_text("Assistant", exact=True).click()
    shots(editor, "the-assistant-menu")
    editor.get_by_text("Ask about this page").click()
    expect(editor.locator("#page-context")).to_contain_text("About us")
    expect(editor.locator("#chat-input")).to_have_value("What does our page /about/ say?")
    mark_page(editor)
    shots(editor, "the-page-is-the-context")

    editor.click("#chat-send")
    turn = last_turn(editor)
    expect(turn).to_have_attribute("data-state", "completed", timeout=30_000)
    call = turn.locator(".webfetch-call").first
    expect(call).to_contain_text("read_page")
    expect(call).to_have_class(re.compile(r"\bis-succeeded\b"))
    box = turn.locator(".webfetch-answer details.webfetch-fenced")
    expect(turn.locator("details.webfetch-fenced:visible")).to_have_count(1)
    expect(box.locator("summary")).to_contain_text("Text of this site's page")
    box.locator("summary").click()
    expect(box.locator("pre")).to_contain_text("founded in 1952 by Anna and Karl Beispiel")
    shots(editor, "answered-from-read-page")
    assert not_reloaded(editor)
    # No approval was asked, nothing left the site: no egress event, no DNS query, no request.
    rows = example_site.query(
        "SELECT state, requires_approval FROM django_webfetch_toolcall WHERE tool = 'read_page'"
    )
    assert rows and all(row == ("succeeded", 0) for row in rows)
    assert example_site.egress_events() == events_before
    assert lab.requests == []
    assert server_queries(lab) == []


def test_a_refused_url_shows_its_reason(lab, example_site, login, shots):
    from django_webfetch import runs

    editor = login("editor")
    editor.goto(f"{example_site.url}/assistant/")
    editor.fill("#chat-input", "What is on http://0x7f.1/admin please?")
    editor.press("#chat-input", "Enter")
    turn = last_turn(editor)
    call = turn.locator(".webfetch-call").first
    expect(call).to_contain_text("fetch_external_url")
    if not hasattr(runs, "preflight"):
        # Without the request-time pre-flight the refusal comes when the call runs.
        expect(call).to_have_class(re.compile(r"\bis-awaiting_approval\b"))
        admin = login("admin")
        admin.goto(f"{example_site.url}/assistant/#approvals")
        card = admin.locator('.webfetch-card:has-text("0x7f.1")')
        expect(card.locator(".webfetch-preflight")).to_contain_text("would be refused")
        shots(admin, "the-card-shows-the-refusal")
        card.locator("button.webfetch-approve").click()
    expect(call).to_have_class(re.compile(r"\bis-failed\b"), timeout=30_000)
    expect(call.locator(".webfetch-reason")).to_contain_text(
        "numeric host forms like 2130706433 or 0x7f.1 are refused"
    )
    # The guard refused it: said "refused" (a failure on the way is said "failed").
    expect(call).to_have_class(re.compile(r"\bis-refused\b"))
    expect(call.locator(".webfetch-state")).to_have_text("refused")
    expect(turn).to_have_attribute("data-state", "completed", timeout=30_000)
    shots(editor, "the-reason-in-plain-words")
    assert lab.requests == []


def test_a_fetch_the_guard_allowed_that_failed_on_the_network_says_failed_and_why(
    lab, example_site, login, shots
):
    """README trial 8: the card said "refused: the page could not be fetched" for a call
    the guard allowed and an approver approved, which then found no route to the server.
    It says "failed" and what failed, never "refused"."""
    # A public-looking address no lab interface has: no route to it (network_unreachable).
    unreachable = "11.0.0.66"
    assert unreachable not in lab.PUBLIC
    lab.dns.set("gone.lab.example", a=[unreachable])
    editor = login("editor")
    editor.goto(f"{example_site.url}/assistant/")
    editor.fill("#chat-input", "Please summarise http://gone.lab.example/page")
    editor.press("#chat-input", "Enter")
    turn = last_turn(editor)
    call = turn.locator(".webfetch-call").first
    expect(call).to_have_class(re.compile(r"\bis-awaiting_approval\b"), timeout=30_000)
    admin = login("admin")
    admin.goto(f"{example_site.url}/assistant/#approvals")
    card = admin.locator('.webfetch-card:has-text("gone.lab.example")')
    expect(card.locator(".webfetch-preflight")).to_contain_text("allowed when it was requested")
    card.locator("button.webfetch-approve").click()
    expect(card).to_contain_text("Approved.")

    expect(call).to_have_class(re.compile(r"\bis-failed\b"), timeout=40_000)
    expect(call.locator(".webfetch-state")).to_have_text("failed")
    expect(call.locator(".webfetch-reason")).to_have_text(
        " — the page could not be fetched. There is no route to the server's address."
    )
    expect(call).not_to_have_class(re.compile(r"\bis-refused\b"))
    expect(call).not_to_contain_text("refused")
    shots(editor, "failed-and-why")
    rows = example_site.query(
        "SELECT state, reason FROM django_webfetch_toolcall WHERE tool = 'fetch_external_url'"
        " ORDER BY created DESC LIMIT 1"
    )
    assert rows == [("failed", "fetch_error")]
    assert lab.requests == []


def test_the_chat_works_with_the_keyboard_alone_at_phone_width(lab, example_site, login, shots):
    editor = login("editor", width=390, height=844)
    editor.goto(f"{example_site.url}/assistant/")
    for _ in range(80):
        editor.keyboard.press("Tab")
        if editor.evaluate("document.activeElement.id") == "chat-input":
            break
    else:
        pytest.fail("Tab never reached the message field")
    assert editor.evaluate("document.activeElement.labels[0].textContent") == "Your message"
    editor.keyboard.type("Which pages does this site have?")
    shots(editor, "typed-with-the-keyboard")
    editor.keyboard.press("Enter")
    turn = last_turn(editor)
    expect(turn).to_have_attribute("data-state", "completed", timeout=30_000)
    # Focus is back in the message field after sending.
    assert editor.evaluate("document.activeElement.id") == "chat-input"
    call = turn.locator(".webfetch-call").first
    expect(call).to_contain_text("list_pages")
    # Tab to the collapsed page text and open it with Enter.
    for _ in range(40):
        editor.keyboard.press("Tab")
        if editor.evaluate("document.activeElement.tagName") == "SUMMARY":
            break
    else:
        pytest.fail("Tab never reached the collapsed page text")
    editor.keyboard.press("Enter")
    expect(turn.locator("details.webfetch-fenced:visible pre")).to_contain_text("Opening hours")
    # Usable at phone width: nothing is wider than the screen.
    assert editor.evaluate("document.documentElement.scrollWidth") <= 390
    shots(editor, "answered-and-opened-with-the-keyboard")
