"""The assistant API: ownership, cancelling, deleting, validation, events, the schema."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch.models import AssistantRun, CallState, Conversation, ToolCall
from tests.settle import resumed_run

from .helpers import run_of
from .provider import Turn

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture(autouse=True)
def urls(settings):
    settings.ROOT_URLCONF = "tests.runs.urls"


def client_for(user):
    client = APIClient()
    client.force_login(user)
    return client


def start(client, content="hello"):
    """A new conversation and its first message: the API's answer (202, the run goes on in
    the background), once the run has settled."""
    conv = client.post("/api/conversations/", {"title": "mine"}, format="json").json()["id"]
    run = client.post(f"/api/conversations/{conv}/messages/", {"content": content}, format="json")
    assert run.status_code == 202, run.content
    resumed_run(run.json()["id"])
    return conv, run


def test_anonymous_gets_nothing():
    client = APIClient()
    assert client.get("/api/conversations/").status_code == 403
    assert client.post("/api/conversations/", {}).status_code == 403


def test_editors_see_only_their_own(editor, user_factory, approver):
    mine = client_for(editor)
    conv, run = start(mine)
    run_id = run.json()["id"]
    for other in (user_factory(staff=True), approver, user_factory(superuser=True)):
        theirs = client_for(other)
        assert theirs.get("/api/conversations/").json()["results"] == []
        for method, url in [
            ("get", f"/api/conversations/{conv}/"),
            ("delete", f"/api/conversations/{conv}/"),
            ("post", f"/api/conversations/{conv}/messages/"),
            ("get", f"/api/runs/{run_id}/"),
            ("post", f"/api/runs/{run_id}/cancel/"),
            ("get", f"/api/runs/{run_id}/events/"),
        ]:
            response = getattr(theirs, method)(url, {"content": "x"}, format="json")
            assert response.status_code == 404, (other, url, response.content)
            assert response.json()["code"] == "not_found"
    body = mine.get(f"/api/conversations/{conv}/").json()
    assert body["title"] == "mine" and body["latest_run"] == run_id
    assert [m["seq"] for m in body["messages"]] == [1, 2]
    assert Conversation.objects.filter(pk=conv).exists()


@pytest.mark.parametrize(
    "content, code",
    [
        ("", "blank"),
        ("   ", "blank"),
        ("x" * 20_001, "max_length"),
        ("a\x00b", "invalid_characters"),
    ],
)
def test_bad_messages_are_refused_with_a_code(editor, content, code):
    client = client_for(editor)
    conv = client.post("/api/conversations/", {}, format="json").json()["id"]
    response = client.post(
        f"/api/conversations/{conv}/messages/", {"content": content}, format="json"
    )
    assert response.status_code == 400
    body = response.json()
    # NUL never reaches the serializer: the API edge refuses it for every field.
    found = body["errors"]["content"][0]["code"] if "errors" in body else body["code"]
    assert found == code
    assert not AssistantRun.objects.exists()


def test_since_must_be_a_number(editor):
    client = client_for(editor)
    _conv, run = start(client)
    response = client.get(f"/api/runs/{run.json()['id']}/events/?since=abc")
    assert response.status_code == 400
    events = client.get(f"/api/runs/{run.json()['id']}/events/?since=1").json()["events"]
    assert [e["seq"] for e in events] == list(range(2, 2 + len(events)))


def test_one_run_at_a_time_per_conversation(editor, provider, lab_settings, group_factory):
    lab_settings.dns.set(
        "news.lab.example", a=[lab_settings.PUBLIC_V4[2]]
    )  # pre-flight resolves it
    group_factory("web", enabled=True)
    provider.add(Turn(tool_calls=[("fetch_external_url", {"url": "https://news.lab.example/"})]))
    client = client_for(editor)
    conv, run = start(client)
    assert run_of(client, run.json()["id"])["state"] == "waiting_for_approval"
    again = client.post(f"/api/conversations/{conv}/messages/", {"content": "more"}, format="json")
    assert again.status_code == 409
    assert again.json()["code"] == "run_in_progress"


def test_cancel_a_waiting_run_cancels_its_calls(
    editor, approver, provider, group_factory, lab_settings
):
    lab_settings.dns.set(
        "news.lab.example", a=[lab_settings.PUBLIC_V4[2]]
    )  # pre-flight resolves it
    group_factory("web", enabled=True)
    provider.add(Turn(tool_calls=[("fetch_external_url", {"url": "https://news.lab.example/"})]))
    client = client_for(editor)
    conv, run = start(client)
    run_id = run.json()["id"]
    response = client.post(f"/api/runs/{run_id}/cancel/")
    assert response.status_code == 200
    assert (response.json()["state"], response.json()["error_code"]) == ("cancelled", "cancelled")
    [call] = ToolCall.objects.filter(run__isnull=False)
    assert call.state == CallState.CANCELLED
    # Approving the cancelled call is refused; the run stays cancelled.
    assert client_for(approver).post(f"/api/calls/{call.pk}/approve/", {}).status_code == 409
    assert client.post(f"/api/runs/{run_id}/cancel/").status_code == 409
    assert AssistantRun.objects.get(pk=run_id).state == "cancelled"
    # The conversation goes on: the next turn starts from a whole history.
    provider.add(Turn(text="fresh start"))
    nxt = client.post(f"/api/conversations/{conv}/messages/", {"content": "again"}, format="json")
    assert nxt.status_code == 202, nxt.content
    assert run_of(client, nxt.json()["id"])["state"] == "completed"
    [request] = provider.requests[1:]
    roles = [m["role"] for m in request.body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]


def test_delete_own_conversation(editor, provider):
    provider.add(Turn(text="ok"))
    client = client_for(editor)
    conv, run = start(client)
    assert client.delete(f"/api/conversations/{conv}/").status_code == 204
    assert not Conversation.objects.filter(pk=conv).exists()
    assert not AssistantRun.objects.filter(pk=run.json()["id"]).exists()
    assert client.get(f"/api/conversations/{conv}/").status_code == 404


def test_a_second_turn_sees_the_first(editor, provider):
    provider.add(Turn(text="first answer"), Turn(text="second answer"))
    client = client_for(editor)
    conv, _run = start(client, "first question")
    run = client.post(
        f"/api/conversations/{conv}/messages/", {"content": "and then?"}, format="json"
    )
    assert run.status_code == 202, run.content
    assert run_of(client, run.json()["id"])["final_message"]["content"] == "second answer"
    contents = [m.get("content") for m in provider.requests[1].body["messages"]]
    assert contents[1:] == ["first question", "first answer", "and then?"]
    body = client.get(f"/api/conversations/{conv}/").json()
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant"]


def test_the_assistant_does_not_load_pydantic_ai_on_import():
    import subprocess
    import sys

    code = (
        "import sys, django; django.setup()\n"
        "import django_webfetch.assistant.services, django_webfetch.api.urls\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic_ai', 'openai')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
    )
    assert out.stdout.strip() == "[]"


def test_the_schema_has_the_assistant(editor):
    from drf_spectacular.validation import validate_schema

    response = client_for(editor).get(
        "/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json"
    )
    schema = response.json()
    validate_schema(schema)
    assert {
        "/conversations/",
        "/conversations/{id}/",
        "/conversations/{id}/messages/",
        "/runs/{id}/",
        "/runs/{id}/cancel/",
        "/runs/{id}/events/",
    } <= set(schema["paths"])
    post = schema["paths"]["/conversations/{id}/messages/"]["post"]["responses"]
    assert {"202", "400", "404", "409"} <= set(post)
    run = schema["components"]["schemas"]["Run"]["properties"]
    assert {"state", "steps", "final_message", "provider_label", "offline"} <= set(run)
    assert run["steps"]["items"]["$ref"] == "#/components/schemas/Step"
    step = schema["components"]["schemas"]["Step"]["properties"]
    assert step["tool_calls"]["items"]["$ref"] == "#/components/schemas/StepToolCall"
