"""The API's edge (issue 15): bad input is never a 500 and never reaches the database;
every error of the API is JSON with ``detail`` and ``code``; the database being
unavailable is a 503 with ``Retry-After``.

The same file runs on PostgreSQL (tests/runs/test_postgres.py), where a NUL or a
lone surrogate used to raise ``DataError`` and a restarted server left editors with HTML
500s.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from django_webfetch.runs.bounds import MAX_ARGUMENTS_BYTES, InputRejected, check_storable
from tests.settle import settled_call

ON_POSTGRES = os.environ.get("WEBFETCH_TEST_DB_ENGINE") == "postgresql"


@pytest.fixture(autouse=True)
def api_settings(settings, run_tools):
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "rest_framework.authentication.SessionAuthentication",
            "rest_framework.authentication.TokenAuthentication",
        ],
    }


def client_for(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def post_raw(client: APIClient, path: str, body: bytes | str, **extra: Any) -> Any:
    if isinstance(body, str):
        body = body.encode("utf-8")
    return client.generic("POST", path, body, content_type="application/json", **extra)


def assert_json_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body["code"] == code, body
    assert isinstance(body["detail"], str) and body["detail"]
    return body


# -- characters no database column takes ----------------------------------------------------

# Raw JSON texts: json.dumps would refuse nothing here, but the escapes are what a client
# sends on the wire.
BAD_TEXT_BODIES = {
    "nul in a value": r'{"tool": "runs_echo", "arguments": {"text": "a\u0000b"}}',
    "nul in a key": r'{"tool": "runs_echo", "arguments": {"te\u0000xt": "a"}}',
    "nul deep inside": (
        r'{"tool": "runs_echo", "arguments": {"text": "a", "x": [{"y": ["\u0000"]}]}}'
    ),
    "lone high surrogate in a value": r'{"tool": "runs_echo", "arguments": {"text": "\ud800"}}',
    "lone low surrogate in a key": r'{"tool": "runs_echo", "arguments": {"\udfff": "a"}}',
    "surrogate in the tool name": r'{"tool": "runs_echo\udc00", "arguments": {"text": "a"}}',
    "nul in the tool name": r'{"tool": "runs_\u0000echo", "arguments": {"text": "a"}}',
    "nul in the conversation": (
        r'{"tool": "runs_echo", "arguments": {"text": "a"}, "conversation": "c\u0000"}'
    ),
    "surrogate in an unknown tool's arguments": r'{"tool": "nope", "arguments": {"url": "\ud83d"}}',
}


@pytest.mark.django_db
@pytest.mark.parametrize("body", list(BAD_TEXT_BODIES.values()), ids=list(BAD_TEXT_BODIES))
def test_nul_and_lone_surrogates_are_400_and_nothing_is_stored(editor, body, caplog):
    response = post_raw(client_for(editor), "/api/calls/", body)
    assert_json_error(response, 400, "invalid_characters")
    assert not ToolCall.objects.exists()
    # The refusal is on record: one audit line (without the refused value).
    assert any("invalid_characters" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db
@pytest.mark.parametrize("comment", ["ok\x00", "ok\ud800"])
@pytest.mark.parametrize("action", ["approve", "deny", "cancel"])
def test_bad_characters_in_a_decision_comment(editor, approver, comment, action):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    body = json.dumps({"comment": comment})  # escapes NUL and the surrogate
    response = post_raw(client_for(approver), f"/api/calls/{call.pk}/{action}/", body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] in ("invalid_characters", "invalid")
    call.refresh_from_db()
    assert call.state == CallState.AWAITING_APPROVAL
    assert call.decision_comment == ""


@pytest.mark.django_db
@pytest.mark.parametrize("comment", ["ok\x00", "ok\ud800"])
def test_the_services_refuse_bad_comments_too(editor, approver, comment):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    with pytest.raises(InputRejected) as info:
        runs.approve(call, by=approver, comment=comment)
    assert info.value.code == "invalid_characters"
    call.refresh_from_db()
    assert call.state == CallState.AWAITING_APPROVAL


@pytest.mark.django_db
@pytest.mark.parametrize(
    "arguments",
    [{"text": "a\x00"}, {"k\ud800": 1}, {"text": ["\udfff"]}],
    ids=["nul", "surrogate-key", "surrogate-in-list"],
)
@pytest.mark.parametrize("tool", ["runs_echo", "fetch_external_url", "nope"])
def test_the_service_refuses_before_storing(editor, arguments, tool):
    """The assistant calls runs.request_call directly: the same bounds hold there."""
    with pytest.raises(InputRejected) as info:
        runs.request_call(tool, arguments, user=editor)
    assert info.value.code == "invalid_characters"
    assert not ToolCall.objects.exists()


# -- nesting ----------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("depth", [3000, 100_000])
def test_json_nested_thousands_deep_is_400(editor, depth):
    body = '{"tool": "runs_echo", "arguments": {"text": ' + "[" * depth + "]" * depth + "}}"
    response = post_raw(client_for(editor), "/api/calls/", body)
    if len(body) > 128 * 1024:
        assert_json_error(response, 413, "request_too_large")
    else:
        assert_json_error(response, 400, "nesting_too_deep")
    assert not ToolCall.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("encoding", ["form", "multipart"])
def test_deep_json_inside_a_form_field_is_400(editor, encoding):
    """A form field holding JSON is parsed by the serializer, not the JSON parser."""
    data = {"tool": "runs_echo", "arguments": "[" * 5000 + "]" * 5000}
    client = client_for(editor)
    if encoding == "form":
        from urllib.parse import urlencode

        response = client.generic(
            "POST",
            "/api/calls/",
            urlencode(data),
            content_type="application/x-www-form-urlencoded",
        )
    else:
        response = client.post("/api/calls/", data)
    assert response.status_code == 400, response.content[:200]
    assert response.json()["code"] == "nesting_too_deep"
    assert not ToolCall.objects.exists()


@pytest.mark.django_db
def test_arguments_nested_past_the_bound_are_400(editor):
    value: Any = "x"
    for _ in range(40):
        value = {"a": value}
    response = client_for(editor).post(
        "/api/calls/", {"tool": "runs_echo", "arguments": value}, format="json"
    )
    body = assert_json_error(response, 400, "nesting_too_deep")
    assert "/a/a/a" in body["detail"]
    assert not ToolCall.objects.exists()


@pytest.mark.django_db
def test_brackets_inside_strings_do_not_count(editor, approver):
    text = "[" * 90 + '\\"{' * 5
    response = client_for(editor).post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": text[:100]}}, format="json"
    )
    assert response.status_code == 201, response.content
    assert ToolCall.objects.get().arguments == {"text": text[:100]}


# -- size before storage ------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("tool", ["runs_echo", "fetch_external_url", "nope"])
def test_a_huge_url_is_refused_before_storage(editor, tool):
    url = "https://a.example/" + "x" * 2_400_000
    response = client_for(editor).post(
        "/api/calls/", {"tool": tool, "arguments": {"url": url}}, format="json"
    )
    assert_json_error(response, 413, "request_too_large")
    assert not ToolCall.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("tool", ["runs_echo", "fetch_external_url", "nope"])
def test_arguments_over_16_kib_are_400_whatever_the_tool(editor, tool):
    url = "https://a.example/" + "x" * MAX_ARGUMENTS_BYTES
    response = client_for(editor).post(
        "/api/calls/", {"tool": tool, "arguments": {"url": url}}, format="json"
    )
    assert_json_error(response, 400, "arguments_too_large")
    assert not ToolCall.objects.exists()


@pytest.mark.django_db
def test_many_small_values_count_too(editor):
    arguments = {f"k{i}": i for i in range(3000)}
    with pytest.raises(InputRejected) as info:
        runs.request_call("runs_echo", arguments, user=editor)
    assert info.value.code == "arguments_too_large"
    with pytest.raises(InputRejected):
        runs.request_call("runs_echo", {"text": list(range(20_000))}, user=editor)
    assert not ToolCall.objects.exists()


@pytest.mark.django_db
def test_django_upload_limit_is_json_413(editor, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = client_for(editor).post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "x" * 2000}}, format="json"
    )
    assert_json_error(response, 413, "request_too_large")


@pytest.mark.django_db
def test_a_form_post_over_django_limit_is_json(editor, approver, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    client = client_for(approver)
    response = client.post(f"/api/calls/{call.pk}/approve/", {"comment": "x" * 500})
    assert_json_error(response, 413, "request_too_large")


@pytest.mark.django_db
def test_a_form_post_with_nul_is_400(editor, approver):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    response = client_for(approver).post(f"/api/calls/{call.pk}/deny/", {"comment": "a\x00"})
    assert_json_error(response, 400, "invalid_characters")


def test_the_walk_is_bounded_by_the_bound_not_the_input():
    with pytest.raises(InputRejected):
        check_storable(["x"] * 10_000_000)
    value = {"text": "é" * 100, "n": [1, 2.5, None, True]}
    exact = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    assert exact <= check_storable(value) <= exact + 64


# -- every error is JSON ----------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/nope/"),
        ("post", "/api/nope/deeper/"),
        ("get", "/api/calls/not-a-uuid/"),
        ("post", "/api/calls/00000000-0000-0000-0000-000000000000/explode/"),
        ("delete", "/api/tools/extra/"),
    ],
)
def test_unknown_paths_under_the_api_are_json_404(editor, method, path):
    for client in (client_for(editor), APIClient()):
        response = getattr(client, method)(path)
        assert_json_error(response, 404, "not_found")


@pytest.mark.django_db
def test_a_missing_slash_still_redirects(editor):
    response = client_for(editor).get("/api/calls?state=failed")
    assert response.status_code == 301
    assert response["Location"] == "/api/calls/?state=failed"


def test_the_json_404_is_the_last_api_pattern():
    from django_webfetch.api import urls

    assert urls.urlpatterns[-1].name == "not-found"
    assert [p.name for p in urls.urlpatterns].count("not-found") == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    ["{", '{"tool": NaN}', "\xff", '{"tool": "runs_echo", "arguments": Infinity}'],
)
def test_malformed_json_is_a_json_400(editor, body):
    response = post_raw(client_for(editor), "/api/calls/", body)
    assert_json_error(response, 400, "parse_error")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query",
    [
        "offset=1000000000000000000000000000000",
        "limit=1000000000000000000000000000000",
        "state=%00",
        "limit=-1&offset=-5",
        "offset=%ud800",
    ],
)
def test_query_parameters_are_never_a_500(editor, query):
    runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    response = client_for(editor).get(f"/api/calls/?{query}")
    assert response.status_code in (200, 400), response.content[:200]
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.django_db
def test_an_unsupported_media_type_is_json(editor):
    response = client_for(editor).generic(
        "POST", "/api/calls/", b"x", content_type="application/xml"
    )
    assert_json_error(response, 415, "unsupported_media_type")


# -- a property: no input is a 500 -------------------------------------------------------------

_text = st.text(alphabet=st.characters(codec=None, blacklist_categories=()), max_size=40)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=20,
)


@pytest.mark.django_db
@hsettings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tool=st.sampled_from(["runs_echo", "nope", "fetch_external_url"]) | _text, arguments=_json)
def test_no_request_body_is_a_500(editor, tool, arguments):
    body = json.dumps({"tool": tool, "arguments": arguments}, ensure_ascii=True)
    response = post_raw(client_for(editor), "/api/calls/", body)
    assert response.status_code in (201, 202, 400, 403), (response.status_code, body[:200])
    assert "code" in response.json() or response.status_code in (201, 202)


# -- the database unavailable ------------------------------------------------------------------


def _break_the_connection() -> Any:
    """Make the next query fail as after a database restart; returns a restore function."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        from django.db import connections

        # Another session terminates ours, exactly what a restart does to it.
        other = connections.create_connection("default")
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        other.close()
        # Django closes a connection that failed at the end of the request
        # (close_old_connections); the test client leaves that signal out.
        return connection.close
    # SQLite: the database file cannot be opened any more.
    name = connection.settings_dict["NAME"]
    connection.close()
    connection.settings_dict["NAME"] = "/nonexistent-webfetch-dir/db.sqlite3"

    def restore() -> None:
        connection.close()
        connection.settings_dict["NAME"] = name

    return restore


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.parametrize(
    ("method", "path"),
    [("post", "/api/calls/"), ("get", "/api/calls/"), ("get", "/api/tools/")],
)
def test_database_unavailable_is_503_json_with_retry_after(editor, method, path, settings):
    settings.REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]
    }
    from rest_framework.authtoken.models import Token

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=editor).key}")
    restore = _break_the_connection()
    try:
        response = getattr(client, method)(
            path, {"tool": "runs_echo", "arguments": {"text": "hi"}}, format="json"
        )
    finally:
        restore()
    body = assert_json_error(response, 503, "database_unavailable")
    assert int(response["Retry-After"]) > 0
    assert "detail" in body
    # Nothing half-written, and the next request works again.
    assert not ToolCall.objects.exists()
    again = client.get("/api/calls/")
    assert again.status_code == 200


