"""The example project as ``run.sh`` serves it (uvicorn, ASGI, the background runner) on
PostgreSQL (``DATABASE_URL``), under sustained load and through a database restart.

- Its connections stay bounded: the example uses psycopg's pool (``OPTIONS["pool"]``,
  ``CONN_MAX_AGE = 0``), so however many requests come (each in a thread of its own under
  ASGI) the process never holds more than ``WEBFETCH_EXAMPLE_DB_POOL`` connections.
- Every answer of the API stays JSON with a stable code while PostgreSQL restarts, also
  when the error is raised before the API's view (django CMS's toolbar middleware reads
  the database first): ``JSONErrorsMiddleware`` runs first.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.asgi import GRACEFUL_SHUTDOWN, free_port, uvicorn_command
from tests.runs.infra import wait_for

from .test_example_scaled import _env, example_database

pytestmark = [pytest.mark.postgres, pytest.mark.lab]

ROOT = Path(__file__).resolve().parents[2]
POOL = 4
CLIENTS = 12
#: Answers per editor in each phase.
ROUNDS = 10


@contextlib.contextmanager
def loopback_only_to(lab: Any, url: str) -> Iterator[None]:
    """The test talks to its own server on loopback, and to nothing else local."""
    lab.expect_private_accepts = True
    yield
    port = int(url.rsplit(":", 1)[1])
    local = [
        c
        for c in lab.connects
        if c.event == "connect" and c.address in ("127.0.0.1", "::1") and c.port != port
    ]
    assert not local, f"the test connected to another local address: {local}"
    assert not lab.private_accepts()


def _ask_as_the_editor(client: httpx.Client, content: str) -> str:
    """Sign in as the demo editor, start a conversation and ask; the run's id."""
    headers = {"X-CSRFToken": _login(client, "editor", "editor")}
    conversation = client.post("/api/conversations/", json={}, headers=headers).json()
    posted = client.post(
        f"/api/conversations/{conversation['id']}/messages/",
        json={"content": content},
        headers=headers,
    )
    assert posted.status_code == 202, posted.text
    return str(posted.json()["id"])


def _login(client: httpx.Client, username: str, password: str) -> str:
    """Sign in through the admin's login form; the CSRF token for the API's POSTs."""
    page = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text[:500]
    answer = client.post(
        "/admin/login/",
        data={
            "csrfmiddlewaretoken": token.group(1),
            "username": username,
            "password": password,
            "next": "/admin/",
        },
    )
    assert answer.status_code == 302, answer.text[:500]
    return str(client.cookies["csrftoken"])


class Connections:
    """Samples the server's connections to the example's database (pg_stat_activity) every
    0.05 s; reconnects through a restart."""

    def __init__(self, cluster: Any, name: str, psycopg: Any) -> None:
        self.cluster, self.name, self.psycopg = cluster, name, psycopg
        self.samples: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                with self.psycopg.connect(
                    host=self.cluster.socket_dir,
                    port=self.cluster.port,
                    user=self.cluster.user,
                    dbname="postgres",
                    autocommit=True,
                ) as connection:
                    while not self.stop.wait(0.05):
                        row = connection.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                            (self.name,),
                        ).fetchone()
                        self.samples.append(int(row[0]))
            except self.psycopg.OperationalError:
                self.stop.wait(0.1)  # the server restarts

    def __enter__(self) -> Connections:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


class Load:
    """``CLIENTS`` editors (threads), each reading and starting conversations as fast as the
    server answers; every answer is kept as ``(status, content type, code)``."""

    def __init__(self, url: str, cookies: Any, csrf: str) -> None:
        self.url, self.cookies, self.csrf = url, cookies, csrf
        self.answers: list[tuple[int, str, str]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(CLIENTS)]

    def _run(self) -> None:
        headers = {"X-CSRFToken": self.csrf}
        with httpx.Client(base_url=self.url, cookies=self.cookies, timeout=60) as client:
            n = 0
            while not self.stop.is_set():
                n += 1
                if n % 3 == 0:
                    response = client.post("/api/conversations/", json={}, headers=headers)
                else:
                    response = client.get("/api/conversations/")
                kind = response.headers.get("content-type", "")
                code = ""
                if kind.startswith("application/json") and response.status_code >= 400:
                    code = str(response.json().get("code", ""))
                self.answers.append((response.status_code, kind, code))

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


