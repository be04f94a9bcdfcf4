"""Budgets through the assistant, with the real provider client talking to the scripted
provider in the lab: a provider request over budget is never sent (the editor reads why),
a tool call over budget is never run (the model reads why, as the tool's result)."""

from __future__ import annotations

import pytest

from django_webfetch.models import AssistantRun, Budget, BudgetUsage
from tests.assistant.provider import Turn, tool_results
from tests.settle import settled_run

from .conftest import EchoTool

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def ask(api, content):
    """Post a message (202: the run goes on on the background runner) and return the
    run's API answer once it settled."""
    conv = api.post("/api/conversations/", {}, format="json").json()["id"]
    response = api.post(f"/api/conversations/{conv}/messages/", {"content": content}, format="json")
    assert response.status_code == 202, response.content
    run = settled_run(response.json()["id"])
    answer = api.get(f"/api/runs/{run.pk}/")
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_provider_requests_over_budget_are_not_sent(api, provider, editor):
    Budget.objects.create(user=editor, provider_requests_per_day=1)
    provider.add(Turn(text="First answer."), Turn(text="never sent"))
    assert ask(api, "one")["state"] == "completed"
    run = ask(api, "two")
    assert run["state"] == "failed", run
    assert run["error_code"] == "budget_exceeded:provider_requests_per_day"
    assert run["error_message"].startswith(
        "Your budget of requests to the language model for today is used up (1 of 1)."
    )
    assert len(provider.requests) == 1
    assert AssistantRun.objects.get(pk=run["id"]).error_code == run["error_code"]


def test_reported_tokens_count_and_stop_the_next_request(api, provider, editor, settings):
    settings.WEBFETCH_MODEL_PRICES = {"lab-model": {"prompt": 1, "completion": 1}}
    Budget.objects.create(user=editor, provider_tokens_per_day=5)
    provider.add(Turn(text="Tokens spent."))
    assert ask(api, "one")["state"] == "completed"
    row = BudgetUsage.objects.get(user=editor)
    assert row.provider_requests == 1
    assert row.provider_tokens > 5  # what the scripted provider reported
    assert row.cost > 0
    run = ask(api, "two")
    assert run["error_code"] == "budget_exceeded:provider_tokens_per_day"
    assert len(provider.requests) == 1


def test_a_tool_call_over_budget_is_told_to_the_model(api, provider, editor, run_tools):
    EchoTool.needs_approval = False
    Budget.objects.create(user=editor, tool_calls_per_day=1)
    provider.add(
        Turn(tool_calls=[("runs_echo", {"text": "one"}), ("runs_echo", {"text": "two"})]),
        Turn(text="done"),
    )
    run = ask(api, "echo twice")
    assert run["state"] == "completed", run
    assert EchoTool.executed == [{"text": "one"}]
    first, second = tool_results(provider.requests[1])
    assert first == "echo: one"
    assert second.startswith("[tool error: budget_exceeded:tool_calls_per_day] Your budget")
    [step] = [s for s in run["steps"] if s["tool_calls"]]
    assert [c["state"] for c in step["tool_calls"]] == ["succeeded", "failed"]


def test_the_offline_planner_is_not_a_provider_request(api, editor, run_tools):
    Budget.objects.create(user=editor, provider_requests_per_day=0)
    run = ask(api, "hello")
    assert run["offline"] is True
    assert run["state"] == "completed", run
