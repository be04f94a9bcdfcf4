"""The outside MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``, installed by
``tests/run.sh`` with Debian's Node) against the stdio server ``manage.py webfetch mcp``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest

from django_webfetch.tools import tools_for_user

from .conftest import stdio_parameters

INSPECTOR = os.environ.get("WEBFETCH_INSPECTOR") or shutil.which("mcp-inspector")

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.skipif(
        not INSPECTOR,
        reason="the MCP Inspector CLI is not installed: tests/run.sh installs it with npm "
        "(WEBFETCH_INSPECTOR names it), and npm is unavailable or the install failed",
    ),
]


def _inspector(settings: Any, secret: str, tmp_path: Any, *method: str, status: int = 0) -> Any:
    params = stdio_parameters(settings, secret)
    assert params.env is not None
    passed = ("DJANGO_SETTINGS_MODULE", "PYTHONPATH", "WEBFETCH_MCP_TOKEN", "PYTHONWARNINGS")
    server_env = [
        f"{k}={v}" for k, v in params.env.items() if k in passed or k.startswith("WEBFETCH_TEST_")
    ]
    # As docs/mcp.rst says: the token in a config file of the user's own (mode 600, the
    # Claude Desktop shape), never on the command line (``-e`` would show it to ``ps``).
    config = tmp_path / "mcp.json"
    config.touch(mode=0o600)
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "mysite": {
                        "command": params.command,
                        "args": list(params.args),
                        "env": dict(pair.split("=", 1) for pair in server_env),
                    }
                }
            }
        )
    )
    # The server is a Django process started cold: on a busy machine it can take longer
    # than the Inspector's 15 s default to answer `initialize`.  The wait is a safety net,
    # the same as the run's own timeout below.
    command = [str(INSPECTOR), "--cli", "--connect-timeout", "110000"]
    command += ["--config", str(config), "--server", "mysite", *method]
    assert not any(secret in part for part in command)
    done = subprocess.run(
        command,
        cwd=params.cwd,
        # Its catalog file lives under HOME: a throwaway one.
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == status, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_the_inspector_lists_the_users_tools_over_stdio(
    settings, users, token_for, group_factory, web, tmp_path
):
    group_factory("code", enabled=True)
    secret = token_for(users["editor"])

    listed = _inspector(settings, secret, tmp_path, "--method", "tools/list")

    names = {tool["name"] for tool in listed["tools"]}
    assert names == {t.name for t in tools_for_user(users["editor"])} | {
        "fetch",
        "webfetch_call_status",
    }
    assert "read_source" not in names  # admin-only
    fetch = next(t for t in listed["tools"] if t["name"] == "fetch")
    assert fetch["inputSchema"]["required"] == ["url"]

    refused = _inspector(
        settings,
        secret,
        tmp_path,
        "--method",
        "tools/call",
        "--tool-name",
        "fetch",
        "--tool-arg",
        "url=http://intranet.lab.example/",
        status=5,  # the Inspector's exit status for a tool result with isError
    )
    assert refused["isError"] is True
    assert refused["structuredContent"]["reason"] == "address_class:private"
