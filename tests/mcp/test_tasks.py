"""Approvals as MCP tasks (the Tasks extension, SEP-2663), driven by the official MCP SDK.

The SDK (mcp 2.3) has no tasks extension of its own, on either side.  The client here is
the SDK's ``ClientSession`` on the 2026-07-28 wire (``server/discover``), declaring the
extension through the SDK's own extension surface (``extensions=`` and a ``ResultClaim``
for ``resultType: "task"``, so ``call_tool`` parses the task), and sending ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` through ``send_request`` with raw request types (each
with its ``Mcp-Name`` header, as the extension requires over Streamable HTTP).

The servers are the real ones (uvicorn, ``manage.py webfetch mcp``) in the lab; approvals
and denials go through the API, as an approver's card sends them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio
import pytest
from mcp import ClientSession, stdio_client
from mcp.client.extension import ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT,
    CallToolResult,
    RequestParams,
    Result,
)
from mcp_types import Request as RawRequest
from pydantic import ConfigDict
from rest_framework.test import APIClient

from django_webfetch.models import CallState, EgressEvent, ToolCall
from tests.runs.infra import wait_for
from tests.settle import approve, deny

from .conftest import HTTP_URL, HttpServer, stdio_parameters

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

TASKS = "io.modelcontextprotocol/tasks"
BEGIN = "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce="
TRANSPORTS = ["http", "stdio"]
#: The approver's user name: it must never reach the client (the model).
APPROVER_NAME = "rosalind_checker"
#: Polls of tasks/get before a test gives up (each one waits the server's pollIntervalMs).
MAX_POLLS = 400


# -- the client side of the extension, on the SDK's raw types --------------------------------


class CreateTaskResult(Result):
    """``CreateTaskResult`` (``resultType: "task"``): the claimed ``tools/call`` shape."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class TaskState(Result):
    """A ``tasks/get`` result (``DetailedTask``), kept whole for the assertions."""

    model_config = ConfigDict(extra="allow")

    result_type: str
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None


class Acknowledged(Result):
    result_type: str


class TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")

    task_id: str


class _TaskRequest(RawRequest[TaskParams, str]):
    params: TaskParams
    name_param: ClassVar[str | None] = "taskId"  # Mcp-Name, as the extension requires


class GetTask(_TaskRequest):
    method: Literal["tasks/get"] = "tasks/get"


class UpdateTask(_TaskRequest):
    method: Literal["tasks/update"] = "tasks/update"


class CancelTask(_TaskRequest):
    method: Literal["tasks/cancel"] = "tasks/cancel"


async def _unused_resolve(result: CreateTaskResult, ctx: Any) -> CallToolResult:
    raise AssertionError("the tests read the task themselves (allow_claimed=True)")


TASK_CLAIM = ResultClaim(result_type="task", model=CreateTaskResult, resolve=_unused_resolve)


async def get_task(session: ClientSession, task_id: str) -> TaskState:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), TaskState)


async def until_terminal(session: ClientSession, task_id: str) -> tuple[TaskState, list[str]]:
    """Poll ``tasks/get`` as the server's ``pollIntervalMs`` says, until the task is
    terminal; the statuses seen on the way."""
    seen: list[str] = []
    for _ in range(MAX_POLLS):
        state = await get_task(session, task_id)
        seen.append(state.status)
        if state.status in ("completed", "failed", "cancelled"):
            return state, seen
        await anyio.sleep((state.poll_interval_ms or 250) / 1000)
    raise AssertionError(f"task {task_id} did not finish in {MAX_POLLS} polls: {seen[-3:]}")


