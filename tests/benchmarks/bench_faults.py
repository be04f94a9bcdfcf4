"""Load and faults: the app run as an operator runs it, with faults injected under load.

gunicorn (4 workers) serves the API on PostgreSQL; 2 Celery worker processes on Redis run
``fetch_external_url`` against a lab page of 50 KiB; 20 editors (threads here) post calls
and poll them until they finish.  The calls need no approval (the ``web`` group has an
allowlist and ``skip_approval_with_allowlist``), so every call is: POST, queue, worker,
guarded fetch, text, result, and the editor's polls.

Phases (each ``WEBFETCH_BENCH_PHASE`` seconds of load, default 20, then a drain):

- steady load, with the default pool (prefork, 1 process each) and with the recommended
  I/O pool (``WEBFETCH_NETWORK_QUEUE`` consumed by ``--pool threads --concurrency 8``);
- ``WEBFETCH_BENCH_SLOW`` slow-loris editors (default 2) among ``WEBFETCH_BENCH_EDITORS``
  (default 20), fetching from ``slow.bench.example`` (same server, a page that sends a byte
  a second), both pools: the throughput of the others against steady load.  The calls per
  destination host are limited to ``WEBFETCH_BENCH_MAX_CALLS_PER_HOST`` (default 4; 0: no
  limit), counted in the broker's Redis;
- worker ``kill -9`` (one of the two, restarted 2 s later);
- Redis restarted without persistence (every queued message lost);
- PostgreSQL restarted (``pg_ctl restart -m fast``).

For each: throughput (finished calls/s), latency percentiles (POST to finished, as the
editor sees it), HTTP errors by status and code, calls lost (not finished after the drain)
and run twice (more than one fetch of one call), and recovery times.

Run: ``.venv/bin/python -m tests.benchmarks.bench_faults`` as root, with redis-server,
PostgreSQL (initdb, pg_ctl) and the ``bench`` dependency group (gunicorn).  The script
re-executes itself in a fresh network namespace (``unshare -n``): every server listens on
that namespace's loopback or on a Unix socket, and nothing leaves the machine.  Every loop
is bounded in count and time.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.benchmarks._netns import in_namespace, setup_network, start_dns

ADDRESS = "11.0.0.10"
DNS_ADDRESS = "11.0.0.53"
NAME = "bench.example"
API = "http://127.0.0.1:8000/api"
EDITORS = int(os.environ.get("WEBFETCH_BENCH_EDITORS", "20"))
#: Slow-loris editors of the ``loris`` phase; they fetch from ``slow.<NAME>`` (same server).
SLOW_EDITORS = int(os.environ.get("WEBFETCH_BENCH_SLOW", "2"))
SLOW_NAME = f"slow.{NAME}"
PHASE = float(os.environ.get("WEBFETCH_BENCH_PHASE", "20"))
#: Which phases to run: ``steady``, ``loris`` (both on both pools), ``faults``.
PHASES = set(
    os.environ.get("WEBFETCH_BENCH_PHASES", "prefork,threads,steady,loris,faults").split(",")
)
DRAIN = 120.0
POLL = 0.25
#: ``0`` (default): an editor polls every ``POLL`` seconds whatever the call says, the
#: heaviest API load a client makes; ``1``: it polls again after the call's ``retry_after``.
HONOUR_HINT = os.environ.get("WEBFETCH_BENCH_HONOUR_HINT", "0") == "1"
BURST = 150
ROUNDS = int(os.environ.get("WEBFETCH_BENCH_ROUNDS", "3"))
ROOT = Path(__file__).resolve().parents[2]

PAGE = (
    b"<!DOCTYPE html><html><head><title>bench</title></head><body><main>"
    + b"".join(
        b"<h2>Section %d</h2><p>lorem ipsum dolor sit amet, consectetur adipiscing "
        b"elit, sed do eiusmod tempor incididunt ut labore.</p>\n" % i
        for i in range(400)
    )
    + b"</main></body></html>"
)


# -- the lab page server (a process of its own) ------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/slow"):
            # Slow loris: headers, then a byte a second; the fetch budget (20 s) ends it.
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(60):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(1)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(PAGE)


def _serve() -> None:
    start_dns(NAME, ADDRESS, listen=DNS_ADDRESS)
    server = ThreadingHTTPServer((ADDRESS, 80), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    signal.sigwait({signal.SIGTERM, signal.SIGINT})


# -- services -----------------------------------------------------------------------------------


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


class Redis:
    """Redis on the namespace's loopback (TCP, as most installs run it), no persistence."""

    port = 6379

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port)

    def _up(self) -> bool:
        try:
            return bool(self.client().ping())
        except Exception:
            return False

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not installed")
        # No persistence, as many small installs run it: a restart loses every message.
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + ["--appendonly", "no", "--dir", self.directory]
            + ["--logfile", f"{self.directory}/redis.log"]
        )
        _wait(self._up, 10, "redis")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None


