"""The web processes under load, as an operator reads them: database connections, threads
and memory (RSS) of each of ``WEBFETCH_BENCH_PROCESSES`` (2) uvicorn processes serving the
example project on one PostgreSQL database, with 10 and 100 editors and with 200 watchers
of a run (Server-Sent Events), for each way of holding database connections
(``serving_settings``): ``persistent`` (``CONN_MAX_AGE = 60``, the example before issue
33), ``per-request`` and ``pool`` (the example now).

The editors and watchers are spread over the processes in turn.
An editor asks for its conversations and the tools once a second (``PACE``); a watcher
holds a stream open on a run that waits for approval (pings every 15 s).  Each phase
counts requests, not seconds: it ends when the editors made ``ROUNDS`` requests each (the
watchers: when all are open and ``ROUNDS`` samples were taken).  Sampled every 0.2 s: the
connections of each process (``pg_stat_activity`` by ``application_name``), its threads and
RSS (``/proc``); errors are counted by status and code.

Run: ``.venv/bin/python -m tests.benchmarks.bench_serving`` as root with PostgreSQL
(initdb, pg_ctl) and psycopg[pool].  It re-executes itself in a fresh network namespace
(``unshare -n``): uvicorn listens on that namespace's loopback, PostgreSQL on a Unix
socket, a DNS server on a lab address; nothing leaves the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.benchmarks._netns import in_namespace, setup_network, start_dns
from tests.benchmarks.bench_faults import Postgres

ROOT = Path(__file__).resolve().parents[2]
ADDRESS = "11.0.0.10"
DNS_ADDRESS = "11.0.0.53"
NAME = "bench.example"
PORT = 8000
PROCESSES = int(os.environ.get("WEBFETCH_BENCH_PROCESSES", "2"))
URLS = [f"http://127.0.0.1:{PORT + n}" for n in range(PROCESSES)]
URL = URLS[0]
PACE = 1.0
ROUNDS = int(os.environ.get("WEBFETCH_BENCH_ROUNDS", "10"))
MODES = os.environ.get("WEBFETCH_BENCH_MODES", "persistent,pool").split(",")
WATCHERS = int(os.environ.get("WEBFETCH_BENCH_WATCHERS", "200"))
PHASES = [
    phase
    for phase in [
        ("10 editors", 10, 0),
        ("100 editors", 100, 0),
        (f"{WATCHERS} watchers", 0, WATCHERS),
    ]
    if phase[0].split()[1] in os.environ.get("WEBFETCH_BENCH_PHASES", "editors,watchers")
]
#: uvicorn's ``--timeout-graceful-shutdown``, as ``run.sh`` gives it.
GRACEFUL = os.environ.get("WEBFETCH_BENCH_GRACEFUL", "10")


class Sampler:
    """Samples each process's connections, threads and RSS every 0.2 s."""

    def __init__(self, postgres: Postgres, pids: list[int]) -> None:
        self.postgres, self.pids = postgres, pids
        self.samples: list[list[tuple[int, int, int]]] = [[] for _ in pids]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _proc(pid: int) -> tuple[int, int]:
        status = Path(f"/proc/{pid}/status").read_text()
        threads = int(re.search(r"Threads:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
        return threads, rss

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(
            host=self.postgres.sockets,
            port=self.postgres.port,
            user="postgres",
            dbname="postgres",
            autocommit=True,
        ) as connection:
            while not self.stop.wait(0.2):
                rows = connection.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity"
                    " WHERE datname = 'webfetch' GROUP BY application_name"
                ).fetchall()
                counts = {str(name): int(count) for name, count in rows}
                for n, pid in enumerate(self.pids):
                    with contextlib.suppress(OSError, AttributeError):
                        threads, rss = self._proc(pid)
                        self.samples[n].append((counts.get(f"web{n}", 0), threads, rss))

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def _login() -> tuple[dict[str, str], str]:
    import httpx

    with httpx.Client(base_url=URL, timeout=30) as client:
        page = client.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text[:300]
        answer = client.post(
            "/admin/login/",
            data={
                "csrfmiddlewaretoken": token.group(1),
                "username": "editor",
                "password": "editor",
                "next": "/admin/",
            },
        )
        assert answer.status_code == 302, answer.status_code
        return dict(client.cookies), str(client.cookies["csrftoken"])


def _waiting_run(cookies: dict[str, str], csrf: str) -> str:
    """A run paused for an approval (it stays open: its watchers get pings)."""
    import httpx

    headers = {"X-CSRFToken": csrf}
    with httpx.Client(base_url=URL, cookies=cookies, timeout=30) as client:
        conversation = client.post("/api/conversations/", json={}, headers=headers).json()["id"]
        run = client.post(
            f"/api/conversations/{conversation}/messages/",
            json={"content": f"Summarise http://{NAME}/page"},
            headers=headers,
        ).json()["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = client.get(f"/api/runs/{run}/").json()["state"]
            if state == "waiting_for_approval":
                return str(run)
            time.sleep(0.2)
    raise SystemExit(f"the run did not wait for approval ({state})")


def _phase(editors: int, watchers: int, cookies: Any, run: str, answers: Counter[str]) -> None:
    import httpx

    done = threading.Event()
    counts = [0] * editors
    opened = threading.Semaphore(0)

    def editor(n: int) -> None:
        url = URLS[n % PROCESSES]
        with httpx.Client(base_url=url, cookies=cookies, timeout=60) as client:
            while counts[n] < ROUNDS:
                started = time.monotonic()
                for path in ("/api/conversations/", "/api/tools/"):
                    try:
                        response = client.get(path)
                        code = ""
                        if response.status_code >= 400:
                            is_json = response.headers.get("content-type", "").startswith(
                                "application/json"
                            )
                            code = response.json().get("code", "") if is_json else "html"
                        answers[f"{response.status_code} {code}".strip()] += 1
                    except httpx.HTTPError as exc:
                        answers[type(exc).__name__] += 1
                counts[n] += 1
                time.sleep(max(PACE - (time.monotonic() - started), 0.0))

    def watcher(n: int) -> None:
        url = URLS[n % PROCESSES]
        try:
            with (
                httpx.Client(base_url=url, cookies=cookies, timeout=60) as client,
                client.stream("GET", f"/api/runs/{run}/stream/") as response,
            ):
                answers[f"stream {response.status_code}"] += 1
                opened.release()
                for _ in response.iter_lines():
                    if done.is_set():
                        return
        except httpx.HTTPError as exc:
            answers[f"stream {type(exc).__name__}"] += 1
            opened.release()

    threads = [threading.Thread(target=editor, args=(n,), daemon=True) for n in range(editors)]
    threads += [threading.Thread(target=watcher, args=(n,), daemon=True) for n in range(watchers)]
    for thread in threads:
        thread.start()
    for _ in range(watchers):
        opened.acquire(timeout=120)
    if watchers:
        time.sleep(ROUNDS * PACE)  # the streams held open, sampled meanwhile
    for thread in threads[:editors]:
        thread.join(600)
    done.set()


def _serve(mode: str, n: int, env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "example_project.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(PORT + n),
        "--lifespan",
        "off",
        "--timeout-graceful-shutdown",
        GRACEFUL,
        "--log-level",
        os.environ.get("WEBFETCH_BENCH_LOG_LEVEL", "warning"),
    ]
    with open(log, "ab") as out:
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env={**env, "WEBFETCH_BENCH_DB_MODE": mode, "WEBFETCH_BENCH_PROCESS": f"web{n}"},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _up(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/api/", timeout=2).status_code in (200, 401, 403)
    except httpx.HTTPError:
        return False


def main() -> None:
    if not in_namespace("tests.benchmarks.bench_serving", cwd=str(ROOT)):
        return
    setup_network((ADDRESS, DNS_ADDRESS))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    start_dns(NAME, ADDRESS, listen=DNS_ADDRESS)
    directory = tempfile.mkdtemp(prefix="webfetch-bench-serving-")
    postgres = Postgres(directory)
    results: list[tuple[str, str, str, dict[str, Any]]] = []
    try:
        postgres.start()
        import psycopg

        with psycopg.connect(
            host=postgres.sockets,
            port=postgres.port,
            user="postgres",
            dbname="postgres",
            autocommit=True,
        ) as connection:
            connection.execute("CREATE DATABASE webfetch")
        env = {
            k: v
            for k, v in os.environ.items()
            if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
        }
        env.update(
            DJANGO_SETTINGS_MODULE="tests.benchmarks.serving_settings",
            PYTHONPATH=str(ROOT),
            PYTHONWARNINGS="ignore",
            DJANGO_DEBUG="0",
            DATABASE_URL=f"postgres://postgres@:{postgres.port}/webfetch?host={postgres.sockets}",
            WEBFETCH_DNS_NAMESERVERS=DNS_ADDRESS,
        )
        manage = [sys.executable, "example_project/manage.py"]
        for args in (
            ["migrate", "--noinput", "-v", "0"],
            ["demo_setup"],
            [
                "shell",
                "-c",
                (
                    "from django_webfetch.models import ToolGroup; "
                    "ToolGroup.objects.filter(slug__in=['content', 'web']).update(enabled=True)"
                ),
            ],
        ):
            subprocess.run(manage + args, cwd=ROOT, env=env, check=True, capture_output=True)
        for mode in MODES:
            log = f"{directory}/uvicorn-{mode}.log"
            servers = [_serve(mode, n, env, log) for n in range(PROCESSES)]
            try:
                deadline = time.monotonic() + 90
                for url in URLS:
                    while not _up(url):
                        if time.monotonic() > deadline or any(
                            server.poll() is not None for server in servers
                        ):
                            raise SystemExit(Path(log).read_text()[-3000:])
                        time.sleep(0.2)
                cookies, csrf = _login()
                run = _waiting_run(cookies, csrf)
                for name, editors, watchers in PHASES:
                    answers: Counter[str] = Counter()
                    with Sampler(postgres, [server.pid for server in servers]) as sampler:
                        _phase(editors, watchers, cookies, run, answers)
                    for n, samples in enumerate(sampler.samples):
                        samples = samples or [(0, 0, 0)]
                        result = {
                            "connections max": max(s[0] for s in samples),
                            "threads max": max(s[1] for s in samples),
                            "RSS max MiB": round(max(s[2] for s in samples) / 1024, 1),
                            "answers": dict(answers) if n == 0 else {},
                        }
                        results.append((mode, name, f"web{n}", result))
                        print(f"{mode:12} {name:13} web{n} {json.dumps(result)}", flush=True)
                stopped = time.monotonic()
                for server in servers:
                    server.send_signal(signal.SIGTERM)
                for server in servers:
                    server.wait(30)
                print(f"{mode:12} SIGTERM to exit: {time.monotonic() - stopped:.1f} s", flush=True)
            finally:
                for server in servers:
                    if server.poll() is None:
                        os.killpg(server.pid, signal.SIGKILL)
                        server.wait(10)
            # The next configuration starts with no connection of this one left.
            time.sleep(2)
    finally:
        postgres.stop()
    print("\n| mode | phase | process | connections | threads | RSS MiB | errors (all) |")
    print("|---|---|---|---|---|---|---|")
    for mode, name, process, result in results:
        errors = {
            k: v for k, v in result["answers"].items() if not k.startswith(("200", "stream 200"))
        }
        print(
            f"| {mode} | {name} | {process} | {result['connections max']} | "
            f"{result['threads max']} | {result['RSS max MiB']} | {errors or '-'} |"
        )


if __name__ == "__main__":
    main()
