"""Provider answers are not trusted too much: a cut answer is marked incomplete, the reported
model is kept, the server's own error text is kept for operators only, and the context is
kept within the model's window (in tokens, from the usage the server reports).

The scripted provider speaks the real OpenAI / Anthropic wire formats in the lab; its
``context_window`` refuses a request like llama.cpp's ``llama-server`` past ``--ctx-size``.
"""

from __future__ import annotations

import json
import logging

import pytest

from django_webfetch.models import AssistantRun, RunEvent

from .helpers import ask
from .provider import Turn, tool_results

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"], indirect=True)


@BOTH
def test_a_cut_answer_is_marked_incomplete(api, provider):
    cut = "length" if provider.kind == "openai" else "max_tokens"
    provider.add(Turn(text="The opening hours are Monday to", finish=cut))
    run = ask(api, "When are you open?")
    assert run["state"] == "completed", run
    assert run["incomplete"] is True
    assert run["final_message"]["incomplete"] is True
    assert run["final_message"]["content"] == "The opening hours are Monday to"
    assert AssistantRun.objects.get(pk=run["id"]).incomplete


@BOTH
def test_a_whole_answer_is_not_incomplete_and_the_reported_model_is_kept(api, provider):
    provider.add(Turn(text="Whole.", model="lab-model-2026-q4_k_m"))
    run = ask(api, "hi")
    assert (run["incomplete"], run["final_message"]["incomplete"]) == (False, False)
    assert run["model"] == "lab-model"  # configured
    assert run["reported_model"] == "lab-model-2026-q4_k_m"  # what the server said
    assert run["final_message"]["reported_model"] == "lab-model-2026-q4_k_m"


def test_the_editor_page_says_an_answer_is_incomplete():
    from pathlib import Path

    from django_webfetch.cms.views import _strings

    source = Path("django_webfetch/cms/static/django_webfetch/cms/assistant.js").read_text()
    assert "T.incomplete" in source and "incomplete" in _strings()
    assert "length limit" in str(_strings()["incomplete"])


@BOTH
def test_the_providers_error_text_is_for_operators_only(
    api, provider, client, superuser, caplog, settings
):
    secret_echo = (
        "Incorrect API key provided: sk-lab-secret. "
        "Authorization: Bearer sk-abcdefghijklmnopqrstuvwx"
    )
    explanation = "model 'lab-model' does not support tools " + "x" * 5000
    provider.add(Turn(status=400, error={"message": f"{explanation} {secret_echo}"}))
    with caplog.at_level(logging.WARNING, logger="django_webfetch.assistant"):
        run = ask(api, "hi")
    assert (run["state"], run["error_code"]) == ("failed", "provider_rejected"), run
    stored = AssistantRun.objects.get(pk=run["id"]).provider_error
    assert "does not support tools" in stored
    assert len(stored) <= 2000
    assert "sk-lab-secret" not in stored and "sk-abcdefghijklmnopqrstuvwx" not in stored
    # The log line has it (bounded, redacted) ...
    [line] = [r.getMessage() for r in caplog.records if "provider failure" in r.getMessage()]
    assert "provider_rejected" in line and "does not support tools" in line
    assert "sk-lab-secret" not in line
    # ... the admin's run page shows it ...
    client.force_login(superuser)
    page = client.get(f"/admin/django_webfetch/assistantrun/{run['id']}/change/").content
    assert b"does not support tools" in page
    # ... and neither the editor (API, events) nor the model ever gets it.
    assert "does not support tools" not in json.dumps(api.get(f"/api/runs/{run['id']}/").json())
    events = api.get(f"/api/runs/{run['id']}/events/").content.decode()
    assert "does not support tools" not in events
    assert all("does not support" not in json.dumps(e.data) for e in RunEvent.objects.all())
    assert "HTTP 400" in run["error_message"]


@pytest.fixture
def bulky(tool_registry):
    """A tool that answers 7,000 bytes, with no approval (no network)."""
    from django_webfetch.net.policy import Scope
    from django_webfetch.tools import Tool, ToolResult

    class Bulky(Tool):
        name = "assistant_bulky"
        group = "assistant-test"
        scope = Scope.NONE
        enabled_by_default = True
        description = "Answer 7,000 bytes (assistant tests)."

        def execute(self, arguments, context):
            return ToolResult(content=f"result {context.call_id} " + "w" * 7_000)

    tool_registry.register(Bulky)
    return Bulky


def five_calls_then_quote(provider):
    provider.add(*[Turn(tool_calls=[("assistant_bulky", {})]) for _ in range(5)])
    provider.add(lambda record: Turn(text=f"{len(tool_results(record))} results read."))


def test_without_a_context_window_the_server_refuses_and_says_why(api, provider, bulky):
    """The issue's case: 4,096 tokens of context on the server, no window configured."""
    provider.context_window = 4096
    five_calls_then_quote(provider)
    run = ask(api, "read them all")
    assert (run["state"], run["error_code"]) == ("failed", "provider_rejected"), run
    stored = AssistantRun.objects.get(pk=run["id"]).provider_error
    assert "exceeds the available context size" in stored and '"n_ctx": 4096' in stored, stored
    assert "context size" not in run["error_message"]


@pytest.mark.parametrize("window", [4096, 6000, 9000])
def test_the_context_window_is_kept_by_trimming_old_results(api, provider, bulky, settings, window):
    settings.WEBFETCH_ASSISTANT_CONTEXT_TOKENS = window
    settings.WEBFETCH_ASSISTANT_MAX_TOKENS = 256
    provider.context_window = window
    five_calls_then_quote(provider)
    run = ask(api, "read them all")
    assert run["state"] == "completed", run
    assert run["final_message"]["content"] == "5 results read."
    sizes = [len(json.dumps(r.body)) // 4 for r in provider.requests]
    assert len(sizes) == 6 and max(sizes) <= window - 256, sizes
    # The newest result always goes whole; older ones were replaced by a note.
    last = tool_results(provider.requests[-1])
    assert last[-1].endswith("w" * 7_000)
    assert any(r.startswith("[result omitted:") for r in last)


def test_a_request_too_big_for_the_window_fails_before_it_is_sent(api, provider, settings):
    settings.WEBFETCH_ASSISTANT_CONTEXT_TOKENS = 300
    settings.WEBFETCH_ASSISTANT_MAX_TOKENS = 256
    run = ask(api, "x" * 2000)
    assert (run["state"], run["error_code"]) == ("failed", "context_exceeded"), run
    assert "context window" in run["error_message"]
    assert provider.requests == []
