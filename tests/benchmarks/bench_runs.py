"""Throughput of tool calls: 100 queued fetch_external_url calls through 2 real Celery
workers (Redis broker) vs the same 100 calls run in-process (the embedded default).

Run: ``.venv/bin/python -m tests.benchmarks.bench_runs`` (as root; needs redis-server).
The script re-executes itself inside a fresh network namespace (``unshare -n``): a
public-looking address on that namespace's loopback with a real DNS and HTTP server (in a
separate process, so serving does not compete with the measured side for the GIL), Redis
on a Unix socket, a SQLite database file in WAL mode.  The guard runs unweakened; nothing
leaves the machine.

The calls run without a human approval (the ``web`` group has an allowlist and
``skip_approval_with_allowlist``), so the figure is the run machinery plus the fetch:
request, queue, worker pick-up, guarded fetch, text extraction, result written.
Target: workers >= 0.8 x in-process (both figures in calls/s).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.benchmarks._netns import in_namespace, setup_network, start_dns

ADDRESS = "11.0.0.10"
DNS_ADDRESS = "11.0.0.53"
NAME = "bench.example"
CALLS = 100
ROUNDS = 3  # the median of 3 batches on each side
WORKERS = 2
ROOT = Path(__file__).resolve().parents[2]

PAGE = (
    b"<!DOCTYPE html><html><head><title>bench</title></head><body><main>"
    + b"".join(
        b"<h2>Section %d</h2><p>lorem ipsum dolor sit amet, consectetur adipiscing "
        b"elit, sed do eiusmod tempor incididunt ut labore.</p>\n" % i
        for i in range(300)
    )
    + b"</main></body></html>"
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(PAGE)


def _serve() -> None:
    """The DNS and HTTP servers (a process of its own)."""
    start_dns(NAME, ADDRESS, listen=DNS_ADDRESS)
    server = ThreadingHTTPServer((ADDRESS, 80), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    signal.sigwait({signal.SIGTERM, signal.SIGINT})


def _wait(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


def _start_redis(directory: str) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    path = os.path.join(directory, "redis.sock")
    process = subprocess.Popen(
        [
            binary,
            "--port",
            "0",
            "--unixsocket",
            path,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            directory,
            "--logfile",
            os.path.join(directory, "redis.log"),
        ]
    )
    _wait(lambda: os.path.exists(path), 10, "redis")
    return process, path


def _start_worker(directory: str, name: str) -> subprocess.Popen[bytes]:
    ready = os.path.join(directory, f"{name}.ready")
    env = dict(os.environ, WEBFETCH_TEST_READY_FILE=ready)
    log = open(os.path.join(directory, f"{name}.log"), "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.celery_app",
            "worker",
            "--pool",
            "solo",
            "-Q",
            os.environ["WEBFETCH_TEST_QUEUE"],
            "-n",
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    _wait(lambda: os.path.exists(ready) or process.poll() is not None, 60, f"worker {name}")
    if process.poll() is not None:
        raise SystemExit(f"worker {name} exited; see {directory}/{name}.log")
    return process


def _run_batch(user, count: int) -> float:  # type: ignore[no-untyped-def]
    """Request ``count`` calls; seconds until every one of them finished."""
    from django_webfetch import runs
    from django_webfetch.models import ToolCall

    url = f"http://{NAME}/page"
    start = time.perf_counter()
    ids = [
        runs.request_call("fetch_external_url", {"url": f"{url}?n={i}"}, user=user).pk
        for i in range(count)
    ]
    pending = set(ids)
    deadline = time.monotonic() + 300
    while pending:
        if time.monotonic() > deadline:
            stuck = set(ToolCall.objects.filter(pk__in=pending).values_list("state", "reason"))
            raise SystemExit(f"{len(pending)} calls did not finish: {stuck}")
        done = set(
            ToolCall.objects.filter(pk__in=pending, state__in=runs.FINISHED_STATES).values_list(
                "pk", flat=True
            )
        )
        pending -= done
        if pending:
            time.sleep(0.05)  # a light poll: the measuring process shares the CPUs
    elapsed = time.perf_counter() - start
    states = set(ToolCall.objects.filter(pk__in=ids).values_list("state", "reason"))
    if states != {("succeeded", "")}:
        raise SystemExit(f"not every call succeeded: {states}")
    return elapsed


def main() -> None:
    if not in_namespace("tests.benchmarks.bench_runs", cwd=str(ROOT)):
        return
    setup_network((ADDRESS, DNS_ADDRESS))
    directory = tempfile.mkdtemp(prefix="webfetch-bench-runs-")
    server = subprocess.Popen(
        [sys.executable, "-c", "from tests.benchmarks.bench_runs import _serve; _serve()"], cwd=ROOT
    )
    redis, socket_path = _start_redis(directory)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        os.environ.update(
            DJANGO_SETTINGS_MODULE="tests.runs.worker_settings",
            WEBFETCH_TEST_DB=os.path.join(directory, "db.sqlite3"),
            WEBFETCH_TEST_BROKER_URL=f"redis+socket://{socket_path}",
            WEBFETCH_TEST_QUEUE=f"bench-{uuid.uuid4().hex[:8]}",
            WEBFETCH_TEST_NAMESERVERS=f'["{DNS_ADDRESS}"]',
        )
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
            os.environ.pop(name, None)
            os.environ.pop(name.lower(), None)
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from django.db import connection
        from django.test.utils import override_settings

        import tests.celery_app  # noqa: F401 - the Celery app the calls are queued with
        from django_webfetch.models import HostListEntry, ToolGroup

        call_command("migrate", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
        ToolGroup.objects.filter(slug="web").update(enabled=True, skip_approval_with_allowlist=True)
        HostListEntry.objects.create(
            group=ToolGroup.objects.get(slug="web"), list="allow", value=NAME
        )
        user = get_user_model().objects.create_user("bench", password="x")
        _wait(
            lambda: subprocess.run(["ip", "-o", "addr"], capture_output=True).returncode == 0,
            5,
            "network",
        )
        time.sleep(0.3)  # the server process binds its sockets

        with override_settings(WEBFETCH_ASYNC_RUNS=False):
            _run_batch(user, 5)  # warm up
            inline = statistics.median(_run_batch(user, CALLS) for _ in range(ROUNDS))

        workers = [_start_worker(directory, f"w{i + 1}") for i in range(WORKERS)]
        _run_batch(user, 2 * WORKERS)  # warm up (first task imports the tools)
        queued = statistics.median(_run_batch(user, CALLS) for _ in range(ROUNDS))

        inline_rate, queued_rate = CALLS / inline, CALLS / queued
        print(f"{'what (median of ' + str(ROUNDS) + ' batches)':<58} {'calls/s':>9}")
        print(f"{f'{CALLS} calls in-process (embedded default)':<58} {inline_rate:>9.1f}")
        print(
            f"{f'{CALLS} queued calls, {WORKERS} workers (Redis, solo pool)':<58} "
            f"{queued_rate:>9.1f}"
        )
        print(
            f"{'ratio workers / in-process (target >= 0.8)':<58} {queued_rate / inline_rate:>9.2f}"
        )
    finally:
        for process in workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(10)
        for process in (redis, server):
            process.terminate()
            process.wait(10)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
