"""The loop with a real provider client (openai / anthropic SDK through Pydantic AI) talking
to the scripted provider in the lab, through the guard."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch.models import AssistantRun, EgressEvent, Message, ToolCall

from .provider import Turn, offered_tools, tool_results

pytestmark = pytest.mark.django_db(transaction=True)
BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"], indirect=True)


@pytest.fixture
def api(editor, settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    client = APIClient()
    client.force_login(editor)
    return client


def ask(api, content):
    conv = api.post("/api/conversations/", {}, format="json").json()["id"]
    response = api.post(f"/api/conversations/{conv}/messages/", {"content": content}, format="json")
    assert response.status_code == 202, response.content
    return response.json()


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