class Postgres:
    def __init__(self, directory: str) -> None:
        self.account = pwd.getpwnam("postgres")
        self.directory = directory
        self.data = os.path.join(directory, "pgdata")
        self.sockets = os.path.join(directory, "pgrun")
        self.port = 54339
        os.chown(directory, self.account.pw_uid, self.account.pw_gid)
        os.mkdir(self.sockets)
        os.chown(self.sockets, self.account.pw_uid, self.account.pw_gid)
        self.env = {**os.environ, "LC_ALL": "C", "HOME": directory}
        self._pg("initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def _as_postgres(self) -> None:
        os.setgid(self.account.pw_gid)
        os.setuid(self.account.pw_uid)

    def _pg(self, tool: str, *args: str) -> None:
        binary = shutil.which(tool) or next(Path("/usr/lib/postgresql").glob(f"*/bin/{tool}"))
        subprocess.run(
            [str(binary), *args],
            check=True,
            preexec_fn=self._as_postgres,
            env=self.env,
            capture_output=True,
        )

    def _ctl(self, *args: str) -> None:
        options = (
            f"-c listen_addresses='' -c unix_socket_directories={self.sockets} -p {self.port} "
            "-c max_connections=200"
        )
        self._pg("pg_ctl", "-D", self.data, "-o", options, "-l", f"{self.directory}/pg.log", *args)

    def start(self) -> None:
        self._ctl("-w", "start")

    def restart(self) -> None:
        self._ctl("-m", "fast", "-w", "restart")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._pg("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")


def _spawn(command: list[str], log: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _kill(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


@dataclass
class Pool:
    """How the 2 worker processes run calls."""

    label: str
    args: list[str]
    network_queue: str | None


PREFORK = Pool(
    "prefork, 1 process each (default)", ["--pool", "prefork", "--concurrency", "1"], None
)
THREADS = Pool(
    "threads, 8 each on WEBFETCH_NETWORK_QUEUE",
    ["--pool", "threads", "--concurrency", "8"],
    "webfetch-network",
)


class Stack:
    """gunicorn + 2 workers + beat, on one Redis and one PostgreSQL."""

    def __init__(self, directory: str, redis: Redis, env: dict[str, str]) -> None:
        self.directory = directory
        self.redis = redis
        self.base_env = env
        self.gunicorn: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.beat: subprocess.Popen[bytes] | None = None
        self.pool = PREFORK
        self.restarts = 0
        self._supervising = threading.Event()

    def _supervise(self) -> None:
        """Restart a worker process that exited, 2 s later (systemd's ``Restart=always``,
        ``RestartSec=2``): a killed worker, or one that gave up on a lost broker."""
        exited: dict[int, float] = {}
        while self._supervising.is_set():
            for index, process in enumerate(list(self.workers)):
                if process.poll() is None:
                    continue
                since = exited.setdefault(index, time.monotonic())
                if time.monotonic() - since >= 2 and self._supervising.is_set():
                    self.workers[index] = self.start_worker(index)
                    self.restarts += 1
                    exited.pop(index, None)
            time.sleep(0.2)

    def env(self) -> dict[str, str]:
        env = dict(self.base_env)
        if self.pool.network_queue:
            env["WEBFETCH_TEST_NETWORK_QUEUE"] = self.pool.network_queue
        else:
            env.pop("WEBFETCH_TEST_NETWORK_QUEUE", None)
        return env

    def start_worker(self, index: int) -> subprocess.Popen[bytes]:
        ready = os.path.join(self.directory, f"w{index}.ready")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ready)
        # Both processes also consume the default queue: the sweep's task goes there.
        queues = ",".join(
            q for q in (self.pool.network_queue, self.base_env["WEBFETCH_TEST_QUEUE"]) if q
        )
        process = _spawn(
            [sys.executable, "-m", "celery", "-A", "tests.celery_app", "worker", *self.pool.args]
            + ["-Q", queues, "-n", f"w{index}-{uuid.uuid4().hex[:6]}@%h", "--without-gossip"]
            + ["--without-mingle", "--without-heartbeat", "--loglevel", "WARNING"],
            os.path.join(self.directory, f"w{index}.log"),
            {**self.env(), "WEBFETCH_TEST_READY_FILE": ready},
        )
        _wait(lambda: os.path.exists(ready) or process.poll() is not None, 60, "a worker")
        if process.poll() is not None:
            raise SystemExit(f"worker {index} exited; see {self.directory}/w{index}.log")
        return process

    def start(self, pool: Pool) -> None:
        self.pool = pool
        env = self.env()
        self.gunicorn = _spawn(
            [sys.executable, "-m", "gunicorn", "tests.benchmarks.fault_wsgi:application"]
            + ["-w", "4", "-b", "127.0.0.1:8000", "--log-level", "warning", "--timeout", "60"],
            os.path.join(self.directory, "gunicorn.log"),
            env,
        )
        self.workers = [self.start_worker(i) for i in range(2)]
        self._supervising.set()
        threading.Thread(target=self._supervise, daemon=True).start()
        self.beat = _spawn(
            [sys.executable, "-m", "celery", "-A", "tests.celery_app", "beat"]
            + ["--schedule", os.path.join(self.directory, f"beat-{uuid.uuid4().hex[:6]}")]
            + ["--loglevel", "WARNING"],
            os.path.join(self.directory, "beat.log"),
            {**env, "WEBFETCH_TEST_SWEEP_EVERY": "15"},
        )
        import httpx

        def up() -> bool:
            try:
                return httpx.get(f"{API}/tools/", timeout=2).status_code in (401, 403)
            except httpx.HTTPError:
                return False

        _wait(up, 60, "gunicorn")

    def stop(self) -> None:
        self._supervising.clear()
        time.sleep(0.5)
        for process in [self.gunicorn, self.beat, *self.workers]:
            if process is not None:
                _kill(process)
        self.workers = []


# -- the editors ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    editor: int
    slow: bool
    started: float
    finished: float | None = None
    state: str = ""
    call_id: str = ""
    queued_retry: bool = False
    #: The last ``retry_after`` the API gave for the call.
    hint: float | None = None


@dataclass
class Load:
    tokens: list[str]
    slow_editors: int = 0
    #: Editors ``0..idle_editors-1`` do not run (the others alone, as a baseline).
    idle_editors: int = 0
    #: Editors ``0..pollers-1`` post one call and then only poll it, as a slow editor polls
    #: its slow call: the API load of the slow editors, without a slow destination.
    pollers: int = 0
    outcomes: list[Outcome] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    #: API requests the editors made (POSTs and polls).
    requests: int = 0
    ok_after: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop_at: float = 0.0
    threads: list[threading.Thread] = field(default_factory=list)

    def editor(self, index: int) -> None:
        import httpx

        slow = index < self.slow_editors
        headers = {"Authorization": f"Token {self.tokens[index]}"}
        with httpx.Client(base_url=API, headers=headers, timeout=30) as client:
            if index < self.pollers:
                self._only_poll(client, index)
                return
            sequence = 0
            while time.monotonic() < self.stop_at:
                sequence += 1
                path = "/slow" if slow else "/page"
                host = SLOW_NAME if slow else NAME
                url = f"http://{host}{path}?e={index}&n={sequence}"
                outcome = Outcome(index, slow, time.monotonic())
                call_id = self._post(client, url, outcome)
                if call_id is None:
                    time.sleep(0.5)
                    continue
                self._poll(client, call_id, outcome)

    def _only_poll(self, client: Any, index: int) -> None:
        import httpx

        outcome = Outcome(index, True, time.monotonic())
        call_id = self._post(client, f"http://{NAME}/page?e={index}&poller=1", outcome)
        while call_id is not None and time.monotonic() < self.stop_at:
            time.sleep(POLL)
            with contextlib.suppress(httpx.HTTPError):
                self._count()
                client.get(f"/calls/{call_id}/")
        outcome.finished, outcome.state = time.monotonic(), "succeeded"

    def _count(self) -> None:
        if time.monotonic() <= self.stop_at:  # the phase's window, not the drain
            with self.lock:
                self.requests += 1

    def _record_error(self, response: Any) -> None:
        try:
            code = response.json().get("code", "?")
        except ValueError:
            code = "not-json"
        with self.lock:
            self.errors[f"{response.status_code} {code}"] += 1

    def _post(self, client: Any, url: str, outcome: Outcome) -> str | None:
        import httpx

        body = {"tool": "fetch_external_url", "arguments": {"url": url}}
        self._count()
        try:
            response = client.post("/calls/", json=body)
        except httpx.HTTPError as exc:
            with self.lock:
                self.errors[f"transport {type(exc).__name__}"] += 1
            return None
        if response.status_code not in (201, 202):
            self._record_error(response)
            return None
        data = response.json()
        outcome.call_id = data["id"]
        outcome.hint = data.get("retry_after")
        outcome.queued_retry = data.get("reason") == "queued_retry"
        with self.lock:
            self.outcomes.append(outcome)
            self.ok_after.append(time.monotonic())
        return str(data["id"])

    def _poll(self, client: Any, call_id: str, outcome: Outcome) -> None:
        import httpx

        deadline = max(self.stop_at, time.monotonic()) + DRAIN
        while time.monotonic() < deadline:
            time.sleep(max(POLL, outcome.hint or 0.0) if HONOUR_HINT else POLL)
            self._count()
            try:
                response = client.get(f"/calls/{call_id}/")
            except httpx.HTTPError as exc:
                with self.lock:
                    self.errors[f"transport {type(exc).__name__}"] += 1
                continue
            if response.status_code != 200:
                self._record_error(response)
                continue
            with self.lock:
                self.ok_after.append(time.monotonic())
            data = response.json()
            outcome.hint = data.get("retry_after")
            if data["finished"]:
                outcome.finished = time.monotonic()
                outcome.state = data["state"]
                return

    def run(self, seconds: float) -> float:
        start = time.monotonic()
        self.stop_at = start + seconds
        self.threads = [
            threading.Thread(target=self.editor, args=(i,), daemon=True)
            for i in range(self.idle_editors, EDITORS)
        ]
        for thread in self.threads:
            thread.start()
        return start

    def join(self) -> None:
        deadline = self.stop_at + DRAIN + 30
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


# -- reporting ------------------------------------------------------------------------------------


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


@dataclass
class Result:
    name: str
    throughput: float
    p50: float
    p95: float
    p99: float
    finished: int
    lost: int
    twice: int
    retried: int
    errors: Counter[str]
    queued_retry: int
    notes: list[str] = field(default_factory=list)


def _fetch_counts(call_ids: list[str]) -> tuple[int, int]:
    """Calls fetched more than once (a duplicate run), and calls with attempts > 1."""
    from django.db.models import Count

    from django_webfetch.models import EgressEvent, ToolCall

    twice = (
        EgressEvent.objects.filter(call_id__in=call_ids, hop=0, decision__in=["fetched", "failed"])
        .values("call_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    retried = ToolCall.objects.filter(pk__in=call_ids, attempts__gt=1).count()
    return twice, retried


def _summarise(name: str, load: Load, start: float, seconds: float) -> Result:
    from django.db import close_old_connections

    from django_webfetch.models import ToolCall
    from django_webfetch.models.calls import FINISHED_STATES

    close_old_connections()
    end = start + seconds
    normal = [o for o in load.outcomes if not o.slow]
    done = [o for o in normal if o.finished is not None and o.state == "succeeded"]
    in_window = [o for o in done if o.finished is not None and o.finished <= end]
    latencies = [o.finished - o.started for o in done if o.finished is not None]
    ids = [o.call_id for o in load.outcomes]
    lost = ToolCall.objects.filter(pk__in=ids).exclude(state__in=FINISHED_STATES).count()
    lost += sum(1 for o in load.outcomes if o.finished is None and o.call_id not in ids)
    twice, retried = _fetch_counts(ids)
    return Result(
        name,
        len(in_window) / seconds,
        _percentile(latencies, 50),
        _percentile(latencies, 95),
        _percentile(latencies, 99),
        len(done),
        lost,
        twice,
        retried,
        load.errors,
        sum(1 for o in load.outcomes if o.queued_retry),
        notes=[f"API requests by the editors: {load.requests / seconds:.1f}/s"],
    )


def _median(results: list[Result]) -> Result:
    """The round with the median throughput."""
    ordered = sorted(results, key=lambda r: r.throughput)
    return ordered[(len(ordered) - 1) // 2]


def _print(results: list[Result]) -> None:
    print(
        f"CONN_MAX_AGE={os.environ.get('WEBFETCH_BENCH_CONN_MAX_AGE', '60')}, {EDITORS} editors, "
        f"{PHASE:.0f} s a phase"
    )
    print(
        f"{'phase':<44} {'calls/s':>7} {'p50 s':>6} {'p95 s':>6} {'p99 s':>6} "
        f"{'done':>5} {'lost':>4} {'twice':>5} {'retry':>5}"
    )
    for r in results:
        print(
            f"{r.name:<44} {r.throughput:>7.2f} {r.p50:>6.2f} {r.p95:>6.2f} {r.p99:>6.2f} "
            f"{r.finished:>5} {r.lost:>4} {r.twice:>5} {r.retried:>5}"
        )
        if r.errors:
            print(f"    HTTP errors: {dict(r.errors)}")
        if r.queued_retry:
            print(f"    POSTs answered queued_retry: {r.queued_retry}")
        for note in r.notes:
            print(f"    {note}")
    sys.stdout.flush()


# -- phases ----------------------------------------------------------------------------------------


def _phase(
    name: str,
    tokens: list[str],
    *,
    slow: int = 0,
    idle: int = 0,
    pollers: int = 0,
    fault: Any = None,
) -> Result:
    load = Load(tokens, slow_editors=slow, idle_editors=idle, pollers=pollers)
    start = load.run(PHASE)
    notes: list[str] = []
    if fault is not None:
        time.sleep(min(5.0, PHASE / 4))
        notes = fault(load) or []
    time.sleep(max(0.0, load.stop_at - time.monotonic()))
    load.join()
    result = _summarise(name, load, start, PHASE)
    result.notes += notes
    return result


def _open_calls() -> set[str]:
    from django.db import close_old_connections

    from django_webfetch.models import CallState, ToolCall

    close_old_connections()
    return {
        str(pk)
        for pk in ToolCall.objects.filter(
            state__in=[CallState.APPROVED, CallState.RUNNING]
        ).values_list("pk", flat=True)
    }


def _time_to_finish(calls: set[str], since: float, limit: float = DRAIN) -> float | None:
    from django.db import close_old_connections

    from django_webfetch.models import ToolCall
    from django_webfetch.models.calls import FINISHED_STATES

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        close_old_connections()
        try:
            open_ = ToolCall.objects.filter(pk__in=calls).exclude(state__in=FINISHED_STATES)
            if not open_.exists():
                return time.monotonic() - since
        except Exception:  # the database may be restarting
            pass
        time.sleep(0.25)
    return None


def _finished(calls: set[str]) -> set[str]:
    from django.db import close_old_connections

    from django_webfetch.models import ToolCall
    from django_webfetch.models.calls import FINISHED_STATES

    close_old_connections()
    return {
        str(pk)
        for pk in ToolCall.objects.filter(pk__in=calls, state__in=FINISHED_STATES).values_list(
            "pk", flat=True
        )
    }


def _fmt(seconds: float | None) -> str:
    return "never (within the drain)" if seconds is None else f"{seconds:.1f} s"


def main() -> None:
    if not in_namespace("tests.benchmarks.bench_faults", cwd=str(ROOT)):
        return
    setup_network((ADDRESS, DNS_ADDRESS))
    # A SIGTERM ends the run through the ``finally`` below (every service is stopped).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    directory = tempfile.mkdtemp(prefix="webfetch-bench-faults-")
    server = subprocess.Popen(
        [sys.executable, "-c", "from tests.benchmarks.bench_faults import _serve; _serve()"],
        cwd=ROOT,
    )
    redis = Redis(directory)
    postgres = Postgres(directory)
    stack: Stack | None = None
    try:
        redis.start()
        postgres.start()
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
            os.environ.pop(name, None)
            os.environ.pop(name.lower(), None)
        _create_database(postgres)
        env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="tests.benchmarks.fault_settings",
            WEBFETCH_TEST_DB_ENGINE="postgresql",
            WEBFETCH_TEST_DB="webfetch",
            WEBFETCH_TEST_DB_HOST=postgres.sockets,
            WEBFETCH_TEST_DB_PORT=str(postgres.port),
            WEBFETCH_TEST_DB_USER="postgres",
            WEBFETCH_TEST_BROKER_URL=redis.url,
            WEBFETCH_TEST_QUEUE="webfetch-default",
            WEBFETCH_TEST_NAMESERVERS=json.dumps([DNS_ADDRESS]),
            PYTHONWARNINGS="ignore",
        )
        os.environ.update(env)
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command
        from rest_framework.authtoken.models import Token

        from django_webfetch.models import HostListEntry, ToolGroup

        call_command("migrate", verbosity=0)
        ToolGroup.objects.filter(slug="web").update(enabled=True, skip_approval_with_allowlist=True)
        for value in (NAME, SLOW_NAME):
            HostListEntry.objects.create(
                group=ToolGroup.objects.get(slug="web"), list="allow", value=value
            )
        users = get_user_model()
        tokens = [
            Token.objects.create(user=users.objects.create_user(f"editor{i}")).key
            for i in range(EDITORS)
        ]
        time.sleep(0.3)

        results: list[Result] = []
        stack = Stack(directory, redis, env)
        pools = [p for p in (PREFORK, THREADS) if p is THREADS or "prefork" in PHASES]
        for pool in pools:
            stack.start(pool)
            _phase("warm-up", tokens)
            # Steady and slow-loris phases alternate, ROUNDS pairs: the machine is shared,
            # so each figure is the median of its rounds.
            rounds_ = []
            pollings: list[Result] = []
            others = EDITORS - SLOW_EDITORS
            for _ in range(ROUNDS if "loris" in PHASES else 1):
                steady = _phase(f"steady, {pool.label}", tokens)
                alone = loris = None
                if "loris" in PHASES:
                    # The others alone: what they do without the slow editors (the
                    # editors are a closed loop, so fewer editors are fewer calls).
                    alone = _phase(
                        f"the {others} others alone, {pool.label}", tokens, idle=SLOW_EDITORS
                    )
                    loris = _phase(
                        f"{SLOW_EDITORS} slow-loris editors, {pool.label}",
                        tokens,
                        slow=SLOW_EDITORS,
                    )
                    if not HONOUR_HINT:
                        # Editors polling every POLL whatever the hint: their API load alone.
                        pollings.append(
                            _phase(
                                f"the {others} others + {SLOW_EDITORS} pollers, {pool.label}",
                                tokens,
                                pollers=SLOW_EDITORS,
                            )
                        )
                rounds_.append((steady, alone, loris))
            steady = _median([r[0] for r in rounds_])
            results.append(steady)
            if "loris" in PHASES:
                alone = _median([r[1] for r in rounds_ if r[1] is not None])
                loris = _median([r[2] for r in rounds_ if r[2] is not None])

                def cost(base: Result, with_slow: Result) -> float:
                    return 1 - with_slow.throughput / base.throughput if base.throughput else 1.0

                polling = _median(pollings) if pollings else None
                share = steady.throughput * others / EDITORS
                share_cost = 1 - loris.throughput / share if share else 1.0
                per_round = ", ".join(
                    f"{cost(a, b):.0%}" for _s, a, b in rounds_ if a is not None and b is not None
                )
                loris.notes.append(
                    f"throughput of the {others} others with {SLOW_EDITORS} slow-loris editors "
                    f"/ the {others} alone (medians of {len(rounds_)} rounds): cost "
                    f"{cost(alone, loris):.0%} (target: <= 20%); per round: {per_round}; "
                    f"/ steady with all {EDITORS}: cost {cost(steady, loris):.0%}; "
                    f"/ the others' share of steady ({others}/{EDITORS}, the same API load "
                    f"without slow pages): cost {share_cost:.0%}; "
                    + (
                        f"/ the {others} with {SLOW_EDITORS} editors polling a finished call "
                        f"(the slow editors' API load, no slow page): cost "
                        f"{cost(polling, loris):.0%}; "
                        if polling is not None
                        else ""
                    )
                    + f"polls follow retry_after: {HONOUR_HINT}; "
                    f"WEBFETCH_MAX_CALLS_PER_HOST="
                    f"{os.environ.get('WEBFETCH_BENCH_MAX_CALLS_PER_HOST', '4')}"
                )
                results.append(alone)
                if polling is not None:
                    results.append(polling)
                results.append(loris)
            _print(results[-4:] if "loris" in PHASES else results[-1:])
            if pool is THREADS:
                break
            stack.stop()

        def kill_worker(load: Load) -> list[str]:
            assert stack is not None
            victim = stack.workers[0]
            open_calls = _open_calls()
            killed = time.monotonic()
            _kill(victim, signal.SIGKILL)  # the supervisor starts it again 2 s later
            recovered = _time_to_finish(open_calls, killed)
            return [
                f"kill -9 with {len(open_calls)} calls open: all of them finished "
                f"{_fmt(recovered)} after the kill (lease + sweep)"
            ]

        def restart_redis(load: Load) -> list[str]:
            # A burst of calls first, so that messages wait in Redis when it restarts.
            from concurrent.futures import ThreadPoolExecutor

            import httpx

            def post(i: int) -> str | None:
                response = httpx.post(
                    f"{API}/calls/",
                    json={
                        "tool": "fetch_external_url",
                        "arguments": {"url": f"http://{NAME}/page?burst={i}"},
                    },
                    headers={"Authorization": f"Token {tokens[i % len(tokens)]}"},
                    timeout=30,
                )
                ok = response.status_code in (201, 202)
                return str(response.json()["id"]) if ok else None

            with ThreadPoolExecutor(16) as executor:
                burst = {i for i in executor.map(post, range(BURST)) if i is not None}
            queue = stack.pool.network_queue or env["WEBFETCH_TEST_QUEUE"]
            waiting = redis.client().llen(queue)
            open_calls = _open_calls() | burst
            restarted = time.monotonic()
            redis.stop()
            redis.start()
            recovered = _time_to_finish(open_calls, restarted)
            lost = len(open_calls) - len(_finished(open_calls))
            return [
                f"Redis restart with {waiting} messages queued and {len(open_calls)} calls "
                f"open: all of them finished {_fmt(recovered)} after the restart "
                f"(WEBFETCH_REQUEUE_AFTER + sweep); not finished: {lost}"
            ]

        def restart_postgres(load: Load) -> list[str]:
            restarted = time.monotonic()
            postgres.restart()
            back = time.monotonic()
            _wait(lambda: any(t > back for t in load.ok_after), 60, "a successful API request")
            first_ok = min(t for t in load.ok_after if t > back)
            return [
                f"PostgreSQL restart took {back - restarted:.1f} s; first successful "
                f"request {first_ok - back:.1f} s after it was back"
            ]

        if "faults" in PHASES:
            for name, fault in (
                ("worker kill -9 (threads pool)", kill_worker),
                ("Redis restart, no persistence", restart_redis),
                ("PostgreSQL restart", restart_postgres),
            ):
                before = stack.restarts
                result = _phase(name, tokens, fault=fault)
                result.notes.append(f"worker processes restarted: {stack.restarts - before}")
                results.append(result)
        print()
        _print(results)
    finally:
        if stack is not None:
            stack.stop()
        redis.stop()
        postgres.stop()
        server.terminate()
        server.wait(10)
        if os.environ.get("WEBFETCH_BENCH_KEEP") == "1":
            print(f"logs kept in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def _create_database(postgres: Postgres) -> None:
    import psycopg

    with psycopg.connect(
        host=postgres.sockets, port=postgres.port, user="postgres", dbname="postgres"
    ) as connection:
        connection.autocommit = True
        connection.execute("CREATE DATABASE webfetch")


if __name__ == "__main__":
    main()