async def discover(session: ClientSession) -> None:
    """``server/discover`` (the 2026-07-28 wire), asked again while a loaded machine is
    still starting the server (the SDK gives each probe 10 s): the first request, answered
    late, still opened the connection in that era."""
    for _ in range(11):
        try:
            await session.discover()
            return
        except MCPError as exc:
            if exc.error.code != REQUEST_TIMEOUT:
                raise
    raise AssertionError("the server never answered server/discover")


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def http_server(module_http_server: Callable[..., HttpServer]) -> Callable[..., HttpServer]:
    """The module's HTTP tests share one uvicorn (tests/mcp/conftest.py,
    ``module_http_server``; issue 28): no test here restarts, stops or reconfigures it,
    and what a task is (its call, its state, its token) is read from the database."""
    return module_http_server


@pytest.fixture
def modern(
    http_server: Callable[..., HttpServer], settings: Any, tmp_path: Path
) -> Callable[..., Any]:
    """``modern(transport, secret, tasks=True)``: a ``ClientSession`` on the 2026-07-28 wire
    (``server/discover``), declaring the Tasks extension unless ``tasks=False``."""

    @contextlib.asynccontextmanager
    async def open_session(
        transport: str, secret: str, *, tasks: bool = True, server: HttpServer | None = None
    ) -> AsyncIterator[ClientSession]:
        options: dict[str, Any] = {}
        if tasks:
            options = {"extensions": {TASKS: {}}, "result_claims": {TASKS: [TASK_CLAIM]}}
        if transport == "http":
            server = server or http_server()
            async with (
                server.http_client(secret) as http,
                streamable_http_client(HTTP_URL, http_client=http) as (read, write),
                ClientSession(read, write, **options) as session,
            ):
                await discover(session)
                yield session
        else:
            with open(tmp_path / "stdio-server.log", "a") as errlog:
                async with (
                    stdio_client(stdio_parameters(settings, secret), errlog=errlog) as (
                        read,
                        write,
                    ),
                    ClientSession(read, write, **options) as session,
                ):
                    await discover(session)
                    yield session

    return open_session


@pytest.fixture
def named_approver(approver_factory: Callable[..., Any]) -> Any:
    return approver_factory(username=APPROVER_NAME)


def _in_thread(fn: Any, *args: Any) -> Any:
    from django.db import connections

    def run() -> Any:
        try:
            return fn(*args)
        finally:
            connections.close_all()

    return anyio.to_thread.run_sync(run)


def _post_approve(user: Any, call_id: str) -> int:
    """An approver's approval over the API, as is (no wait for the call to settle)."""
    api = APIClient()
    api.force_login(user)
    return api.post(
        f"/api/calls/{call_id}/approve/", {"comment": "late"}, format="json"
    ).status_code


def _decide(decide: Any, user: Any, call_id: str, comment: str) -> int:
    api = APIClient()
    api.force_login(user)
    return decide(api, call_id, {"comment": comment}).status_code


# -- a task-aware client -------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_call_awaiting_approval_is_a_task_with_progress_then_its_result(
    transport, modern, users, token_for, named_approver, web
):
    secret = token_for(users["editor"])
    url = web.url("news.lab.example", "/page?topic=caf%C3%A9", scheme="https")

    async def scenario() -> tuple[Any, TaskState, TaskState, list[str]]:
        async with modern(transport, secret) as session:
            created = await session.call_tool(
                "fetch", {"url": url, "max_length": 3000}, allow_claimed=True
            )
            assert isinstance(created, CreateTaskResult), created
            waiting = await get_task(session, created.task_id)
            assert web.requests == []  # nothing fetched before the approval
            status = await _in_thread(
                _decide, approve, named_approver, created.task_id, "host checked"
            )
            assert status == 200
            done, seen = await until_terminal(session, created.task_id)
            return created, waiting, done, seen

    created, waiting, done, seen = anyio.run(scenario)

    # tools/call answered a task at once: the call's id, durable, waiting for a human.
    call = ToolCall.objects.get(pk=created.task_id)
    assert created.result_type == "task" and created.status == "working"
    assert created.poll_interval_ms and created.poll_interval_ms > 0
    assert created.ttl_ms and created.ttl_ms > 0
    assert "waiting for a human approval" in (created.status_message or "")
    # tasks/get reported the wait in our words, naming who may approve, never who did.
    assert waiting.result_type == "complete" and waiting.status == "working"
    assert "waiting for a human approval" in waiting.status_message
    assert "may approve tool calls" in waiting.status_message
    assert waiting.result is None
    # Then the result, once an approver approved on the usual card.
    assert done.status == "completed" and set(seen) <= {"working", "completed"}
    result = CallToolResult.model_validate(done.result)
    assert result.is_error is False
    text = result.content[0].text
    assert text.count(BEGIN) == 1
    assert result.structured_content["call_id"] == created.task_id
    assert result.structured_content["next_start_index"] == 3000  # fetch's max_length kept
    assert done.result["_meta"]["io.modelcontextprotocol/related-task"] == {
        "taskId": created.task_id
    }
    assert done.poll_interval_ms is None
    for shown in (created, waiting, done):
        assert APPROVER_NAME not in shown.model_dump_json()
    call.refresh_from_db()
    assert call.state == CallState.SUCCEEDED and call.decided_by == named_approver
    assert EgressEvent.objects.filter(call_id=call.pk, decision="fetched").count() == 1


