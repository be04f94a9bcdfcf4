"""The MCP server over both transports, driven by the official MCP client SDK in the lab.

Every call goes through the durable ToolCall path: the tests read the ``ToolCall`` rows,
the lab servers' request logs and the ``EgressEvent`` audit to prove it, and approve
through the API (``POST /api/calls/{id}/approve/``) as an approver would.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from django.core.management import call_command
from django.db import connections
from mcp.shared.exceptions import MCPError
from rest_framework.test import APIClient

from django_webfetch.models import AccessToken, CallState, EgressEvent, ToolCall
from django_webfetch.tools import tools_for_user
from tests.runs.infra import wait_for
from tests.settle import approve

from .conftest import HTTP_URL, HttpServer, stdio_parameters

BEGIN = "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce="
END = "<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce="

TRANSPORTS = ["http", "stdio"]
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


# -- one HTTP server for the module (issue 28) ------------------------------------------------


@pytest.fixture
def http_server(module_http_server: Callable[..., HttpServer]) -> Callable[..., HttpServer]:
    """The module's HTTP tests share one uvicorn (tests/mcp/conftest.py,
    ``module_http_server``): no test here restarts, stops or reconfigures it."""
    return module_http_server


def _in_thread(fn: Any, *args: Any) -> Any:
    """Django ORM work from the event loop: in a worker thread, its connection closed."""

    def run() -> Any:
        try:
            return fn(*args)
        finally:
            connections.close_all()

    return anyio.to_thread.run_sync(run)


def _awaiting_call() -> str:
    call = wait_for(
        lambda: ToolCall.objects.filter(state=CallState.AWAITING_APPROVAL).first(),
        30,
        what="a call awaiting approval",
    )
    return str(call.pk)


def _approve(approver: Any, call_id: str) -> dict[str, Any]:
    api = APIClient()
    api.force_login(approver)
    response = approve(api, call_id, {"comment": "host checked"})
    assert response.status_code == 200, response.content
    return response.json()


# -- tools/list -----------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tools_list_is_each_users_offer(
    transport, connect, users, token_for, group_factory, content_group, web
):
    group_factory("code", enabled=True)
    editor_secret, admin_secret = token_for(users["editor"]), token_for(users["admin"])

    async def names(secret: str) -> dict[str, Any]:
        async with connect(transport, secret) as session:
            return {t.name: t for t in (await session.list_tools()).tools}

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        return await names(editor_secret), await names(admin_secret)

    editor_tools, admin_tools = anyio.run(both)

    offered = {t.name: t for t in tools_for_user(users["editor"])}
    assert set(editor_tools) == set(offered) | {"fetch", "webfetch_call_status"}
    admin_offered = {t.name for t in tools_for_user(users["admin"])}
    assert set(admin_tools) == admin_offered | {"fetch", "webfetch_call_status"}
    # The code group's tools are for administrators only.
    assert {"read_source", "search_code"} <= set(admin_tools) - set(editor_tools)
    # The registry's own schema and description, unchanged.
    listed = editor_tools["fetch_external_url"]
    assert listed.input_schema == offered["fetch_external_url"].parameters
    assert listed.description == offered["fetch_external_url"].description
    assert listed.annotations.read_only_hint is True
    assert listed.annotations.open_world_hint is True
    assert editor_tools["read_page"].annotations.open_world_hint is False
    # fetch is shaped like the reference MCP fetch server.
    assert set(editor_tools["fetch"].input_schema["properties"]) == {
        "url",
        "max_length",
        "start_index",
        "raw",
    }
    # The API lists the same offer.
    api = APIClient()
    api.force_login(users["editor"])
    assert {s["name"] for s in api.get("/api/tools/").json()} == set(offered)


# -- read_page and resources ------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_read_page_and_pages_as_resources(
    transport, connect, users, token_for, content_group, pages
):
    secret = token_for(users["editor"])
    about = pages["about"].pk

    async def scenario() -> tuple[Any, Any, Any, Any]:
        async with connect(transport, secret) as session:
            read = await session.call_tool("read_page", {"page_id": about})
            resources = await session.list_resources()
            content = await session.read_resource(f"webfetch://page/{about}")
            with pytest.raises(MCPError) as missing:
                await session.read_resource(f"webfetch://page/{pages['staff'].pk}")
            return read, resources, content, missing.value

    read, resources, content, missing = anyio.run(scenario)

    assert read.is_error is False
    text = read.content[0].text
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert "Founded in 1952 by Anna and Karl." in text
    call = ToolCall.objects.get(pk=read.structured_content["call_id"])
    assert (call.tool, call.state, call.user) == ("read_page", "succeeded", users["editor"])
    assert call.conversation.startswith("mcp:token-")

    uris = {str(r.uri): r for r in resources.resources}
    assert f"webfetch://page/{about}" in uris
    assert uris[f"webfetch://page/{about}"].title == "About us"
    # The same page permissions as read_page: the staff-only page is not listed to an
    # editor outside its group; the login-only page is (the editor is signed in).
    assert f"webfetch://page/{pages['staff'].pk}" not in uris
    assert f"webfetch://page/{pages['members'].pk}" in uris
    [page] = content.contents
    assert page.mime_type == "text/markdown"
    assert "Founded in 1952 by Anna and Karl." in page.text and BEGIN in page.text
    assert "4711" not in str(missing)
    # Listing and reading went through the same durable path, and are on record.
    assert ToolCall.objects.filter(tool="list_pages", user=users["editor"]).count() == 1
    assert ToolCall.objects.filter(tool="read_page", state="failed").count() == 1


# -- fetch through approval ----------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_fetch_waits_for_the_approver_and_pages_without_downloading_again(
    transport, connect, users, token_for, web
):
    secret = token_for(users["editor"])
    url = web.url("news.lab.example", "/page?topic=caf%C3%A9", scheme="https")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def scenario() -> tuple[Any, Any, str]:
        box: dict[str, Any] = {}
        async with connect(transport, secret) as session:

            async def call() -> None:
                box["first"] = await session.call_tool(
                    "fetch", {"url": url, "max_length": 3000}, progress_callback=on_progress
                )

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                call_id = await _in_thread(_awaiting_call)
                assert web.requests == []  # nothing fetched before the approval
                box["approved"] = await _in_thread(_approve, users["approver"], call_id)
            second = await session.call_tool(
                "fetch",
                {"url": url, "max_length": 3000, "start_index": 3000},
            )
            return box["first"], second, call_id

    first, second, call_id = anyio.run(scenario)

    assert first.is_error is False, first.content[0].text
    text = first.content[0].text
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert first.structured_content["call_id"] == call_id
    assert first.structured_content["next_start_index"] == 3000
    assert text.rstrip().endswith("start_index of 3000 to get more content.")
    assert "characters 0-3000 of" in text
    # Progress notifications named the call while it waited.
    assert progress and any(call_id in (m or "") for _, _, m in progress)
    call = ToolCall.objects.get(pk=call_id)
    assert call.state == CallState.SUCCEEDED and call.decided_by == users["approver"]
    assert call.arguments == {"url": url, "mode": "main"}
    assert EgressEvent.objects.filter(call_id=call_id, decision="fetched").count() == 1
    # The second part came from the stored result: no new call, no new download.
    assert second.is_error is False, second.content[0].text
    assert "characters 3000-" in second.content[0].text
    assert second.structured_content["call_id"] == call_id
    assert ToolCall.objects.filter(tool="fetch_external_url").count() == 1
    assert len([r for r in web.requests if r.path.startswith("/page")]) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_url_returns_the_guards_reason(transport, connect, users, token_for, web):
    secret = token_for(users["editor"])

    async def scenario() -> Any:
        async with connect(transport, secret) as session:
            return await session.call_tool(
                "fetch", {"url": "http://intranet.lab.example/"}
            ), await session.call_tool("fetch_external_url", {"url": "http://127.0.0.1/"})

    by_name, by_literal = anyio.run(scenario)

    assert by_name.is_error is True
    assert by_name.structured_content["reason"] == "address_class:private"
    assert "rule: address_class:private" in by_name.content[0].text
    assert by_literal.is_error is True
    assert by_literal.structured_content["error"] == "egress_denied"
    assert by_literal.structured_content["reason"].startswith("address_class:")
    # Refused at request time (the pre-flight), recorded, never sent to an approver.
    refused = ToolCall.objects.filter(tool="fetch_external_url").order_by("created")
    assert [c.state for c in refused] == ["failed", "failed"]
    assert all(not c.requires_approval for c in refused)
    assert EgressEvent.objects.filter(decision="denied", detail="pre-flight").count() == 2
    assert web.requests == []


# -- tokens -----------------------------------------------------------------------------------


_ACCEPT = {"Accept": "application/json, text/event-stream"}
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def test_a_revoked_token_is_refused_over_http(connect, http_server, users, token_for, web):
    secret = token_for(users["editor"])
    token = AccessToken.objects.get(user=users["editor"])
    server = http_server()

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with connect("http", secret, server=server) as session:
            seen["before"] = len((await session.list_tools()).tools)
            async with server.http_client(secret) as http:
                opened = await http.post(HTTP_URL, json=_INITIALIZE, headers=_ACCEPT)
                seen["opened"] = opened.status_code
                session_headers = {**_ACCEPT, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
                await _in_thread(call_command, "webfetch", "token", "revoke", str(token.pk))
                # The session it opened is refused at its next request ...
                again = await http.post(HTTP_URL, json=_LIST, headers=session_headers)
                seen["again"] = (again.status_code, again.headers.get("www-authenticate", ""))
                # ... and so is a new one.
                fresh = await http.post(HTTP_URL, json=_INITIALIZE, headers=_ACCEPT)
                seen["fresh"] = fresh.status_code
            with pytest.raises(MCPError):
                await session.list_tools()
        async with server.http_client(None) as http:
            seen["anonymous"] = (await http.post(HTTP_URL, json=_LIST, headers=_ACCEPT)).status_code
        async with server.http_client("wfpat_" + "x" * 43) as http:
            seen["guessed"] = (await http.post(HTTP_URL, json=_LIST, headers=_ACCEPT)).status_code
        return seen

    seen = anyio.run(scenario)
    assert seen["before"] > 0 and seen["opened"] == 200
    assert seen["again"][0] == 401 and 'error="invalid_token"' in seen["again"][1]
    assert seen["fresh"] == 401
    assert seen["anonymous"] == 401 and seen["guessed"] == 401
    assert ToolCall.objects.count() == 0


def test_a_revoked_token_is_refused_over_stdio(connect, users, token_for, settings, web):
    secret = token_for(users["editor"])
    token = AccessToken.objects.get(user=users["editor"])

    async def scenario() -> MCPError:
        async with connect("stdio", secret) as session:
            await session.list_tools()
            await _in_thread(lambda: AccessToken.objects.get(pk=token.pk).revoke())
            with pytest.raises(MCPError) as refused:
                await session.list_tools()
            return refused.value

    refused = anyio.run(scenario)
    assert refused.code == -32001
    assert "revoked" in refused.message
    # A process started with a revoked token does not serve at all.
    params = stdio_parameters(settings, secret)
    started = subprocess.run(
        [params.command, *params.args],
        env=params.env,
        cwd=params.cwd,
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert started.returncode != 0
    assert b"unknown or revoked" in started.stderr
    assert started.stdout == b""


# -- waiting past the bound -------------------------------------------------------------------


def test_past_the_wait_bound_the_call_is_read_with_webfetch_call_status(
    connect, users, token_for, web
):
    secret = token_for(users["editor"])
    url = web.url("news.lab.example", "/page", scheme="https")

    async def scenario() -> tuple[Any, Any, Any]:
        async with connect("stdio", secret, WEBFETCH_TEST_MCP_WAIT="1") as session:
            waiting = await session.call_tool("fetch_external_url", {"url": url})
            call_id = waiting.structured_content["call_id"]
            still = await session.call_tool("webfetch_call_status", {"call_id": call_id})
            await _in_thread(_approve, users["approver"], call_id)
            done = await session.call_tool("webfetch_call_status", {"call_id": call_id})
            return waiting, still, done

    waiting, still, done = anyio.run(scenario)

    assert waiting.is_error is False
    assert waiting.structured_content["state"] == "awaiting_approval"
    assert waiting.structured_content["waiting"] is True
    call_id = waiting.structured_content["call_id"]
    assert call_id in waiting.content[0].text and "webfetch_call_status" in waiting.content[0].text
    assert still.structured_content["state"] == "awaiting_approval"
    assert done.is_error is False
    assert done.structured_content == {
        "call_id": call_id,
        "state": "succeeded",
        "tool": "fetch_external_url",
    }
    assert BEGIN in done.content[0].text and "Lab page" in done.content[0].text


def test_a_denied_call_is_an_error_result_in_our_words(connect, users, token_for, web):
    secret = token_for(users["editor"])
    url = web.url("news.lab.example", "/page", scheme="https")

    def deny(call_id: str) -> None:
        api = APIClient()
        api.force_login(users["approver"])
        response = api.post(
            f"/api/calls/{call_id}/deny/",
            {"comment": "Not this host, ask the docs."},
            format="json",
        )
        assert response.status_code == 200, response.content

    async def scenario() -> Any:
        box: dict[str, Any] = {}
        async with connect("stdio", secret) as session:

            async def call() -> None:
                box["result"] = await session.call_tool("fetch", {"url": url})

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await _in_thread(deny, await _in_thread(_awaiting_call))
        return box["result"]

    result = anyio.run(scenario)
    assert result.is_error is True
    assert result.structured_content["state"] == "denied"
    # Issue 31: the MCP client reads the approver's comment too, said to be the decision's.
    text = result.content[0].text
    assert text.endswith('The comment given with the decision: "Not this host, ask the docs."')
    assert result.structured_content["decision_comment"] == "Not this host, ask the docs."
    assert web.requests == []


def test_the_http_endpoint_checks_the_host_and_leaves_other_paths_to_django(
    http_server, users, token_for
):
    secret = token_for(users["editor"])
    server = http_server()

    async def scenario() -> tuple[int, int, int]:
        async with server.http_client(secret) as http:
            bad_host = await http.post(
                HTTP_URL, json=_INITIALIZE, headers={**_ACCEPT, "Host": "evil.example"}
            )
            good = await http.post(HTTP_URL, json=_INITIALIZE, headers=_ACCEPT)
            django = await http.get("http://testserver/api/tools/")
        return bad_host.status_code, good.status_code, django.status_code

    bad_host, good, django = anyio.run(scenario)
    assert bad_host == 400  # not in ALLOWED_HOSTS, refused before the token is looked at
    assert good == 200
    # Django's own URLconf answers the rest: the API wants its own authentication.
    assert django == 403