@pytest.mark.parametrize("pool", [POOL, 0], ids=["pool", "no-pool"])
def test_connections_stay_bounded_and_errors_stay_json_through_a_restart(
    pool,
    postgres_cluster,
    lab,
    tmp_path,
):
    """With the pool (the example's default when ``psycopg[pool]`` is installed), at most
    ``POOL`` connections; without it (``WEBFETCH_EXAMPLE_DB_POOL=0``), one per request in
    flight, closed after it.  Either way every answer is JSON with a code, and without the
    pool the restart's refused connections (raised in the middleware, before the view)
    are ``503`` ``database_unavailable``."""
    psycopg = pytest.importorskip("psycopg")
    pytest.importorskip("psycopg_pool")
    with _example(postgres_cluster, lab, tmp_path, pool=pool) as (name, url, server, log):
        _exercise(postgres_cluster, name, psycopg, url, server, log, pool)


@contextlib.contextmanager
def _example(
    cluster: Any,
    lab: Any,
    tmp_path: Path,
    *,
    pool: int,
    setup: str = "",
    lifespan: str = "off",
) -> Iterator[tuple[str, str, Any, Path]]:
    """The example on a new database of ``cluster``, served by uvicorn as run.sh serves it;
    ``(database name, base URL, server process, its log)``."""
    # Migrated, with the demo's pages and users (migrate and demo_setup, once per run).
    name = f"example_faults_{os.getpid()}"
    env = _env(example_database(cluster, lab, name), "", lab)
    env.pop("CELERY_BROKER_URL")
    env["WEBFETCH_EXAMPLE_DB_POOL"] = str(pool)
    if setup:
        # The operator's settings, written before the server starts (psql: no start of
        # Django for a few rows, issue 28).
        cluster.psql(setup, database=name)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "uvicorn.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            uvicorn_command(
                sys.executable, "example_project.asgi:application", port, lifespan=lifespan
            ),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        with loopback_only_to(lab, url):
            wait_for(lambda: _up(url) or server.poll() is not None, 90, 0.2, "the example")
            assert server.poll() is None, log.read_text(errors="replace")[-3000:]
            yield name, url, server, log
    finally:
        with contextlib.suppress(ProcessLookupError):  # a test may have stopped it
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/", timeout=2).status_code in (200, 401, 403)
    except httpx.HTTPError:
        return False


#: Without the pool: a connection per request in flight (``CLIENTS``), the background
#: runner's threads (4), its sweeper, and the process's lease heartbeat.
UNPOOLED_BOUND = CLIENTS + 4 + 2


def _exercise(cluster, name, psycopg, url, server, log, pool):
    with httpx.Client(base_url=url, timeout=30) as client:
        csrf = _login(client, "editor", "editor")
        cookies = dict(client.cookies)
    # Counted in requests, not seconds: each phase lasts until the editors got ROUNDS
    # answers each (a busy machine only makes it longer).
    with Connections(cluster, name, psycopg) as connections, Load(url, cookies, csrf) as load:
        wait_for(lambda: len(load.answers) >= ROUNDS * CLIENTS, 300, 0.1, "steady load")
        before_restart = max(connections.samples)
        cluster.restart(down=0.3)
        restarted = len(load.answers)
        wait_for(
            lambda: len(load.answers) >= restarted + ROUNDS * CLIENTS, 300, 0.1, "after the restart"
        )
    answers = load.answers
    statuses = Counter(status for status, _, _ in answers)
    codes = Counter(code for _, _, code in answers if code)
    print(f"answers: {len(answers)} {dict(statuses)} codes {dict(codes)}")
    print(f"connections: max {max(connections.samples)} (before the restart {before_restart})")
    # Sustained load: the process never held more connections than its pool.
    assert max(connections.samples) <= (pool or UNPOOLED_BOUND), connections.samples
    # Every answer is JSON, and every error names its code: the restart's failures are
    # ``database_unavailable`` (503), never Django's HTML page.
    not_json = [a for a in answers if not a[1].startswith("application/json")]
    assert not not_json, (not_json[:5], log.read_text(errors="replace")[-3000:])
    errors = [a for a in answers if a[0] >= 400]
    assert all(code in ("database_unavailable", "throttled") for _, _, code in errors), codes
    assert all(status == 503 for status, _, code in errors if code == "database_unavailable")
    if not pool:
        # Connections refused while the server was down, in the session middleware.
        assert codes["database_unavailable"] > 0, dict(statuses)
    # After the restart the server answers again (the pool replaced its dead connections).
    after = answers[restarted:]
    assert any(status == 200 for status, _, _ in after[-CLIENTS * 2 :]), after[-20:]


