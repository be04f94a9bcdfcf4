"""Issue 31 item 4: the example site serves MCP at ``/mcp`` as the README says, and
``example_project/run.sh manage ...`` passes any ``manage.py`` command through.

Everything goes through ``sh example_project/run.sh`` as a user types it: ``manage`` issues
the token, ``serve`` starts uvicorn (its extra arguments go to uvicorn: ``--uds``, since this
test process may not connect to loopback over TCP, see tests/mcp/conftest.py).  The official
MCP SDK client talks Streamable HTTP to ``/mcp`` of that server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.exampledb import start_migrated
from tests.runs.infra import ROOT, start_logged, stop_process, wait_for

pytestmark = [pytest.mark.lab]

BEGIN = "<<<BEGIN"


def _env(lab_session: Any, directory: Path) -> dict[str, str]:
    from tests.lab import netns

    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
        and not k.startswith(("DJANGO_", "CELERY_", "DATABASE_URL", "WEBFETCH_"))
    }
    env.update(
        WEBFETCH_EXAMPLE_DB=str(directory / "db.sqlite3"),
        WEBFETCH_DNS_NAMESERVERS=netns.DNS_V4,
        WEBFETCH_CA_FILE=lab_session.tls.ca_file,
        PYTHONWARNINGS="ignore",
    )
    return env


def _run_sh(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["sh", "example_project/run.sh", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.long
def test_the_example_serves_mcp_at_slash_mcp_and_run_sh_passes_manage_through(
    lab_session, tmp_path
):
    env = _env(lab_session, tmp_path)
    # The database starts migrated (a copy of the run's, tests/exampledb.py;
    # tests/cms/test_run_sh.py has run.sh migrate one from nothing).
    start_migrated(env, tmp_path / "db.sqlite3")
    # Any manage.py command goes through (``shell`` here, ``webfetch token`` below).  The
    # demo is set up (``demo_setup``), the group is enabled, and the demo's editor issues
    # their own tokens in the admin, as the README says (one ``shell`` call: one start of
    # the example instead of three, issue 28).
    rights = _run_sh(
        env,
        "manage",
        "shell",
        "-c",
        "from django.core.management import call_command; "
        "call_command('demo_setup', '--domain', '127.0.0.1:8000'); "
        "from django_webfetch.models import ToolGroup; "
        "ToolGroup.objects.filter(slug='content').update(enabled=True); "
        "from django.contrib.auth import get_user_model; "
        "e = get_user_model().objects.get(username='editor'); "
        "print([e.has_perm('django_webfetch.' + p) for p in "
        "('add_accesstoken', 'view_accesstoken', 'change_accesstoken')])",
    )
    assert "[True, True, True]" in rights
    out = _run_sh(env, "manage", "webfetch", "token", "create", "--user", "editor", "--name", "t")
    [secret] = re.findall(r"wfpat_[A-Za-z0-9_-]+", out)
    listed = _run_sh(env, "manage", "webfetch", "token", "list", "--user", "editor")
    assert "editor" in listed and secret not in listed

    socket_path = tmp_path / "example.sock"
    log = tmp_path / "serve.log"
    server = start_logged(
        ["sh", "example_project/run.sh", "serve", "--uds", str(socket_path)], log, env
    )
    try:
        wait_for(
            lambda: socket_path.exists() or server.poll() is not None, 120, what="run.sh serve"
        )
        assert server.poll() is None, log.read_text(errors="replace")[-4000:]

        async def scenario() -> tuple[Any, Any, Any, int]:
            headers = {"Authorization": f"Bearer {secret}"}
            transport = httpx2.AsyncHTTPTransport(uds=str(socket_path))
            async with httpx2.AsyncClient(
                transport=transport, headers=headers, timeout=httpx2.Timeout(30, read=120)
            ) as http:
                async with (
                    streamable_http_client("http://127.0.0.1/mcp", http_client=http) as (r, w),
                    ClientSession(r, w) as session,
                ):
                    info = await session.initialize()
                    tools = await session.list_tools()
                    resources = await session.list_resources()
                    about = next(x for x in resources.resources if x.title == "About us")
                    page = await session.read_resource(about.uri)
                # Without a token: refused, and the Django site beside it still answers.
                async with httpx2.AsyncClient(transport=transport) as anonymous:
                    refused = await anonymous.post("http://127.0.0.1/mcp", json={})
                    assert (await anonymous.get("http://127.0.0.1/")).status_code == 200
            return info, tools, page, refused.status_code

        info, tools, page, refused = anyio.run(scenario)
        # The ready-to-run client (example_project/mcp_call.py), as the README runs it: the
        # token from the environment, a tool by name with JSON arguments, its result printed.
        called = subprocess.run(
            ["sh", "example_project/run.sh", "mcp-call", "read_page", '{"path": "/about/"}']
            + ["--uds", str(socket_path)],
            cwd=ROOT,
            env={**env, "WEBFETCH_MCP_TOKEN": secret},
            capture_output=True,
            text=True,
            timeout=300,
        )
        unknown = subprocess.run(
            ["sh", "example_project/run.sh", "mcp-call", "no_such_tool", "--uds", str(socket_path)],
            cwd=ROOT,
            env={**env, "WEBFETCH_MCP_TOKEN": secret},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        stop_process(server)

    assert info.server_info.name
    assert {"read_page", "list_pages"} <= {tool.name for tool in tools.tools}
    [content] = page.contents
    assert BEGIN in content.text
    assert refused == 401
    assert called.returncode == 0, called.stdout + called.stderr
    text, structured = called.stdout.rstrip("\n").rsplit("\n", 1)
    assert BEGIN in text and "About us" in text
    data = json.loads(structured)
    assert data["tool"] == "read_page" and data["state"] == "succeeded", data
    # What it does while a call may wait for an approval is said on stderr, never stdout.
    assert "calling read_page at " in called.stderr, called.stderr
    assert data["call_id"]
    assert unknown.returncode == 1, unknown.stdout + unknown.stderr
