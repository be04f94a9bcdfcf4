"""The loop with a real provider client (openai / anthropic SDK through Pydantic AI) talking
to the scripted provider in the lab, through the guard."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch.models import AssistantRun, EgressEvent, Message, ToolCall
from tests.settle import settled_call, settled_run

from .helpers import ask, run_of
from .provider import Turn, offered_tools, tool_results

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"], indirect=True)


@pytest.fixture
def api(editor, settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    client = APIClient()
    client.force_login(editor)
    return client


@BOTH
def test_a_turn_with_no_tool(api, provider):
    provider.add(Turn(text="Paris is the capital of France."))
    run = ask(api, "What is the capital of France?")
    assert run["state"] == "completed", run
    assert run["offline"] is False
    assert run["provider"] == provider.kind
    assert run["final_message"]["content"] == "Paris is the capital of France."
    [request] = provider.requests
    assert request.kind == provider.kind
    # The endpoint's write-only secret is the SDK's API key.
    credentials = {request.headers.get("authorization"), request.headers.get("x-api-key")}
    assert credentials & {"Bearer sk-lab-secret", "sk-lab-secret"}, credentials
    assert EgressEvent.objects.filter(group_slug="assistant", decision="fetched").count() == 1


# -- helpers ----------------------------------------------------------------------------------

BEGIN = "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce="
END = "<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce="


def quote_results(record):
    """A scripted final turn that quotes every tool result it was sent."""
    return Turn(text="From the tools:\n" + "\n".join(tool_results(record)))


def approve_in_admin(client, approver, call_ids, comment="checked"):
    from django.contrib.admin import helpers

    client.force_login(approver)
    response = client.post(
        "/admin/django_webfetch/toolcall/",
        {
            "action": "approve_selected",
            helpers.ACTION_CHECKBOX_NAME: list(call_ids),
            "confirm": "yes",
            "comment": comment,
        },
        follow=True,
    )
    assert response.status_code == 200
    assert any("approved" in str(m) for m in response.context["messages"]), list(
        response.context["messages"]
    )


# -- approval, resume, the fenced answer ------------------------------------------------------


@BOTH
def test_tool_call_waits_for_approval_then_resumes_by_itself(api, provider, web, client, approver):
    url = web.url("news.lab.example", "/page?topic=lab", scheme="https")
    provider.add(Turn(tool_calls=[("fetch_external_url", {"url": url})]), quote_results)
    run = ask(api, "Summarise the lab news page")
    assert run["state"] == "waiting_for_approval", run
    [step] = run["steps"]
    [call] = step["tool_calls"]
    assert (call["tool"], call["state"], call["requires_approval"]) == (
        "fetch_external_url",
        "awaiting_approval",
        True,
    )
    assert [r for r in web.requests if r.path.startswith("/page")] == []
    assert offered_tools(provider.requests[0]) == ["fetch_external_url"]

    approve_in_admin(client, approver, [call["id"]])

    final = run_of(api, run["id"])
    assert final["state"] == "completed", final
    assert final["step_count"] == 2
    text = final["final_message"]["content"]
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert "Lab page" in text
    # The model got the fenced result as the tool's answer.
    [sent] = tool_results(provider.requests[1])
    assert sent.count(BEGIN) == 1 and sent.count(END) == 1
    assert [s["tool_calls"][0]["state"] for s in final["steps"][:1]] == ["succeeded"]
    kinds = [e["kind"] for e in api.get(f"/api/runs/{run['id']}/events/").json()["events"]]
    assert (
        kinds.index("waiting_for_approval") < kinds.index("tool_results") < kinds.index("completed")
    )
    roles = [
        m["role"]
        for m in api.get(f"/api/conversations/{final['conversation']}/").json()["messages"]
    ]
    assert roles == ["user", "assistant", "tool", "assistant"]


def test_denied_call_goes_back_to_the_model_in_our_words(api, provider, web, approver):
    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": "https://news.lab.example/page"})]),
        quote_results,
    )
    run = ask(api, "read it")
    [call] = run["steps"][0]["tool_calls"]
    approver_api = APIClient()
    approver_api.force_login(approver)
    assert approver_api.post(f"/api/calls/{call['id']}/deny/", {}).status_code == 200
    final = run_of(api, run["id"])
    assert final["state"] == "completed"
    [sent] = tool_results(provider.requests[1])
    assert sent == "[tool error: approval_denied] A reviewer denied this tool call."
    assert final["steps"][0]["tool_calls"][0]["state"] == "denied"
    assert web.requests == []


def test_expired_call_resumes_the_run(api, provider, web):
    from datetime import timedelta

    from django.utils import timezone

    from django_webfetch.assistant import services

    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": "https://news.lab.example/page"})]),
        quote_results,
    )
    run = ask(api, "read it")
    [call] = run["steps"][0]["tool_calls"]
    ToolCall.objects.filter(pk=call["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    services.sweep()
    final = run_of(api, run["id"])
    assert final["state"] == "completed", final
    [sent] = tool_results(provider.requests[1])
    assert sent.startswith("[tool error: approval_expired]")


def test_two_tool_calls_in_one_step_resume_only_when_both_finished(
    api, provider, web, client, approver
):
    first = web.url("news.lab.example", "/page?n=1", scheme="https")
    second = web.url("news.lab.example", "/plain", scheme="https")
    provider.add(
        Turn(
            tool_calls=[
                ("fetch_external_url", {"url": first}),
                ("fetch_external_url", {"url": second}),
            ]
        ),
        quote_results,
    )
    run = ask(api, "read both")
    calls = run["steps"][0]["tool_calls"]
    assert [c["state"] for c in calls] == ["awaiting_approval", "awaiting_approval"]
    approve_in_admin(client, approver, [calls[0]["id"]])
    middle = run_of(api, run["id"])
    assert middle["state"] == "waiting_for_approval"
    assert len(provider.requests) == 1
    approve_in_admin(client, approver, [calls[1]["id"]])
    final = run_of(api, run["id"])
    assert final["state"] == "completed", final
    results = tool_results(provider.requests[1])
    assert len(results) == 2
    assert "Lab page" in results[0] and "hello from the lab" in results[1]
    assert len(provider.requests) == 2


# -- malformed tool calls ---------------------------------------------------------------------


def test_malformed_tool_calls_become_errors_the_model_sees_and_are_recorded(
    api, provider, run_tools
):
    from tests.runs.conftest import EchoTool

    EchoTool.needs_approval = False
    provider.add(
        Turn(
            tool_calls=[
                ("runs_echo", '{"text": "unterminated'),  # bad JSON
                ("no_such_tool", {"x": 1}),  # unknown
                ("runs_admin_only", {"text": "x"}),  # not offered to this editor
                ("runs_echo", {"text": 5}),  # fails the schema
                ("runs_echo", {"text": "fine"}),
            ]
        ),
        quote_results,
    )
    run = ask(api, "go")
    final = run_of(api, run["id"])
    assert final["state"] == "completed", final
    calls = final["steps"][0]["tool_calls"]
    assert [(c["tool"], c["state"], c["reason"]) for c in calls] == [
        ("runs_echo", "failed", "invalid_arguments"),
        ("no_such_tool", "failed", "tool_not_offered"),
        ("runs_admin_only", "failed", "tool_not_offered"),
        ("runs_echo", "failed", "invalid_arguments"),
        ("runs_echo", "succeeded", ""),
    ]
    sent = tool_results(provider.requests[1])
    assert sent[0] == "[tool error: invalid_arguments] The arguments are not valid JSON."
    assert sent[1].startswith("[tool error: tool_not_offered]")
    assert sent[2].startswith("[tool error: tool_not_offered]")
    assert sent[3].startswith("[tool error: invalid_arguments]") and "text" in sent[3]
    assert sent[4] == "echo: fine"
    assert EchoTool.executed == [{"text": "fine"}]
    assert ToolCall.objects.filter(run__isnull=False).count() == 5
    assert offered_tools(provider.requests[0]) == ["runs_echo", "runs_write"]


# -- provider failures --------------------------------------------------------------------------


@BOTH
def test_provider_500_is_retried_once(api, provider):
    # The retry sends the very same request: the script answers a repeat with ``repeat``.
    provider.add(Turn(status=500, repeat=Turn(text="second time lucky")))
    run = ask(api, "hi")
    assert run["state"] == "completed"
    assert run["final_message"]["content"] == "second time lucky"
    assert len(provider.requests) == 2


@BOTH
def test_provider_500_twice_fails_with_a_code(api, provider):
    provider.add(Turn(status=500, repeat=Turn(status=503)))
    run = ask(api, "hi")
    assert (run["state"], run["error_code"]) == ("failed", "provider_error")
    assert "HTTP 503" in run["error_message"]
    assert len(provider.requests) == 2


@BOTH
def test_provider_garbage_fails_with_a_code(api, provider):
    provider.add(Turn(raw=b"<html>not json", repeat=Turn(raw=b'{"unexpected": true}')))
    run = ask(api, "hi")
    assert (run["state"], run["error_code"]) == ("failed", "provider_bad_response")
    assert "not json" not in run["error_message"]


def test_provider_timeout_fails_with_a_code(api, provider, settings):
    settings.WEBFETCH_ASSISTANT_TIMEOUT = 1.0
    provider.add(Turn(text="late", delay=2.5, repeat=Turn(text="late again", delay=2.5)))
    run = ask(api, "hi")
    assert (run["state"], run["error_code"]) == ("failed", "provider_timeout")
    assert len(provider.requests) == 2


def test_provider_4xx_is_not_retried(api, provider):
    provider.add(Turn(status=401), Turn(text="never"))
    run = ask(api, "hi")
    assert (run["state"], run["error_code"]) == ("failed", "provider_rejected")
    assert len(provider.requests) == 1


def test_max_steps(api, provider, run_tools, settings):
    from tests.runs.conftest import EchoTool

    settings.WEBFETCH_ASSISTANT_MAX_STEPS = 3
    EchoTool.needs_approval = False
    provider.add(*[Turn(tool_calls=[("runs_echo", {"text": f"{i}"})]) for i in range(5)])
    run = ask(api, "loop forever")
    assert (run["state"], run["error_code"], run["step_count"]) == ("failed", "max_steps", 3)
    assert "3 steps" in run["error_message"]
    assert len(provider.requests) == 3


# -- the provider's own traffic is governed by the guard --------------------------------------


def test_provider_endpoint_refused_by_the_guard(api, provider, host_entry_factory):
    from .provider import HOST

    host_entry_factory("assistant", HOST, list="deny")
    provider.add(Turn(text="never sent"))
    run = ask(api, "hi")
    assert (run["state"], run["error_code"]) == ("failed", "egress_denied")
    assert "denylist" in run["error_message"]
    assert provider.requests == []
    assert EgressEvent.objects.filter(group_slug="assistant", decision="denied").exists()


def test_disabled_group_falls_back_to_the_offline_planner(api, provider, group_factory):
    group_factory("assistant", enabled=False)
    run = ask(api, "hi")
    assert run["offline"] is True and run["state"] == "completed"
    assert provider.requests == []


def test_nothing_duplicated_on_the_messages(api, provider):
    provider.add(Turn(text="one"))
    run = ask(api, "hi")
    assert Message.objects.filter(run_id=run["id"]).count() == 2
    assert AssistantRun.objects.get(pk=run["id"]).history[-1]["kind"] == "response"


def test_expiry_is_enforced_when_the_run_is_read(api, provider, web):
    """No periodic task: reading the run expires its due approval and resumes it."""
    from datetime import timedelta

    from django.utils import timezone

    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": "https://news.lab.example/page"})]),
        quote_results,
    )
    run = ask(api, "read it")
    [call] = run["steps"][0]["tool_calls"]
    ToolCall.objects.filter(pk=call["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    # The read expires the call; its final transition resumes the run in the background.
    read = api.get(f"/api/runs/{run['id']}/").json()
    assert read["steps"][0]["tool_calls"][0]["state"] == "expired", read
    final = run_of(api, run["id"])
    assert final["state"] == "completed", final
    assert final["steps"][0]["tool_calls"][0]["state"] == "expired"


def test_a_forged_call_reference_is_never_used(editor, provider, run_tools, user_factory):
    """The call reference is free text on ToolCall: a call someone else recorded under this
    run's reference is not taken for the run's own."""
    import uuid

    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from django_webfetch import runs
    from django_webfetch.assistant import services
    from django_webfetch.assistant.history import dump
    from tests.runs.conftest import EchoTool

    EchoTool.needs_approval = False
    provider.add(Turn(tool_calls=[("runs_echo", {"text": "mine"})]), quote_results)
    conversation = services.create_conversation(editor)
    run_id = uuid.uuid4()
    # The forged call is recorded first, under the reference step 1 / index 0 will use.
    forged = runs.request_call(
        "runs_echo",
        {"text": "forged"},
        user=user_factory(),
        conversation=f"assistant:{run_id.hex}:1:0",
    )
    assert settled_call(forged).state == "succeeded"
    run = AssistantRun.objects.create(
        id=run_id,
        conversation=conversation,
        user=editor,
        provider="openai",
        model_name="lab-model",
        history=dump([ModelRequest(parts=[UserPromptPart("go")])]),
    )
    services.advance(run.pk)
    # The run's own call runs in the background; its end resumes the run there.
    run = settled_run(run)
    assert run.state == "completed", run.error_code
    assert tool_results(provider.requests[1]) == ["echo: mine"]


def test_a_big_tool_result_reaches_the_model_bounded_with_its_fence(
    api, provider, tool_registry, settings
):
    """A tool (a plugin, say) answering far more than the bound: the model gets at most
    WEBFETCH_ASSISTANT_MAX_RESULT_BYTES, every fence closed; the record keeps the whole."""
    from django_webfetch.net.policy import Scope
    from django_webfetch.text.fence import fence
    from django_webfetch.tools import Tool, ToolResult

    class Big(Tool):
        name = "assistant_big"
        group = "assistant-test"
        scope = Scope.NONE
        enabled_by_default = True
        description = "Answer a lot (assistant tests)."

        def execute(self, arguments, context):
            page = fence("é" * 19_000, source_url="https://big.example/", status_line="HTTP 200")
            return ToolResult(content=page * 4)

    tool_registry.register(Big)
    provider.add(Turn(tool_calls=[("assistant_big", {})]), quote_results)
    run = ask(api, "go big")
    assert run["state"] == "completed", run
    [sent] = tool_results(provider.requests[1])
    assert len(sent.encode()) <= 50_000
    assert sent.count(BEGIN) == sent.count(END) >= 1
    assert sent.rstrip().endswith("bytes]")
    call = ToolCall.objects.get(pk=run["steps"][0]["tool_calls"][0]["id"])
    assert len(call.result["content"].encode()) > 150_000


def test_absurd_tool_arguments_are_a_tool_error(api, provider, run_tools):
    """Arguments nested 100,000 deep, or a 1 MB string of garbage: recorded, refused, the
    model reads a tool error, nothing recurses."""
    deep = "[" * 100_000 + "]" * 100_000
    provider.add(
        Turn(tool_calls=[("runs_echo", deep), ("runs_echo", "{" + "x" * 1_000_000)]),
        quote_results,
    )
    run = ask(api, "go")
    final = run_of(api, run["id"])
    assert final["state"] == "completed", final
    calls = final["steps"][0]["tool_calls"]
    assert [(c["state"], c["reason"]) for c in calls] == [("failed", "invalid_arguments")] * 2
    sent = tool_results(provider.requests[1])
    assert sent == ["[tool error: invalid_arguments] The arguments are not valid JSON."] * 2
    for call in ToolCall.objects.filter(run__isnull=False):
        assert len(str(call.arguments)) <= 10_100


def test_arguments_the_store_refuses_are_recorded_as_refused(api, provider, run_tools):
    """runs refuses to store arguments over 16 KiB, NUL characters, ...: the assistant
    records the call with a marker instead, and the model reads why."""
    provider.add(
        Turn(
            tool_calls=[
                ("runs_echo", {"text": "x" * 20_000}),
                ("runs_echo", {"text": "a\u0000b"}),
                ("runs\u0000echo", {"text": "x"}),
            ]
        ),
        quote_results,
    )
    run = ask(api, "go")
    final = run_of(api, run["id"])
    assert final["state"] == "completed", final
    calls = final["steps"][0]["tool_calls"]
    assert [(c["tool"], c["state"]) for c in calls] == [
        ("runs_echo", "failed"),
        ("runs_echo", "failed"),
        ("runs?echo", "failed"),
    ]
    sent = tool_results(provider.requests[1])
    assert sent[0] == (
        "[tool error: invalid_arguments] The arguments were refused (arguments_too_large)."
    )
    assert sent[1].startswith("[tool error: invalid_arguments] The arguments were refused (")
    assert sent[2].startswith("[tool error: tool_not_offered]")
