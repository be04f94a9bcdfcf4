"""The Tasks extension's methods, in process: the server's own handlers (``build_server``)
with their parameters validated as the SDK's runner validates them, on real rows.

A property test throws arbitrary ``tasks/update`` bodies and task ids at them: whatever a
client sends, a task waiting for a human stays waiting, with no result and no decision.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, INVALID_PARAMS, METHOD_NOT_FOUND

from django_webfetch.models import AccessToken, CallState, ToolCall

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

MODERN = "2026-07-28"
SPEC_MEMBERS = {"taskId", "inputResponses", "requestState", "_meta"}

json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _ctx(method: str, *, version: str = MODERN, meta: dict[str, Any] | None = None) -> Any:
    return ServerRequestContext(
        session=None,  # type: ignore[arg-type] - the task methods send nothing
        lifespan_context=None,
        protocol_version=version,
        method=method,
        meta=meta,  # type: ignore[arg-type]
    )


@pytest.fixture
def task(run_tools, user_factory) -> tuple[Any, Any, str]:
    """The server (its token: the editor's), and a call the editor requested over MCP
    that waits for a human."""
    from django_webfetch.mcp import calls
    from django_webfetch.mcp.server import build_server

    editor = user_factory(staff=True, username="task_editor")
    token, _secret = AccessToken.objects.issue(editor, "tasks", by=editor)

    async def authenticate(ctx: Any) -> Any:
        return token

    pending = calls.start_call(token, "runs_echo", {"text": "hello"})
    assert isinstance(pending, calls.Pending)
    assert ToolCall.objects.get(pk=pending.call_id).state == CallState.AWAITING_APPROVAL
    return build_server(authenticate), token, pending.call_id


def _send(server: Any, method: str, params: dict[str, Any], **ctx: Any) -> Any:
    entry = server.get_request_handler(method)
    typed = entry.params_type.model_validate(params, by_name=False)
    return anyio.run(entry.handler, _ctx(method, **ctx), typed)


@hsettings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    extra=st.dictionaries(
        st.text(min_size=1, max_size=16).filter(lambda k: k not in SPEC_MEMBERS),
        json_value,
        max_size=4,
    ),
    responses=st.dictionaries(
        st.text(max_size=12),
        st.dictionaries(st.text(max_size=8), json_value, max_size=3),
        max_size=3,
    ),
)
def test_no_tasks_update_completes_or_approves_a_task(task, extra, responses):
    server, _token, task_id = task
    body = {"taskId": task_id, "inputResponses": responses, **extra}
    try:
        acknowledged = _send(server, "tasks/update", body)
    except MCPError as exc:
        # Any member that is not the extension's is refused by name.
        assert extra, exc
        assert exc.error.code == INVALID_PARAMS
        assert exc.error.data["error"] == "task_state_is_the_servers"
        assert exc.error.data["fields"] == sorted(extra)[:10]
    else:
        assert not extra
        assert acknowledged.result_type == "complete"
    call = ToolCall.objects.get(pk=task_id)
    assert call.state == CallState.AWAITING_APPROVAL
    assert call.result is None and call.decided_by_id is None
    view = _send(server, "tasks/get", {"taskId": task_id})
    assert view["status"] == "working" and "result" not in view


@hsettings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(task_id=st.text(max_size=64) | st.uuids().map(str))
def test_an_unknown_task_id_is_not_found_by_every_method(task, task_id):
    server, _token, own = task
    if task_id == own:
        return
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        with pytest.raises(MCPError) as missing:
            _send(server, method, {"taskId": task_id, "inputResponses": {}})
        assert missing.value.error.code == INVALID_PARAMS
        assert missing.value.error.data["error"] == "no_such_task"
    assert ToolCall.objects.get(pk=own).state == CallState.AWAITING_APPROVAL


def test_the_task_methods_are_of_the_2026_wire_only(task):
    server, _token, task_id = task
    with pytest.raises(MCPError) as unknown:
        _send(server, "tasks/get", {"taskId": task_id}, version="2025-11-25")
    assert unknown.value.error.code == METHOD_NOT_FOUND


@pytest.mark.parametrize(
    ("version", "meta", "declared"),
    [
        (
            MODERN,
            {CLIENT_CAPABILITIES_META_KEY: {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
            True,
        ),
        (MODERN, {CLIENT_CAPABILITIES_META_KEY: {"extensions": {}}}, False),
        (
            MODERN,
            {CLIENT_CAPABILITIES_META_KEY: {"extensions": {"io.modelcontextprotocol/tasks": True}}},
            False,
        ),
        (MODERN, {CLIENT_CAPABILITIES_META_KEY: "tasks"}, False),
        (MODERN, None, False),
        (
            "2025-11-25",
            {CLIENT_CAPABILITIES_META_KEY: {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
            False,
        ),
    ],
)
def test_only_a_request_that_declares_the_extension_gets_tasks(version, meta, declared):
    from django_webfetch.mcp.server import declares_tasks

    assert declares_tasks(_ctx("tools/call", version=version, meta=meta)) is declared


def test_a_withdrawn_task_is_cancelled_on_record(task):
    server, token, task_id = task
    acknowledged = _send(server, "tasks/cancel", {"taskId": task_id})
    assert acknowledged.result_type == "complete"
    call = ToolCall.objects.get(pk=task_id)
    assert call.state == CallState.CANCELLED and call.reason == "cancelled"
    view = _send(server, "tasks/get", {"taskId": task_id})
    assert view["status"] == "cancelled" and "pollIntervalMs" not in view
    assert token.user.username not in view["statusMessage"]
    # Cancelling again is acknowledged (cooperative) and changes nothing.
    assert _send(server, "tasks/cancel", {"taskId": task_id}).result_type == "complete"
    assert ToolCall.objects.get(pk=task_id).state == CallState.CANCELLED
