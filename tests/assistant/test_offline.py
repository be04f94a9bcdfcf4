"""The offline planner through the whole loop and the API (no provider configured)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch.assistant.planner import OFFLINE_PREFIX
from django_webfetch.models import AssistantRun, CallState, ToolCall

from .helpers import post, run_of

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def api(editor, settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    client = APIClient()
    client.force_login(editor)
    return client


def _conversation(api):
    response = api.post("/api/conversations/", {"title": "t"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_no_tool_offered_answers_offline_labelled(api):
    conv = _conversation(api)
    run = run_of(api, post(api, "hello", conv)["id"])
    assert run["state"] == "completed"
    assert run["offline"] is True
    assert run["provider"] == "offline"
    assert run["final_message"]["content"].startswith(OFFLINE_PREFIX)
    body = api.get(f"/api/conversations/{conv}/").json()
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    events = api.get(f"/api/runs/{run['id']}/events/?since=0").json()
    kinds = [e["kind"] for e in events["events"]]
    assert kinds[0] == "run_started" and kinds[-1] == "completed"
    later = api.get(f"/api/runs/{run['id']}/events/?since={events['last_event']}").json()
    assert later["events"] == []


def test_url_in_message_waits_for_approval(api, group_factory, approver, lab_settings):
    group_factory("web", enabled=True)
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[2]])
    url = lab_settings.url("news.lab.example", "/page", scheme="https")
    conv = _conversation(api)
    run = run_of(api, post(api, f"read {url} please", conv)["id"])
    assert run["state"] == "waiting_for_approval", run
    [step] = run["steps"]
    [call] = step["tool_calls"]
    assert call["tool"] == "fetch_external_url" and call["state"] == "awaiting_approval"
    assert lab_settings.requests == []
    approver_api = APIClient()
    approver_api.force_login(approver)
    response = approver_api.post(f"/api/calls/{call['id']}/approve/", {}, format="json")
    # Accepted: the call runs in the background, and its end resumes the run there.
    assert response.status_code == 202, response.content
    final = run_of(api, run["id"])
    assert final["state"] == "completed", final
    text = final["final_message"]["content"]
    assert text.startswith(OFFLINE_PREFIX)
    assert "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce=" in text
    assert ToolCall.objects.get(pk=call["id"]).state == CallState.SUCCEEDED
    assert AssistantRun.objects.get(pk=run["id"]).step_count == 2
