"""Review of the API edge (review15): what still answered something other than a JSON
error with ``detail`` and ``code``.

- DRF's default renderers include the browsable API: with ``Accept: text/html`` (any
  browser) or ``?format=api``, every error of the API (404, 405, 403, 400...) was an HTML
  page.
- The OpenAPI schema view used DRF's default exception handler and its own renderers: its
  403/404/405 were YAML (``application/vnd.oai.openapi``) without a ``code``.

The fix is one mixin (``api.views.JSONErrorsMixin``) on every view of ``api/urls.py``;
``test_every_view_of_the_api_renders_its_errors_as_json`` walks the URLconf so a future
endpoint without it fails here.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, ClassVar

import pytest
from django.urls import URLPattern, URLResolver
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.api import urls as api_urls
from django_webfetch.api import views as api_views
from django_webfetch.api._schema import AVAILABLE as SCHEMA_AVAILABLE
from django_webfetch.models import ToolCall
from django_webfetch.net.policy import Scope
from django_webfetch.runs.bounds import check_storable, make_storable
from django_webfetch.tools import Effect, Tool, ToolResult
from tests.settle import settled_call

from .test_api_edge import api_settings, client_for  # noqa: F401 - the autouse fixture


def assert_json_error(response: Any, status: int | None = None) -> dict[str, Any]:
    if status is not None:
        assert response.status_code == status, (response.status_code, response.content[:300])
    assert response.status_code >= 400, response.status_code
    assert response.status_code != 500, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), (
        response.status_code,
        response["Content-Type"],
        response.content[:200],
    )
    body = response.json()
    assert isinstance(body.get("detail"), str) and body["detail"], body
    assert isinstance(body.get("code"), str) and body["code"], body
    return body


BROWSER = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("get", "/api/nope/", 404),
        ("get", "/api/calls/{missing}/", 404),
        ("put", "/api/calls/", 405),
        ("delete", "/api/calls/{missing}/", 405),
        ("post", "/api/calls/", 400),
        ("get", "/api/tools/?format=nope", 400),
        ("get", "/api/calls/?state=nope", 400),
    ],
)
@pytest.mark.parametrize("negotiation", ["accept-html", "format-api"])
def test_errors_are_json_even_when_the_client_asks_for_html(
    editor, method, path, status, negotiation
):
    path = path.format(missing=uuid.uuid4())
    extra: dict[str, Any] = {}
    if negotiation == "accept-html":
        extra = dict(BROWSER)
    elif "format=" not in path:
        path += "?format=api"
    else:
        pytest.skip("?format= is the tool spec format on /tools/")
    response = getattr(client_for(editor), method)(path, **extra)
    assert_json_error(response, status)


@pytest.mark.django_db
def test_an_anonymous_browser_gets_a_json_403(editor):
    assert_json_error(APIClient().get("/api/calls/", **BROWSER), 403)


@pytest.mark.django_db
def test_a_refused_decision_is_json_for_a_browser(editor):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    response = client_for(editor).post(f"/api/calls/{call.pk}/approve/", {}, **BROWSER)
    body = assert_json_error(response, 403)
    assert body["code"] == "approval_not_permitted"


@pytest.mark.skipif(not SCHEMA_AVAILABLE, reason="drf-spectacular is not installed")
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("anonymous", "method", "path", "status", "code"),
    [
        (True, "get", "/api/schema/", 403, "not_authenticated"),
        (True, "get", "/api/schema/?format=json", 403, "not_authenticated"),
        (False, "get", "/api/schema/?format=nope", 404, "not_found"),
        (False, "post", "/api/schema/", 405, "method_not_allowed"),
        (False, "delete", "/api/schema/", 405, "method_not_allowed"),
    ],
)
def test_the_schema_views_errors_are_json_with_a_code(
    editor, anonymous, method, path, status, code
):
    client = APIClient() if anonymous else client_for(editor)
    body = assert_json_error(getattr(client, method)(path), status)
    assert body["code"] == code


@pytest.mark.skipif(not SCHEMA_AVAILABLE, reason="drf-spectacular is not installed")
@pytest.mark.django_db
def test_the_schema_itself_is_still_served(editor):
    response = client_for(editor).get("/api/schema/?format=json")
    assert response.status_code == 200
    assert "openapi" in response.json()


def _views(patterns: list[Any]) -> list[tuple[str, Any]]:
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found.extend(_views(pattern.url_patterns))
        elif isinstance(pattern, URLPattern):
            found.append((str(pattern.pattern), pattern.callback))
    return found


def test_every_view_of_the_api_renders_its_errors_as_json():
    views = _views(api_urls.urlpatterns)
    assert len(views) >= 7
    for route, callback in views:
        view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
        assert view_class is not None, route
        assert issubclass(view_class, api_views.JSONErrorsMixin), route


# -- a property: no method, path, Accept header or body makes the API answer anything but
# a success or a JSON error --------------------------------------------------------------------

_PATHS = st.sampled_from(
    [
        "/api/",
        "/api",
        "/api/tools",
        "/api/tools/",
        "/api/calls/",
        "/api/calls/{call}/",
        "/api/calls/{call}/approve/",
        "/api/calls/{call}/deny/",
        "/api/calls/{call}/cancel/",
        "/api/calls/{missing}/",
        "/api/calls/{missing}/approve/",
        "/api/schema/",
        "/api/nope/",
        "/api/calls/%00/",
        "/api/calls/%ED%A0%80/",
    ]
)
_ACCEPTS = st.sampled_from(
    [
        "",
        "*/*",
        "text/html",
        "application/yaml",
        "application/vnd.oai.openapi",
        "application/xml",
        "text/html;q=\x01",
        "application/json; indent=999999999",
        "application/json; indent=-1",
    ]
)
_QUERIES = st.lists(
    st.tuples(
        st.sampled_from(["format", "state", "limit", "offset", "ordering", "lang", "x"]),
        st.sampled_from(["", "api", "json", "yaml", "%00", "%ED%A0%80", "%FF", "-1", "9" * 5000]),
    ),
    max_size=3,
).map(lambda items: "&".join(f"{k}={v}" for k, v in items))
_BODIES = st.sampled_from(
    [
        b"",
        b"{}",
        b"[]",
        b'{"tool": "runs_echo", "arguments": {"text": "\\ud800"}}',
        b'{"comment": "\\u0000"}',
        b'{"comment": 1e400}',
        b"[" * 5000,
        b"\xff\xfe",
        b"NaN",
    ]
)
_CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-16",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=b",
        "text/plain",
    ]
)


@pytest.mark.django_db
@hsettings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"]),
    path=_PATHS,
    accept=_ACCEPTS,
    query=_QUERIES,
    body=_BODIES,
    content_type=_CONTENT_TYPES,
    anonymous=st.booleans(),
)
def test_no_request_is_answered_by_anything_but_json_errors(
    editor, method, path, accept, query, body, content_type, anonymous
):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    url = path.format(call=call.pk, missing=uuid.uuid4()) + (f"?{query}" if query else "")
    client = APIClient() if anonymous else client_for(editor)
    extra = {"HTTP_ACCEPT": accept} if accept else {}
    response = client.generic(method, url, body, content_type=content_type, **extra)
    if response.status_code in (301, 302) or response.status_code < 400:
        return
    assert_json_error(response)


# -- the same on PostgreSQL ----------------------------------------------------------------------


# This file runs again on PostgreSQL, in the one PostgreSQL session of
# tests/runs/test_postgres.py.


# -- NUL in a header, a query parameter --------------------------------------------------------
# A token with a NUL went to PostgreSQL (``DataError``); the handler then logged
# ``request.user``, which authenticated again and raised the same error from inside the
# exception handler: an HTML 500.


@pytest.mark.django_db
@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_AUTHORIZATION": "Token abc\x00def"},
        {"HTTP_AUTHORIZATION": "Token \x00"},
        {"HTTP_COOKIE": "sessionid=abcdefgh\x00ijkl"},
        {"HTTP_X_ANYTHING": "a\x00"},
        {"HTTP_AUTHORIZATION": "Token abc\ud800"},
    ],
    ids=["token", "token-nul-only", "session-cookie", "other-header", "token-surrogate"],
)
@pytest.mark.parametrize("path", ["/api/calls/", "/api/tools/", "/api/schema/", "/api/nope/"])
def test_a_nul_in_a_header_is_a_json_400_and_never_reaches_the_database(
    editor, headers, path, caplog
):
    response = APIClient().get(path, **headers)
    if path == "/api/schema/" and not SCHEMA_AVAILABLE:
        return
    body = assert_json_error(response, 400)
    assert body["code"] == "invalid_characters"
    assert "\x00" not in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query", ["state=%00", "x%00=1", "limit=1&offset=%00", "format=%00", "lang=%00"]
)
@pytest.mark.parametrize("path", ["/api/", "/api/calls/", "/api/tools/", "/api/schema/"])
def test_a_nul_in_a_query_parameter_is_a_json_400(editor, query, path):
    if path == "/api/schema/" and not SCHEMA_AVAILABLE:
        pytest.skip("drf-spectacular is not installed")
    response = client_for(editor).get(f"{path}?{query}")
    body = assert_json_error(response, 400)
    assert body["code"] in ("invalid_characters", "invalid")


@pytest.mark.django_db
def test_a_valid_token_still_authenticates(editor):
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=editor)
    response = APIClient().get("/api/calls/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200, response.content


# -- schemathesis, in process, against the API's own OpenAPI schema ---------------------------


def _send(client: APIClient, case: Any) -> Any:
    from urllib.parse import urlencode

    path = "/api" + case.formatted_path
    query = case.query or {}
    if query:
        path += "?" + urlencode(query, doseq=True)
    headers = {
        f"HTTP_{k.upper().replace('-', '_')}": str(v)
        for k, v in (case.headers or {}).items()
        if k.lower() not in ("content-type", "content-length")
    }
    media_type = case.media_type or "application/json"
    body = case.body
    if body is None or body.__class__.__name__ == "NotSet":
        data = b""
    elif media_type == "application/json":
        data = json.dumps(body).encode("utf-8", "surrogatepass")
    elif media_type == "multipart/form-data" and isinstance(body, dict):
        fields = {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()}
        return getattr(client, case.method.lower())(path, fields, format="multipart", **headers)
    elif isinstance(body, dict):
        data = urlencode(
            {k: json.dumps(v) if not isinstance(v, str) else v for k, v in body.items()}
        ).encode("utf-8", "surrogatepass")
    else:
        data = str(body).encode("utf-8", "surrogatepass")
    return client.generic(case.method, path, data, content_type=media_type, **headers)


@pytest.mark.django_db
def test_schemathesis_against_the_apis_own_schema(editor, approver):
    """Every operation of ``/api/schema/``, with schemathesis' generated path, query and
    body, as the requester, an approver and anonymously: never a 500, every error JSON
    with ``detail`` and ``code``, and nothing stored is unstorable."""
    schemathesis = pytest.importorskip("schemathesis")
    if not SCHEMA_AVAILABLE:
        pytest.skip("drf-spectacular is not installed")
    raw = client_for(editor).get("/api/schema/?format=json").json()
    schema = schemathesis.openapi.from_dict(raw)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 7
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    clients = {"editor": client_for(editor), "approver": client_for(approver)}
    seen: dict[int, int] = {}

    @hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        case=st.one_of([op.as_strategy() for op in operations]),
        who=st.sampled_from(["editor", "approver", "anonymous"]),
        real_call=st.booleans(),
    )
    def check(case: Any, who: str, real_call: bool) -> None:
        if real_call and case.path_parameters and "id" in case.path_parameters:
            case.path_parameters = {**case.path_parameters, "id": str(call.pk)}
        client = clients.get(who) or APIClient()
        response = _send(client, case)
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        if response.status_code >= 400:
            assert_json_error(response)

    check()
    print(f"schemathesis: statuses {sorted(seen.items())}")
    assert any(200 <= code < 300 for code in seen), seen
    assert any(400 <= code < 500 for code in seen), seen
    for stored in ToolCall.objects.all():
        check_storable(stored.arguments)


# -- what a tool returns is stored and rendered, whatever it contains --------------------------
# A result with a NUL, a lone surrogate or a NaN (a plugin's tool, a page's bytes) was
# refused by PostgreSQL (DataError: the call never finished and the request was a 400
# "unstorable_input" for a call already stored), and on SQLite stored but not renderable
# (the JSON renderer refuses NaN and cannot encode a lone surrogate: a 500 on every poll).


class _UnstorableOutputTool(Tool):
    name = "review15_unstorable_output"
    group = "runs-test"
    scope = Scope.NONE
    effect = Effect.READ
    enabled_by_default = True
    description = "Returns what no database stores (review15)."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    needs_approval: ClassVar[bool] = False

    def requires_approval(self, call: Any, context: Any = None) -> bool:
        return type(self).needs_approval

    def approval_preview(self, invocation: Any) -> dict[str, Any]:
        return {"nan": float("nan"), "text": "p\x00\ud800"}

    def execute(self, arguments: Any, context: Any) -> ToolResult:
        return ToolResult(
            content="a\x00b\ud800c\U0001f600",
            meta={"k\x00": "v\x00", "deep": [{"x": "\udfff"}]},
        )


@pytest.mark.django_db
def test_a_tools_unstorable_output_is_repaired_not_lost(editor, tool_registry):
    tool_registry.register(_UnstorableOutputTool)
    client = client_for(editor)
    response = client.post("/api/calls/", {"tool": _UnstorableOutputTool.name}, format="json")
    # No approval needed: accepted, it runs on the background runner.
    assert response.status_code == 202, response.content[:500]
    assert response.json()["state"] == "approved"
    settled_call(response.json()["id"])
    response = client.get(f"/api/calls/{response.json()['id']}/")
    body = response.json()
    assert body["state"] == "succeeded", body
    assert body["result"]["content"] == "a\ufffdb\ufffdc\U0001f600"
    assert body["result"]["meta"] == {"k\ufffd": "v\ufffd", "deep": [{"x": "\ufffd"}]}
    again = client.get(f"/api/calls/{body['id']}/")
    assert again.status_code == 200 and again.json()["result"] == body["result"]
    listed = client.get("/api/calls/")
    assert listed.status_code == 200, listed.content[:300]


@pytest.mark.django_db
def test_a_tools_unstorable_approval_preview_is_repaired(editor, approver, tool_registry):
    """A preview with a NaN was dropped whole (logged as failed); repaired, the approver
    sees the rest of it."""
    tool_registry.register(_UnstorableOutputTool)
    _UnstorableOutputTool.needs_approval = True
    try:
        response = client_for(editor).post(
            "/api/calls/", {"tool": _UnstorableOutputTool.name}, format="json"
        )
    finally:
        _UnstorableOutputTool.needs_approval = False
    assert response.status_code == 201, response.content[:500]
    body = response.json()
    assert body["state"] == "awaiting_approval", body
    assert body["approval_preview"]["nan"] is None
    assert body["approval_preview"]["text"] == "p\ufffd\ufffd"
    approved = client_for(approver).post(f"/api/calls/{body['id']}/approve/", {}, format="json")
    assert approved.status_code == 202, approved.content[:300]
    assert settled_call(body["id"]).state == "succeeded"
    own = client_for(editor).get(f"/api/calls/{body['id']}/").json()
    assert own["result"]["content"] == "a\ufffdb\ufffdc\U0001f600"


@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats()
        | st.text(alphabet=st.characters(codec=None)),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(alphabet=st.characters(codec=None)), children, max_size=4)
        ),
        max_leaves=30,
    )
)
def test_make_storable_always_gives_storable_json(value):
    made = make_storable(value)
    check_storable(made, max_bytes=10**9, max_depth=10**6)
    json.dumps(made, allow_nan=False).encode("utf-8")
    assert make_storable(made) == made


def test_make_storable_is_iterative():
    deep: Any = "x\x00"
    for _ in range(50_000):
        deep = [deep]
    made = make_storable(deep)
    for _ in range(50_000):
        made = made[0]
    assert made == "x\ufffd"