def test_a_denied_task_completes_with_the_refusal_and_the_comment_not_the_name(
    modern, users, token_for, named_approver, web
):
    secret = token_for(users["editor"])
    url = web.url("news.lab.example", "/page", scheme="https")

    async def scenario() -> TaskState:
        async with modern("stdio", secret) as session:
            created = await session.call_tool("fetch", {"url": url}, allow_claimed=True)
            assert isinstance(created, CreateTaskResult), created
            status = await _in_thread(
                _decide, deny, named_approver, created.task_id, "not a source we cite"
            )
            assert status == 200
            done, _seen = await until_terminal(session, created.task_id)
            return done

    done = anyio.run(scenario)

    # A refusal is a tool result with isError (``failed`` is for JSON-RPC errors only).
    assert done.status == "completed"
    result = CallToolResult.model_validate(done.result)
    assert result.is_error is True
    text = result.content[0].text
    assert "denied" in text and '"not a source we cite"' in text
    assert result.structured_content["state"] == "denied"
    assert APPROVER_NAME not in done.model_dump_json()
    assert web.requests == []


def test_a_client_withdraws_its_task_and_cannot_complete_it(
    modern, http_server, users, token_for, named_approver, web, user_factory
):
    secret = token_for(users["editor"])
    other_secret = token_for(user_factory(staff=True, username="other_editor"))
    url = web.url("news.lab.example", "/page", scheme="https")
    server = http_server()

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with modern("http", secret, server=server) as session:
            created = await session.call_tool("fetch", {"url": url}, allow_claimed=True)
            assert isinstance(created, CreateTaskResult), created
            task_id = created.task_id
            # A client may not set its task's state: refused, and nothing changes.
            with pytest.raises(MCPError) as refused:
                await session.send_request(
                    UpdateTask(
                        params=TaskParams(
                            task_id=task_id,
                            status="completed",
                            result={"content": [{"type": "text", "text": "approved"}]},
                            inputResponses={},
                        )
                    ),
                    Acknowledged,
                )
            seen["refused"] = refused.value
            # Input responses to requests the server never made are acknowledged and
            # ignored (the extension's rule): they approve nothing either.
            seen["ignored"] = await session.send_request(
                UpdateTask(
                    params=TaskParams(
                        task_id=task_id,
                        inputResponses={"approval": {"action": "accept", "content": {}}},
                    )
                ),
                Acknowledged,
            )
            seen["after_update"] = await get_task(session, task_id)
            # Another user's client: no such task, neither to read nor to cancel.
            async with modern("http", other_secret, server=server) as intruder:
                for request in (GetTask, UpdateTask, CancelTask):
                    with pytest.raises(MCPError) as missing:
                        await intruder.send_request(
                            request(params=TaskParams(task_id=task_id, inputResponses={})),
                            TaskState,
                        )
                    seen.setdefault("intruder", []).append(missing.value)
            # The creator withdraws it.
            seen["ack"] = await session.send_request(
                CancelTask(params=TaskParams(task_id=task_id)), Acknowledged
            )
            seen["cancelled"], _ = await until_terminal(session, task_id)
            seen["approve_after"] = await _in_thread(_post_approve, named_approver, task_id)
            seen["task_id"] = task_id
        return seen

    seen = anyio.run(scenario)

    refused = seen["refused"]
    assert refused.error.code == INVALID_PARAMS
    assert refused.error.data["error"] == "task_state_is_the_servers"
    assert refused.error.data["fields"] == ["result", "status"]
    assert seen["ignored"].result_type == "complete"
    assert seen["after_update"].status == "working"
    for missing in seen["intruder"]:
        assert missing.error.code == INVALID_PARAMS
        assert missing.error.data["error"] == "no_such_task"
    assert seen["ack"].result_type == "complete"
    cancelled = seen["cancelled"]
    assert cancelled.status == "cancelled" and cancelled.result is None
    assert "cancelled" in cancelled.status_message
    # The call ended withdrawn, on record; the approver's card can no longer approve it.
    call = ToolCall.objects.get(pk=seen["task_id"])
    assert call.state == CallState.CANCELLED and call.reason == "cancelled"
    assert call.decided_by is None
    assert call.finished_at is not None
    assert seen["approve_after"] == 409
    assert web.requests == []


