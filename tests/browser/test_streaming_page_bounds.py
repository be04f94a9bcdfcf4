"""An editor with too many event streams open (other tabs) still gets the answer: the page's
``EventSource`` is refused with ``429`` ``too_many_open`` and the page polls instead (issue
29, finding 4), in a real browser against the example site and the lab's scripted model.

Its own module: the provider configured here stays configured for the module's site."""

from __future__ import annotations

import re
import threading

import pytest

from tests.assistant.conftest import PROVIDER_ADDRESS, provider_server  # noqa: F401 - fixture
from tests.assistant.provider import HOST, Turn

from .test_streaming_page import ENDPOINT, PROBE, last_turn

pytestmark = [pytest.mark.browser, pytest.mark.lab]

expect = pytest.importorskip("playwright.sync_api").expect

#: Open ``n`` streams of the run and keep them open (as other tabs' ``EventSource`` do).
OPEN = """async ([url, n]) => {
  window.__streams = window.__streams || [];
  for (let i = 0; i < n; i++) {
    const response = await fetch(url, {headers: {Accept: "text/event-stream"}});
    const reader = response.body.getReader();
    window.__streams.push(reader);
    await reader.read();
  }
  return n;
}"""


@pytest.mark.long  # tens of seconds: started first (tests/conftest.py)
def test_a_page_refused_a_stream_polls_and_shows_the_answer(
    lab,
    example_site,
    login,
    shots,
    provider_server,  # noqa: F811 - the fixture
):
    lab.dns.set(HOST, a=[PROVIDER_ADDRESS])
    provider_server.reset()
    example_site.manage("shell", "-c", ENDPOINT)
    pause = threading.Event()
    provider_server.add(
        Turn(text="The first answer waits.", pause=pause), Turn(text="Answered by polling.")
    )
    try:
        first_tab = login("editor")
        first_tab.goto(f"{example_site.url}/assistant/")
        first_tab.locator("#conversation-new").click()
        first_tab.fill("#chat-input", "hello")
        first_tab.press("#chat-input", "Enter")
        run = last_turn(first_tab)
        expect(run).to_have_attribute("data-run", re.compile(r".+"), timeout=40_000)
        stream = f"/api/runs/{run.get_attribute('data-run')}/stream/"

        # Other tabs of the same editor hold the rest of the editor's streams (6 by default).
        other_tabs = login("editor")
        other_tabs.goto(f"{example_site.url}/assistant/")
        for _ in range(6):
            status, _type = other_tabs.evaluate(PROBE, stream)
            if status == 429:
                break
            other_tabs.evaluate(OPEN, [stream, 1])
        assert other_tabs.evaluate(PROBE, stream)[0] == 429

        page = login("editor")
        page.goto(f"{example_site.url}/assistant/")
        page.locator("#conversation-new").click()
        page.fill("#chat-input", "tell me more")
        page.press("#chat-input", "Enter")
        turn = last_turn(page)
        expect(turn).to_have_attribute("data-state", "completed", timeout=40_000)
        expect(turn.locator(".webfetch-answer")).to_contain_text("Answered by polling.")
        shots(page, "refused-stream-polled-answer")
        assert page.locator("#assistant").get_attribute("data-transport") in ("poll", "plain-poll")
    finally:
        pause.set()
