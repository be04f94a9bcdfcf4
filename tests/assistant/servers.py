"""Server processes of the crash tests: uvicorn serving ``tests.assistant.serve_asgi`` (the
background runner with the server) on the tests' database and lab, started, polled and
stopped (``kill -9`` is the test's own).

``serve(..., own_pid_namespace=True)`` starts the server in a PID namespace of its own
(``unshare --pid --fork``): its leases name a PID namespace no other process shares, so no
sweep can tell from ``/proc`` whether it is alive (``durable.holder_gone``) - it looks like
a process on another machine, judged by its lease alone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from django.db import connections

from tests.asgi import uvicorn_command

__all__ = ["ROOT", "serve", "served", "server_env", "stop"]

ROOT = Path(__file__).resolve().parents[2]


def server_env(lab_settings: Any, **overrides: str) -> dict[str, str]:
    """The environment of a server process: the tests' database, DNS and CA, the shipped
    provider timeout and lease, the sweep every 15 s (as shipped); ``overrides`` on top."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "DATABASE_URL"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="tests.assistant.serve_settings",
        PYTHONPATH=str(ROOT),
        PYTHONWARNINGS="ignore",
        WEBFETCH_TEST_DB=str(connections["default"].settings_dict["NAME"]),
        WEBFETCH_TEST_NAMESERVERS=json.dumps(list(lab_settings.nameservers)),
        WEBFETCH_TEST_CA_FILE=str(lab_settings.ca_file),
        WEBFETCH_TEST_SWEEP_EVERY="15",
        # Longer than the safety net: a run is never queued again by age here.
        WEBFETCH_TEST_REQUEUE_AFTER="600",
    )
    for name in ("WEBFETCH_TEST_ASSISTANT_TIMEOUT", "WEBFETCH_TEST_LEASE_SECONDS"):
        env.pop(name, None)
    env.update(overrides)
    return env


def serve(
    env: dict[str, str], port: int, log: Path, *, own_pid_namespace: bool = False
) -> subprocess.Popen[bytes]:
    """A server on ``127.0.0.1:port`` (its own session: ``os.killpg`` ends it whole)."""
    command = uvicorn_command(sys.executable, "tests.assistant.serve_asgi:application", port)
    if own_pid_namespace:
        unshare = shutil.which("unshare")
        assert unshare is not None, "util-linux's unshare is needed"
        command = [unshare, "--pid", "--fork", "--kill-child", *command]
    with open(log, "ab") as out:
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def served(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/", timeout=2).status_code in (200, 401, 403)
    except httpx.HTTPError:
        return False


def stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