# -- the same on PostgreSQL ----------------------------------------------------------------------


# This file runs again on PostgreSQL, in the one PostgreSQL session of
# tests/runs/test_postgres.py.


# -- a worker's result survives a database restart ----------------------------------------------


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_result_survives_a_database_restart_before_it_is_written(run_tools, editor, settings):
    """The database goes away while the tool runs: the result is kept in memory and written
    once the database is back, so the call runs once (before, the write failed, the lease
    ran out and the sweep ran the call a second time)."""
    import threading

    from .conftest import EchoTool

    class RestartingTool(EchoTool):
        name = "runs_db_restart"
        needs_approval = False

        def execute(self, arguments, context):
            restore = _break_the_connection()
            # The database comes back 0.6 s later (on SQLite, the file can be opened again).
            threading.Timer(0.6, restore if connection.vendor == "sqlite" else lambda: None).start()
            return super().execute(arguments, context)

    run_tools.register(RestartingTool)
    EchoTool.executed = []
    call = settled_call(runs.request_call("runs_db_restart", {"text": "once"}, user=editor))
    assert (call.state, call.attempts) == (CallState.SUCCEEDED, 1)
    assert EchoTool.executed == [{"text": "once"}]


# -- the depth pre-scan agrees with the parser ------------------------------------------------


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


_tricky_text = st.text(alphabet='[]{}"\\\\ab\u00e9\x00', max_size=12)
_nested = st.recursive(
    st.none() | st.integers() | _tricky_text,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(_tricky_text, children, max_size=3)
    ),
    max_leaves=30,
)


@hsettings(max_examples=300, deadline=None)
@given(value=_nested, ascii_only=st.booleans())
def test_the_depth_prescan_matches_the_real_depth(value, ascii_only):
    from django_webfetch.api.parsers import json_depth

    body = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    assert json_depth(body) == _depth(value)
