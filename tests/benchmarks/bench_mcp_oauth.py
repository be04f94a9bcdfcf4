"""Latency of an MCP request made with an OAuth access token vs one made with a personal
access token, against the same server in the same process.

Run: ``.venv/bin/python -m tests.benchmarks.bench_mcp_oauth``.  A real uvicorn server
(``django_webfetch.mcp.asgi``, ``tests.mcp.server_settings``) on a Unix socket, a SQLite
database file in WAL mode; no network at all.  Each side opens a session (``initialize``)
and then sends ``tools/list`` requests, one at a time; the two sides alternate in rounds so
a busy machine slows both alike.  The OAuth side's token is looked up by its checksum, its
expiry, scope and RFC 8707 resource checked, and its grant (an ``AccessToken`` row of kind
``oauth``) resolved on every request; the personal side's token is hashed and looked up.
Target: OAuth / personal <= 1.25 (medians).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
URL = "http://testserver/mcp"
REQUESTS = 100  # per side and round
ROUNDS = 5
ACCEPT = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _setup() -> tuple[str, str]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model, get_application_model

    from django_webfetch.models import AccessToken, TokenKind, ToolGroup

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode=WAL")
    ToolGroup.objects.filter(slug="web").update(enabled=True)
    user = get_user_model().objects.create_user("bench", password="x", is_staff=True)
    _row, personal = AccessToken.objects.issue(user, "bench", by=user)
    application = get_application_model().objects.create(
        name="bench client",
        client_id="bench-client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1:33418/callback",
    )
    AccessToken.objects.issue(
        user, "OAuth: bench", by=user, kind=TokenKind.OAUTH, client_id="bench-client"
    )
    oauth = "bench-oauth-" + os.urandom(16).hex()
    get_access_token_model().objects.create(
        user=user,
        application=application,
        token=oauth,
        expires=timezone.now() + timedelta(hours=1),
        scope="mcp",
        resource=["https://testserver/mcp"],
    )
    connection.close()
    return personal, oauth


def _session(client: Any, secret: str) -> dict[str, str]:
    headers = {**ACCEPT, "Authorization": f"Bearer {secret}"}
    opened = client.post(URL, json=INITIALIZE, headers=headers)
    opened.raise_for_status()
    headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
    headers["Mcp-Protocol-Version"] = "2025-06-18"
    return headers


def _batch(client: Any, headers: dict[str, str], count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.post(URL, json=LIST, headers=headers)
        times.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise RuntimeError(f"tools/list answered {response.status_code}")
    return times


def main() -> None:
    import httpx2

    directory = tempfile.mkdtemp(prefix="webfetch-bench-oauth-")
    os.environ.update(
        DJANGO_SETTINGS_MODULE="tests.mcp.server_settings",
        WEBFETCH_TEST_DB=os.path.join(directory, "db.sqlite3"),
        PYTHONPATH=str(ROOT),
    )
    sys.path.insert(0, str(ROOT))
    personal, oauth = _setup()
    socket_path = os.path.join(directory, "mcp.sock")
    log = open(os.path.join(directory, "uvicorn.log"), "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "django_webfetch.mcp.asgi:application"]
        + ["--uds", socket_path, "--lifespan", "on", "--log-level", "warning"],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(socket_path):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.1)
        transport = httpx2.HTTPTransport(uds=socket_path)
        with httpx2.Client(transport=transport, timeout=60) as client:
            sides = {"personal": _session(client, personal), "oauth": _session(client, oauth)}
            for headers in sides.values():
                _batch(client, headers, 10)  # warm up
            samples: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(ROUNDS):
                for name, headers in sides.items():
                    samples[name].extend(_batch(client, headers, REQUESTS))
        medians = {name: statistics.median(values) * 1000 for name, values in samples.items()}
        print(f"{'tools/list, median of ' + str(ROUNDS * REQUESTS) + ' requests':<50} {'ms':>8}")
        print(f"{'personal access token':<50} {medians['personal']:>8.2f}")
        print(f"{'OAuth access token (RFC 8707-bound, grant row)':<50} {medians['oauth']:>8.2f}")
        ratio = medians["oauth"] / medians["personal"]
        print(f"{'ratio OAuth / personal (target <= 1.25)':<50} {ratio:>8.2f}")
    finally:
        server.terminate()
        server.wait(10)
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