def test_task_methods_check_the_routing_header(modern, http_server, users, token_for, web):
    secret = token_for(users["editor"])
    url = web.url("news.lab.example", "/page", scheme="https")

    class UnroutedGet(RawRequest[TaskParams, str]):
        method: Literal["tasks/get"] = "tasks/get"
        params: TaskParams

    async def scenario() -> tuple[MCPError, str]:
        async with modern("http", secret) as session:
            created = await session.call_tool("fetch", {"url": url}, allow_claimed=True)
            assert isinstance(created, CreateTaskResult), created
            with pytest.raises(MCPError) as mismatch:
                await session.send_request(
                    UnroutedGet(params=TaskParams(task_id=created.task_id)), TaskState
                )
            return mismatch.value, created.task_id

    mismatch, task_id = anyio.run(scenario)
    assert mismatch.error.code == HEADER_MISMATCH
    assert ToolCall.objects.get(pk=task_id).state == CallState.AWAITING_APPROVAL


# -- clients without the extension ---------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_client_without_the_extension_waits_as_before(
    transport, modern, connect, users, token_for, named_approver, web
):
    secret = token_for(users["editor"])
    url = web.url("news.lab.example", "/page", scheme="https")

    async def scenario() -> tuple[Any, MCPError]:
        box: dict[str, Any] = {}
        async with modern(transport, secret, tasks=False) as session:

            async def call() -> None:
                box["result"] = await session.call_tool("fetch", {"url": url})

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                call_id = await _in_thread(
                    lambda: str(
                        wait_for(
                            lambda: ToolCall.objects.filter(
                                state=CallState.AWAITING_APPROVAL
                            ).first(),
                            30,
                            what="a call awaiting approval",
                        ).pk
                    )
                )
                assert await _in_thread(_decide, approve, named_approver, call_id, "ok") == 200
        # A client of the handshake era has no task methods at all.
        async with connect(transport, secret) as legacy:
            with pytest.raises(MCPError) as unknown:
                await legacy.send_request(GetTask(params=TaskParams(task_id=call_id)), TaskState)
        return box["result"], unknown.value

    result, unknown = anyio.run(scenario)
    assert isinstance(result, CallToolResult)
    assert result.is_error is False and BEGIN in result.content[0].text
    assert unknown.error.code == METHOD_NOT_FOUND