# -- a restart while a tool call is in flight (the background runner) -------------------------

#: Groups content and web enabled, web's allowlisted hosts skip approval, and
#: late.lab.example is on web's allowlist (what the admin's forms save).
ENABLE_WEB = """
UPDATE django_webfetch_toolgroup SET enabled = true WHERE slug IN ('content', 'web');
UPDATE django_webfetch_toolgroup SET skip_approval_with_allowlist = true WHERE slug = 'web';
INSERT INTO django_webfetch_hostlistentry (group_id, list, value, note, created)
    SELECT id, 'allow', 'late.lab.example', '', now() FROM django_webfetch_toolgroup
    WHERE slug = 'web';
"""


@pytest.mark.long
def test_a_restart_mid_call_fails_nothing_and_runs_nothing_twice(
    postgres_cluster,
    lab,
    tmp_path,
):
    """PostgreSQL restarts while the background runner's fetch waits for the page: the
    fetch's writes wait for the database, the call succeeds in its first attempt, the page
    is fetched once, and the editor's run completes (no ``internal_error``, no run left
    for the sweep to find after its lease)."""
    psycopg = pytest.importorskip("psycopg")
    pytest.importorskip("psycopg_pool")
    lab.dns.set("late.lab.example", a=[lab.PUBLIC_V4[0]])
    with _example(postgres_cluster, lab, tmp_path, pool=POOL, setup=ENABLE_WEB) as (
        name,
        url,
        server,
        log,
    ):
        with httpx.Client(base_url=url, timeout=30) as client:
            run_id = _ask_as_the_editor(client, "Summarise http://late.lab.example/late?seconds=4")
            # The fetch is in flight: the lab server has the request and waits 4 s.
            wait_for(
                lambda: any(r.path.startswith("/late") for r in lab.requests),
                60,
                0.05,
                "the fetch to start",
            )
            postgres_cluster.restart(down=0.3)

            def finished() -> Any:
                answer = client.get(f"/api/runs/{run_id}/")
                if answer.status_code != 200:
                    return None
                run = answer.json()
                return run if run["state"] in ("completed", "failed", "cancelled") else None

            run = wait_for(finished, 120, 0.5, "the run to finish")
        output = log.read_text(errors="replace")
        assert run["state"] == "completed", (run, output[-4000:])
        with psycopg.connect(
            host=postgres_cluster.socket_dir,
            port=postgres_cluster.port,
            user=postgres_cluster.user,
            dbname=name,
        ) as connection:
            calls = connection.execute(
                "SELECT tool, state, attempts, reason FROM django_webfetch_toolcall"
            ).fetchall()
    assert calls == [("fetch_external_url", "succeeded", 1, "")], (calls, output[-4000:])
    assert len([r for r in lab.requests if r.path.startswith("/late")]) == 1
    assert "database unavailable" in output  # the restart did hit the runner


# -- open streams on a small pool -----------------------------------------------------------

#: Groups content and web enabled.
ENABLE_GROUPS = """
UPDATE django_webfetch_toolgroup SET enabled = true WHERE slug IN ('content', 'web');
"""
#: Streams held open at once: more than the pool has connections, within one editor's bound.
STREAMS = 5
STREAM_POOL = 2


