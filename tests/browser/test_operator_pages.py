"""What the example project gives an operator, in a real browser: the metrics endpoint
(staff only) after a real fetch, and the operations overview in the admin."""

from __future__ import annotations

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.lab]

expect = pytest.importorskip("playwright.sync_api").expect


def test_the_example_serves_metrics_to_staff_and_the_operations_page(
    lab, example_site, login, browser, shots
):
    editor = login("editor")
    editor.goto(f"{example_site.url}/assistant/")
    # One call the guard refuses (a legacy numeric host), one read of the site's own page.
    for message, state in (
        ("What is on http://0x7f.1/admin please?", "is-failed"),
        ("What does /about/ say?", "is-succeeded"),
    ):
        editor.fill("#chat-input", message)
        editor.press("#chat-input", "Enter")
        turn = editor.locator(".webfetch-turn-assistant").last
        expect(turn.locator(".webfetch-call").first).to_have_class(
            re.compile(rf"\b{state}\b"), timeout=30_000
        )
        expect(turn).to_have_attribute("data-state", "completed", timeout=30_000)

    # The editor is staff (a CMS editor must be), and reads no operator's numbers.
    refused = editor.goto(f"{example_site.url}/metrics")
    assert refused is not None and refused.status == 403

    admin = login("admin")
    admin.goto(f"{example_site.url}/metrics")
    text = admin.locator("body").inner_text()
    assert "# TYPE webfetch_egress_decisions_total counter" in text
    # Counted by group, tool, outcome and reason code; never by URL, host or user.
    decisions = [
        line for line in text.splitlines() if line.startswith("webfetch_egress_decisions_total{")
    ]
    assert any(
        'outcome="denied"' in line and 'reason="legacy_numeric_host"' in line for line in decisions
    ), decisions
    calls = [line for line in text.splitlines() if line.startswith("webfetch_tool_calls_total{")]
    assert any('tool="read_page"' in line and 'state="succeeded"' in line for line in calls), calls
    assert "0x7f" not in text and "editor" not in text and "/about/" not in text
    shots(admin, "metrics")

    anonymous = browser.new_context()
    try:
        response = anonymous.new_page().goto(f"{example_site.url}/metrics")
        assert response is not None and response.status == 401
    finally:
        anonymous.close()

    admin.goto(f"{example_site.url}/admin/django_webfetch/operationsoverview/")
    expect(admin.locator("body")).to_contain_text("Egress decisions, last 24 hours")
    # The last hour's label is drawn inside the chart, not clipped (issue 31).
    right, width = admin.eval_on_selector(
        "#webfetch-decisions svg",
        "svg => { const t = svg.querySelectorAll('text.hour'); const b = t[t.length - 1].getBBox();"
        " return [b.x + b.width, svg.viewBox.baseVal.width]; }",
    )
    assert right <= width, (right, width)
    shots(admin, "operations")

    # The tool groups' list fits 1,280 px: no header runs past the window (issue 31).
    admin.goto(f"{example_site.url}/admin/django_webfetch/toolgroup/")
    overflow = admin.evaluate(
        "() => [document.documentElement.scrollWidth, window.innerWidth,"
        " document.querySelector('#result_list').getBoundingClientRect().right]"
    )
    assert admin.viewport_size["width"] == 1280
    assert overflow[0] <= overflow[1] and overflow[2] <= overflow[1], overflow
    shots(admin, "tool-groups")
