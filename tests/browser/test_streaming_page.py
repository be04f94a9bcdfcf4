"""The answer's text grows on the page as the model writes it (issue 20), in a real browser
against the example site, with the scripted OpenAI-compatible provider of the assistant
tests as its model (in the lab, through the guard).

Its own module: the provider configured here stays configured for the module's site.
Skipped, naming the status, while the site does not serve the run event stream
(``GET /api/runs/{id}/stream/``, docs/assistant.rst).
"""

from __future__ import annotations

import pytest

from tests.assistant.conftest import PROVIDER_ADDRESS, provider_server  # noqa: F401 - fixture
from tests.assistant.provider import HOST, PORT, Turn

pytestmark = [pytest.mark.browser, pytest.mark.lab]

expect = pytest.importorskip("playwright.sync_api").expect

ENDPOINT = (
    "from django_webfetch.models import ConfiguredEndpoint, ToolGroup; "
    "g, _ = ToolGroup.objects.update_or_create(slug='assistant', "
    "defaults={'enabled': True, 'scope': 'configured_endpoint'}); "
    "ConfiguredEndpoint.objects.create(group=g, name='lab model', "
    f"base_url='https://{HOST}:{PORT}/openai/v1', provider_kind='openai', "
    "model_name='lab-model', auth_header_value='sk-lab-secret')"
)

WATCH = """() => {
  window.__seen = [];
  const log = document.getElementById("chat-log");
  new MutationObserver(() => {
    const turns = log.querySelectorAll(".webfetch-turn-assistant");
    const turn = turns[turns.length - 1];
    if (!turn) { return; }
    const streamed = turn.querySelector(".webfetch-streamed");
    window.__seen.push([streamed ? streamed.textContent.length : 0,
                        turn.getAttribute("data-state") || ""]);
  }).observe(log, {subtree: true, childList: true, characterData: true, attributes: true});
}"""

PROBE = """async (url) => {
  const stop = new AbortController();
  const response = await fetch(url, {signal: stop.signal, headers: {Accept: "text/event-stream"}});
  const answer = [response.status, response.headers.get("content-type") || ""];
  stop.abort();
  return answer;
}"""


def last_turn(page):
    return page.locator(".webfetch-turn-assistant").last


@pytest.mark.long  # tens of seconds: started first (tests/conftest.py)
def test_the_answer_grows_on_the_page_before_the_run_ends(
    lab,
    example_site,
    login,
    shots,
    provider_server,  # noqa: F811 - the fixture
):
    lab.dns.set(HOST, a=[PROVIDER_ADDRESS])
    provider_server.reset()
    example_site.manage("shell", "-c", ENDPOINT)
    words = " ".join(f"word{i}" for i in range(120))
    provider_server.add(Turn(text="Hello."), Turn(text=f"Here is a long answer: {words}."))

    editor = login("editor")
    editor.goto(f"{example_site.url}/assistant/")
    editor.locator("#conversation-new").click()
    editor.fill("#chat-input", "hello")
    editor.press("#chat-input", "Enter")
    first = last_turn(editor)
    expect(first).to_have_attribute("data-state", "completed", timeout=40_000)
    status, media_type = editor.evaluate(
        PROBE, f"/api/runs/{first.get_attribute('data-run')}/stream/"
    )
    if status != 200 or not media_type.startswith("text/event-stream"):
        pytest.skip(
            f"GET /api/runs/{{id}}/stream/ answers HTTP {status} ({media_type or 'no type'}): "
            "the run event stream (issue 20, branch i20-stream) is not served by this site"
        )

    editor.evaluate(WATCH)
    editor.fill("#chat-input", "tell me more")
    editor.press("#chat-input", "Enter")
    turn = last_turn(editor)
    expect(turn).to_have_attribute("data-state", "completed", timeout=40_000)
    expect(turn.locator(".webfetch-answer")).to_contain_text("word119.")
    shots(editor, "the-streamed-answer-complete")
    assert editor.locator("#assistant").get_attribute("data-transport") == "stream"
    seen = editor.evaluate("window.__seen")
    growing = [size for size, state in seen if size and state != "completed"]
    # The text was on the page, in more than one length, before the run was completed.
    assert len(set(growing)) >= 2, seen
    assert growing == sorted(growing), seen
    assert growing[0] < len(f"Here is a long answer: {words}."), seen
