"""What one token and one user may hold open on the MCP server (issue 29, finding 5): an
MCP session (opened by ``initialize``) and a ``tools/call`` waiting for an approval are
holds (``budgets.holds``), bounded per token and per user; past the bound ``initialize`` is
answered ``429`` with ``Retry-After`` and the refusal (``too_many_open``) in the JSON-RPC
error's ``data``, a wait is cut to the "waiting, poll it" answer at once; every other user
is still served; a session that ends (``DELETE``, or idle for ``WEBFETCH_MCP_SESSION_IDLE``)
gives its hold back.

A real server (uvicorn on a Unix socket, another process), driven over raw HTTP and by the
official client SDK."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.runs.infra import wait_for

from .conftest import HTTP_URL
from .test_server import _approve, _in_thread

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "holds-test", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def initialize(server: Any, secret: str) -> Any:
    async with server.http_client(secret) as http:
        return await http.post(HTTP_URL, content=json.dumps(INITIALIZE), headers=HEADERS)


async def end_session(server: Any, secret: str, session_id: str) -> int:
    async with server.http_client(secret) as http:
        response = await http.delete(HTTP_URL, headers={"mcp-session-id": session_id})
        return int(response.status_code)


def assert_too_many_open(response: Any, kind: str) -> None:
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["data"]["code"] == error["data"]["error"] == "too_many_open"
    assert error["data"]["kind"] == kind
    assert int(response.headers["Retry-After"]) == error["data"]["retry_after"] >= 1


def test_sessions_past_the_bound_per_token_and_per_user_are_refused(http_server, users, token_for):
    server = http_server(WEBFETCH_TEST_OPEN_PER_PRINCIPAL=json.dumps({"mcp_sessions": 2}))
    first, second = token_for(users["editor"], "one"), token_for(users["editor"], "two")
    theirs = token_for(users["admin"], "theirs")

    async def scenario() -> None:
        opened = [await initialize(server, first) for _ in range(2)]
        assert [r.status_code for r in opened] == [200, 200]
        # ``initialize`` counts: a third session of the token is refused ...
        assert_too_many_open(await initialize(server, first), "mcp_sessions")
        # ... and so is one of another token of the same user (the user's bound).
        assert_too_many_open(await initialize(server, second), "mcp_sessions")
        # Another user is served.
        assert (await initialize(server, theirs)).status_code == 200
        # A session that ends gives its hold back.
        assert await end_session(server, first, opened[0].headers["mcp-session-id"]) < 300
        assert (await initialize(server, second)).status_code == 200
        assert_too_many_open(await initialize(server, first), "mcp_sessions")

    anyio.run(scenario)


def test_an_idle_session_expires_and_gives_its_hold_back(http_server, users, token_for):
    server = http_server(
        WEBFETCH_TEST_OPEN_PER_PRINCIPAL=json.dumps({"mcp_sessions": 1}),
        WEBFETCH_TEST_MCP_SESSION_IDLE="1",
    )
    secret = token_for(users["editor"])

    async def scenario() -> None:
        opened = await initialize(server, secret)
        assert opened.status_code == 200
        session_id = opened.headers["mcp-session-id"]
        # The token's one session is open: another is refused until the first, left
        # alone (no request in flight), expires and gives its hold back.
        for _ in range(600):
            again = await initialize(server, secret)
            if again.status_code == 200:
                break
            assert_too_many_open(again, "mcp_sessions")
            await anyio.sleep(0.1)
        else:
            raise AssertionError("the idle session did not expire")
        async with server.http_client(secret) as http:
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            gone = await http.post(
                HTTP_URL,
                content=json.dumps(ping),
                headers={**HEADERS, "mcp-session-id": session_id},
            )
        assert gone.status_code == 404

    anyio.run(scenario)


def test_calls_waiting_for_an_approval_past_the_bound_are_told_to_poll(
    connect, http_server, users, token_for, web
):
    server = http_server(
        WEBFETCH_TEST_OPEN_PER_PRINCIPAL=json.dumps({"mcp_waits": 1}),
        WEBFETCH_TEST_MCP_WAIT="60",
    )
    secret = token_for(users["editor"])
    theirs = token_for(users["admin"])
    url = web.url("news.lab.example", "/page", scheme="https")

    async def scenario() -> dict[str, Any]:
        box: dict[str, Any] = {}
        waiting = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            waiting.set()  # the wait (and its hold) has begun

        async with (
            connect("http", secret, server=server) as mine,
            connect("http", secret, server=server) as again,
            connect("http", theirs, server=server) as other,
        ):

            async def first() -> None:
                box["first"] = await mine.call_tool(
                    "fetch_external_url", {"url": url}, progress_callback=on_progress
                )

            async def theirs_waits() -> None:
                box["theirs"] = await other.call_tool(
                    "fetch_external_url", {"url": url + "?theirs"}, progress_callback=on_progress
                )

            async with anyio.create_task_group() as group:
                group.start_soon(first)
                await waiting.wait()
                # The user's one wait is taken: a second call is answered at once.
                box["second"] = await again.call_tool("fetch_external_url", {"url": url + "?2"})
                # Another user's call waits as usual.
                group.start_soon(theirs_waits)
                for key, user in (("first", users["editor"]), ("theirs", users["admin"])):
                    call_id = await _in_thread(_awaiting_for, user)
                    box[f"approved_{key}"] = await _in_thread(_approve, users["approver"], call_id)
        return box

    box = anyio.run(scenario)
    second = box["second"]
    assert second.is_error is False
    assert second.structured_content["error"] == "too_many_open"
    assert second.structured_content["kind"] == "mcp_waits"
    assert second.structured_content["retry_after"] >= 1
    assert second.structured_content["waiting"] is True
    assert "webfetch_call_status" in second.content[0].text
    # The waits that were held end with their results.
    for key in ("first", "theirs"):
        assert box[key].is_error is False, box[key].content[0].text
        assert box[key].structured_content["state"] == "succeeded"
        assert "error" not in box[key].structured_content


def _awaiting_for(user: Any) -> str:
    """The user's first call awaiting approval (the refused wait's call waits too)."""
    from django_webfetch.models import CallState, ToolCall

    def found() -> Any:
        return (
            ToolCall.objects.filter(state=CallState.AWAITING_APPROVAL, user=user)
            .order_by("created")
            .first()
        )

    return str(wait_for(found, 30, what="a call awaiting approval").pk)


# This file and the surface enumeration (tests/budgets/test_open_surfaces.py) run again on
# PostgreSQL, in the one PostgreSQL session of tests/runs/test_postgres.py.
