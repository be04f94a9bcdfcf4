"""The DRF API: every cell of the permissions matrix, session (CSRF) and token auth, stable
error codes, 201/202 semantics and the OpenAPI schema."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from tests.settle import settled_call

from .conftest import EchoTool

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def api_settings(settings, run_tools):
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "rest_framework.authentication.SessionAuthentication",
            # DRF's own token authentication, with the authtoken app's Token model.
            "rest_framework.authentication.TokenAuthentication",
        ],
    }
    yield


def client_for(user: Any = None, *, token: bool = False) -> APIClient:
    client = APIClient()
    if user is not None:
        if token:
            key = Token.objects.get_or_create(user=user)[0].key
            client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        else:
            client.force_login(user)
    return client


@pytest.fixture
def admin_user(superuser):
    return superuser


@pytest.fixture
def other_editor(user_factory):
    return user_factory(staff=True, username="other")


def waiting_call(user, text="hi") -> ToolCall:
    return runs.request_call("runs_echo", {"text": text}, user=user)


# -- anonymous ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/tools/"),
        ("get", "/api/calls/"),
        ("post", "/api/calls/"),
        ("get", "/api/calls/{id}/"),
        ("post", "/api/calls/{id}/approve/"),
        ("post", "/api/calls/{id}/deny/"),
        ("post", "/api/calls/{id}/cancel/"),
    ],
)
def test_anonymous_gets_nothing(editor, method, path):
    call = waiting_call(editor)
    response = getattr(client_for(), method)(path.format(id=call.pk), {}, format="json")
    # 403, not 401: the first authenticator (session) sends no WWW-Authenticate challenge.
    assert response.status_code == 403
    assert response.json()["code"] == "not_authenticated"
    assert ToolCall.objects.count() == 1
    assert ToolCall.objects.get().state == CallState.AWAITING_APPROVAL


def test_a_bad_token(editor):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token nope")
    response = client.get("/api/tools/")
    assert response.status_code == 403
    assert response.json()["code"] == "authentication_failed"


def test_inactive_users_get_nothing(editor):
    client = client_for(editor, token=True)
    editor.is_active = False
    editor.save()
    assert client.get("/api/tools/").status_code == 403


# -- tools ----------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [False, True])
def test_tools_offered_to_an_editor(editor, token):
    response = client_for(editor, token=token).get("/api/tools/")
    assert response.status_code == 200
    names = [spec["name"] for spec in response.json()]
    assert "runs_echo" in names
    assert "runs_admin_only" not in names
    assert "fetch_external_url" not in names  # its group is disabled


def test_tools_offered_to_an_admin(admin_user, group_factory):
    group_factory("web", enabled=True)
    names = [s["name"] for s in client_for(admin_user).get("/api/tools/").json()]
    assert {"runs_admin_only", "fetch_external_url"} <= set(names)


@pytest.mark.parametrize(
    ("spec_format", "key"),
    [("json_schema", "parameters"), ("anthropic", "input_schema"), ("openai", "function")],
)
def test_tool_spec_formats(editor, spec_format, key):
    specs = client_for(editor).get(f"/api/tools/?format={spec_format}").json()
    assert all(key in spec for spec in specs)


def test_unknown_spec_format(editor):
    response = client_for(editor).get("/api/tools/?format=xml")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert body["errors"]["format"][0]["code"] == "invalid_choice"


# -- creating calls -------------------------------------------------------------------------


@pytest.mark.parametrize("token", [False, True])
def test_editor_creates_a_call_that_waits(editor, token):
    response = client_for(editor, token=token).post(
        "/api/calls/",
        {"tool": "runs_echo", "arguments": {"text": "hi"}, "conversation": "c-1"},
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["state"] == "awaiting_approval"
    assert body["result"] is None
    assert body["user"] == "editor"
    assert body["conversation"] == "c-1"
    assert body["approval_preview"]["arguments"] == {"text": "hi"}
    assert response["Location"].endswith(f"/api/calls/{body['id']}/")


def test_a_call_without_approval_finishes_in_process(editor):
    EchoTool.needs_approval = False
    response = client_for(editor).post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "now"}}, format="json"
    )
    # Approved at request time: it runs on the background runner after the answer.
    assert response.status_code == 202
    body = response.json()
    assert body["state"] == "approved"
    assert response["Location"].endswith(f"/api/calls/{body['id']}/")
    settled_call(body["id"])
    body = client_for(editor).get(f"/api/calls/{body['id']}/").json()
    assert body["state"] == "succeeded"
    assert body["result"] == {"content": "echo: now", "error": None, "meta": {"call": body["id"]}}


def test_a_queued_call_is_202(editor, celery_eager, django_capture_on_commit_callbacks):
    EchoTool.needs_approval = False
    with django_capture_on_commit_callbacks(execute=False):
        response = client_for(editor).post(
            "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "q"}}, format="json"
        )
    assert response.status_code == 202
    assert response.json()["state"] == "approved"


def test_a_tool_refusal_is_a_successful_request(editor, approver):
    call = waiting_call(editor, "refuse")
    response = client_for(approver).post(f"/api/calls/{call.pk}/approve/", {}, format="json")
    assert response.status_code == 202
    assert response.json()["state"] == "approved"
    settled_call(call)
    response = client_for(approver).get(f"/api/calls/{call.pk}/")
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "failed"
    assert body["reason"] == "refused_by_tool"
    # What the tool said is the requester's to read (runs.can_read_result); the approver
    # reads the outcome (state and reason).
    assert body["result"] is None and body["result_withheld"] is True
    own = client_for(editor).get(f"/api/calls/{call.pk}/").json()
    assert own["result"]["error"] == "refused_by_tool"


def test_invalid_arguments(editor):
    response = client_for(editor).post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": 1}}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["state"], body["reason"]) == ("failed", "invalid_arguments")
    assert body["result"]["error"] == "invalid_arguments"
    assert EchoTool.executed == []


@pytest.mark.parametrize(
    "payload",
    [{}, {"tool": ""}, {"tool": "x" * 101}, {"tool": "runs_echo", "conversation": "c" * 201}],
)
def test_malformed_create_requests(editor, payload):
    response = client_for(editor).post("/api/calls/", payload, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert not ToolCall.objects.exists()


@pytest.mark.parametrize("tool", ["runs_admin_only", "fetch_external_url", "nope"])
def test_editor_cannot_create_calls_of_tools_not_offered(editor, tool):
    response = client_for(editor).post(
        "/api/calls/", {"tool": tool, "arguments": {}}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["code"] == "tool_not_offered"
    [call] = ToolCall.objects.all()  # refused, but on record
    assert (call.tool, call.state, call.reason) == (tool, "failed", "tool_not_offered")


def test_admin_creates_calls_of_admin_tools(admin_user):
    response = client_for(admin_user).post(
        "/api/calls/", {"tool": "runs_admin_only", "arguments": {"text": "a"}}, format="json"
    )
    assert response.status_code == 201


# -- reading --------------------------------------------------------------------------------


def test_editor_reads_own_calls_only(editor, other_editor):
    mine = waiting_call(editor, "mine")
    theirs = waiting_call(other_editor, "theirs")
    client = client_for(editor)
    listing = client.get("/api/calls/").json()
    assert [c["id"] for c in listing["results"]] == [str(mine.pk)]
    assert listing["count"] == 1
    assert client.get(f"/api/calls/{mine.pk}/").status_code == 200
    response = client.get(f"/api/calls/{theirs.pk}/")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


@pytest.mark.parametrize("who", ["approver", "admin_user"])
def test_approvers_read_all(request, editor, other_editor, who):
    user = request.getfixturevalue(who)
    calls = [waiting_call(editor), waiting_call(other_editor)]
    client = client_for(user)
    listing = client.get("/api/calls/").json()
    assert {c["id"] for c in listing["results"]} == {str(c.pk) for c in calls}
    for call in calls:
        assert client.get(f"/api/calls/{call.pk}/").status_code == 200


def test_filter_by_state(editor, approver):
    waiting = waiting_call(editor)
    denied = runs.deny(waiting_call(editor), by=approver)
    client = client_for(editor)
    assert [c["id"] for c in client.get("/api/calls/?state=denied").json()["results"]] == [
        str(denied.pk)
    ]
    assert [
        c["id"] for c in client.get("/api/calls/?state=awaiting_approval").json()["results"]
    ] == [str(waiting.pk)]
    response = client.get("/api/calls/?state=bogus")
    assert response.status_code == 400
    assert response.json()["errors"]["state"][0]["code"] == "invalid_choice"


def test_expiry_on_read(editor):
    call = waiting_call(editor)
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() - timedelta(1))
    body = client_for(editor).get(f"/api/calls/{call.pk}/").json()
    assert body["state"] == "expired"
    assert body["result"]["error"] == "approval_expired"
    other = waiting_call(editor)
    ToolCall.objects.filter(pk=other.pk).update(expires_at=timezone.now() - timedelta(1))
    listing = client_for(editor).get("/api/calls/?state=expired").json()
    assert listing["count"] == 2


def test_unknown_call(editor):
    response = client_for(editor).get(f"/api/calls/{uuid.uuid4()}/")
    assert response.status_code == 404
    assert client_for(editor).get("/api/calls/not-a-uuid/").status_code == 404


# -- decisions ------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["approve", "deny"])
def test_editor_never_decides(editor, other_editor, action):
    for owner in (editor, other_editor):
        call = waiting_call(owner)
        response = client_for(editor).post(f"/api/calls/{call.pk}/{action}/", {}, format="json")
        assert response.status_code == 403
        assert response.json()["code"] == "approval_not_permitted"
        assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL


@pytest.mark.parametrize("who", ["approver", "admin_user"])
@pytest.mark.parametrize("token", [False, True])
def test_approvers_approve(request, editor, who, token):
    user = request.getfixturevalue(who)
    call = waiting_call(editor)
    response = client_for(user, token=token).post(
        f"/api/calls/{call.pk}/approve/", {"comment": "fine"}, format="json"
    )
    assert response.status_code == 202
    assert response.json()["state"] == "approved"
    assert response.json()["decided_by"] == user.get_username()
    settled_call(call)
    response = client_for(user, token=token).get(f"/api/calls/{call.pk}/")
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "succeeded"
    assert body["decided_by"] == user.get_username()
    assert body["decision_comment"] == "fine"
    # The result: the requester's, and a superuser's (admin_user); not another approver's.
    if user.is_superuser:
        assert body["result"]["content"] == "echo: hi"
    else:
        assert body["result"] is None and body["result_withheld"] is True
    own = client_for(editor).get(f"/api/calls/{call.pk}/").json()
    assert own["result"]["content"] == "echo: hi"


@pytest.mark.parametrize("who", ["approver", "admin_user"])
def test_approvers_deny(request, editor, who):
    user = request.getfixturevalue(who)
    call = waiting_call(editor)
    response = client_for(user).post(
        f"/api/calls/{call.pk}/deny/", {"comment": "no"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["state"] == "denied"
    assert EchoTool.executed == []


@pytest.mark.parametrize("who", ["approver", "admin_user"])
def test_no_self_approval(request, who):
    user = request.getfixturevalue(who)
    call = waiting_call(user)
    response = client_for(user).post(f"/api/calls/{call.pk}/approve/", {}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "self_approval"


def test_deciding_twice_is_a_conflict(editor, approver):
    call = waiting_call(editor)
    client = client_for(approver)
    assert client.post(f"/api/calls/{call.pk}/approve/", {}, format="json").status_code == 202
    for action in ("approve", "deny"):
        # Approved, then running, then succeeded: a second decision conflicts in each.
        response = client.post(f"/api/calls/{call.pk}/{action}/", {}, format="json")
        assert response.status_code == 409
        assert response.json()["code"] == "invalid_transition"
    assert settled_call(call).state == CallState.SUCCEEDED
    for action in ("approve", "deny"):
        response = client.post(f"/api/calls/{call.pk}/{action}/", {}, format="json")
        assert response.status_code == 409
        assert response.json()["code"] == "invalid_transition"


def test_approving_an_expired_call(editor, approver):
    call = waiting_call(editor)
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now())
    response = client_for(approver).post(f"/api/calls/{call.pk}/approve/", {}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] in ("expired", "invalid_transition")
    assert ToolCall.objects.get(pk=call.pk).state == CallState.EXPIRED


def test_comment_too_long(editor, approver):
    call = waiting_call(editor)
    response = client_for(approver).post(
        f"/api/calls/{call.pk}/deny/", {"comment": "x" * 2001}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"]["comment"][0]["code"] == "max_length"


def test_cancel_matrix(editor, other_editor, approver):
    own = waiting_call(editor)
    theirs = waiting_call(other_editor)
    client = client_for(editor)
    assert client.post(f"/api/calls/{theirs.pk}/cancel/", {}, format="json").status_code == 404
    response = client.post(f"/api/calls/{own.pk}/cancel/", {}, format="json")
    assert response.status_code == 200
    assert response.json()["state"] == "cancelled"
    response = client.post(f"/api/calls/{own.pk}/cancel/", {}, format="json")
    assert response.status_code == 409
    third = waiting_call(other_editor)
    response = client_for(approver).post(f"/api/calls/{third.pk}/cancel/", {}, format="json")
    assert response.json()["state"] == "cancelled"


# -- CSRF -----------------------------------------------------------------------------------


def test_session_auth_enforces_csrf(editor):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(editor)
    response = client.post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "x"}}, format="json"
    )
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not ToolCall.objects.exists()
    client.get("/api/tools/")  # no token yet: fetch one the way a browser would
    from django.middleware.csrf import _get_new_csrf_string

    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    response = client.post(
        "/api/calls/",
        {"tool": "runs_echo", "arguments": {"text": "x"}},
        format="json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert response.status_code == 201


def test_token_auth_needs_no_csrf(editor):
    client = client_for(editor, token=True)
    client.enforce_csrf_checks = True
    response = client.post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "x"}}, format="json"
    )
    assert response.status_code == 201


# -- OpenAPI --------------------------------------------------------------------------------


def test_the_openapi_schema_validates(editor):
    from drf_spectacular.validation import validate_schema

    response = client_for(editor).get(
        "/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json"
    )
    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    assert schema["servers"] == [{"url": "/api/"}]
    assert set(schema["paths"]) >= {
        "/",
        "/tools/",
        "/calls/",
        "/calls/{id}/",
        "/calls/{id}/approve/",
        "/calls/{id}/deny/",
        "/calls/{id}/cancel/",
    }
    operations = {op["operationId"] for path in schema["paths"].values() for op in path.values()}
    assert operations >= {
        "api_root",
        "tools_list",
        "calls_list",
        "calls_create",
        "calls_retrieve",
        "calls_approve",
        "calls_deny",
        "calls_cancel",
    }
    create = schema["paths"]["/calls/"]["post"]["responses"]
    assert {"201", "202", "400", "403"} <= set(create)


def test_the_schema_needs_a_login(editor):
    response = APIClient().get("/api/schema/?format=json")
    assert response.status_code == 403
    assert client_for(editor).get("/api/schema/?format=json").status_code == 200