@pytest.mark.long
def test_open_streams_hold_no_connection_and_end_on_sigterm(
    postgres_cluster,
    lab,
    tmp_path,
):
    """The example as ``run.sh`` serves it (uvicorn, ``--lifespan on``), on a pool of
    ``STREAM_POOL`` connections.  An editor watches a run that waits for approval in
    ``STREAMS`` tabs (Server-Sent Events): every stream gets the run's events, and the
    editor's plain requests are answered meanwhile.  Then ``SIGTERM``: every stream is ended
    by the server (a complete answer, the client reconnects elsewhere) and uvicorn exits
    without waiting out its graceful-shutdown timeout.

    Before: each stream kept the connection its request's middleware took (django CMS's
    toolbar reads the database after the view) until the stream ended, so the third stream's
    first read and every later request waited out the pool's timeout and failed (found at
    200 watchers by ``tests/benchmarks/bench_serving.py``); and uvicorn set its signal
    handlers after ``asgi.py`` chained the stop handler at import, so the streams never saw
    the stop and were cut after the timeout."""
    psycopg = pytest.importorskip("psycopg")
    pytest.importorskip("psycopg_pool")
    lab.dns.set("news.lab.example", a=[lab.PUBLIC_V4[0]])
    with _example(
        postgres_cluster,
        lab,
        tmp_path,
        pool=STREAM_POOL,
        setup=ENABLE_GROUPS,
        lifespan="on",
    ) as (name, url, server, log):
        with httpx.Client(base_url=url, timeout=30) as client:
            run_id = _ask_as_the_editor(client, "Summarise http://news.lab.example/page")

            def settled() -> str:
                state = str(client.get(f"/api/runs/{run_id}/").json()["state"])
                return "" if state in ("queued", "running") else state

            state = wait_for(settled, 120, 0.2, "the run to wait for approval")
            assert state == "waiting_for_approval", log.read_text(errors="replace")[-3000:]
            cookies = dict(client.cookies)
        seen: list[list[str]] = [[] for _ in range(STREAMS)]
        ended: list[int] = []
        failures: list[str] = []
        got_events = threading.Semaphore(0)

        def watch(n: int) -> None:
            try:
                with (
                    httpx.Client(base_url=url, cookies=cookies, timeout=120) as watcher,
                    watcher.stream("GET", f"/api/runs/{run_id}/stream/") as response,
                ):
                    if response.status_code != 200:
                        failures.append(f"stream {response.status_code}")
                        got_events.release()
                        return
                    for line in response.iter_lines():
                        if line.startswith("event: "):
                            seen[n].append(line[7:])
                            if len(seen[n]) == 1:
                                got_events.release()
                    ended.append(n)  # the server ended the answer: it is complete
            except httpx.HTTPError as exc:
                failures.append(f"stream {type(exc).__name__}")
                got_events.release()

        threads = [threading.Thread(target=watch, args=(n,), daemon=True) for n in range(STREAMS)]
        with Connections(postgres_cluster, name, psycopg) as connections:
            for thread in threads:
                thread.start()
            for _ in range(STREAMS):
                assert got_events.acquire(timeout=120), (seen, failures)
            # Every stream is open, and the process still answers the editor.
            with httpx.Client(base_url=url, cookies=cookies, timeout=60) as client:
                answers = [client.get("/api/conversations/").status_code for _ in range(10)]
            server.send_signal(signal.SIGTERM)
            server.wait(GRACEFUL_SHUTDOWN + 60)
            for thread in threads:
                thread.join(60)
        output = log.read_text(errors="replace")
        assert not failures, (failures, output[-3000:])
        assert all(seen), seen
        assert answers == [200] * 10, (answers, output[-3000:])
        assert max(connections.samples) <= STREAM_POOL, connections.samples
        # The stop ended every stream: none was cut when the graceful timeout ran out.
        assert sorted(ended) == list(range(STREAMS)), (ended, output[-3000:])
        assert "graceful shutdown exceeded" not in output, output[-3000:]
