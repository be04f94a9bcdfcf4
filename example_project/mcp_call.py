"""Call one tool of the example site over MCP and print its result: a ready-to-run client.

    export WEBFETCH_MCP_TOKEN=wfpat_...   # from: run.sh manage webfetch token create ...
    sh example_project/run.sh mcp-call read_page '{"path": "/about/"}'
    sh example_project/run.sh mcp-call demo_page_title '{"url": "http://example.org/"}'

The token comes from the environment (never the command line, where other users' ``ps``
could read it); the server is the example's ``http://127.0.0.1:8000/mcp`` unless ``--url``
(or ``WEBFETCH_MCP_URL``) says otherwise, and ``--uds PATH`` reaches one served on a Unix
socket (``run.sh serve --uds PATH``).  It is the client of docs/mcp.rst, "The official
Python SDK": a call that needs an approval waits on the server (``WEBFETCH_MCP_WAIT``, 60 s);
if the server answers that the call is still waiting, this asks ``webfetch_call_status`` again
until it has finished or ``--wait`` seconds (600) have passed.

Prints the result's text (a tool's result is fenced: JSON text inside the untrusted block),
then its structured part (``call_id``, ``state``, ``tool``; ``error`` and ``reason`` when it
failed) on one line.  Exits 0 for a result, 1 for an error result, 2 for a call still
waiting at the end, 3 for a usage or connection problem.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000/mcp"
STATUS_TOOL = "webfetch_call_status"


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="mcp_call.py", description="Call one tool of a django_webfetch MCP server."
    )
    parser.add_argument("tool", help="the tool's name, e.g. read_page or demo_page_title")
    parser.add_argument("arguments", nargs="?", default="{}", help="its arguments as JSON")
    parser.add_argument(
        "--url",
        default=os.environ.get("WEBFETCH_MCP_URL", DEFAULT_URL),
        help=f"the MCP endpoint (default: WEBFETCH_MCP_URL or {DEFAULT_URL})",
    )
    parser.add_argument("--uds", help="reach the server on this Unix socket")
    parser.add_argument(
        "--wait", type=float, default=600, help="seconds to wait for an approval (600)"
    )
    return parser.parse_args(argv)


async def _call(options: argparse.Namespace, token: str, arguments: dict[str, Any]) -> Any:
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    transport = httpx2.AsyncHTTPTransport(uds=options.uds) if options.uds else None
    timeout = httpx2.Timeout(30, read=120)  # the server holds a call while it awaits approval
    deadline = time.monotonic() + options.wait
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport) as http,
        streamable_http_client(options.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        # On stderr, so that stdout stays the result alone.
        print(
            f"calling {options.tool} at {options.url} (a call that needs an approval waits "
            "here until an approver decides it)",
            file=sys.stderr,
            flush=True,
        )
        result = await session.call_tool(options.tool, arguments)
        while _waiting(result) and time.monotonic() < deadline:
            print(_text(result), file=sys.stderr)
            await anyio.sleep(2)
            call_id = result.structured_content["call_id"]
            result = await session.call_tool(STATUS_TOOL, {"call_id": call_id})
        return result


def _waiting(result: Any) -> bool:
    data = result.structured_content or {}
    return bool(data.get("waiting")) and "call_id" in data


def _text(result: Any) -> str:
    return "\n".join(getattr(part, "text", repr(part)) for part in result.content)


def main(argv: list[str] | None = None) -> int:
    options = _parse(sys.argv[1:] if argv is None else argv)
    token = os.environ.get("WEBFETCH_MCP_TOKEN", "")
    if not token:
        print(
            "WEBFETCH_MCP_TOKEN is not set: issue a token with\n"
            "  sh example_project/run.sh manage webfetch token create --user editor --name cli\n"
            "and export WEBFETCH_MCP_TOKEN=<the secret it prints>",
            file=sys.stderr,
        )
        return 3
    try:
        arguments = json.loads(options.arguments)
    except json.JSONDecodeError as exc:
        print(f"the arguments are not JSON: {exc}", file=sys.stderr)
        return 3
    if not isinstance(arguments, dict):
        print('the arguments are a JSON object, e.g. \'{"path": "/about/"}\'', file=sys.stderr)
        return 3

    import anyio

    try:
        result = anyio.run(_call, options, token, arguments)
    except Exception as exc:  # noqa: BLE001 - a person reads it: say what failed, no trace
        where = f"{options.url} (socket {options.uds})" if options.uds else options.url
        while getattr(exc, "exceptions", None):  # an exception group: its first cause
            exc = exc.exceptions[0]  # type: ignore[attr-defined]
        print(f"could not call {options.tool} at {where}: {exc!r}", file=sys.stderr)
        return 3
    print(_text(result))
    print(json.dumps(result.structured_content or {}, sort_keys=True))
    if result.is_error:
        return 1
    return 2 if _waiting(result) else 0


if __name__ == "__main__":
    sys.exit(main())
