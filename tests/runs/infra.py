"""Real infrastructure for the run tests: Redis, Celery workers, a PostgreSQL cluster.

Everything listens on Unix sockets: the test process lives in the lab's network namespace,
whose audit treats any TCP connect to a non-public address (loopback included) as a leak;
AF_UNIX traffic is not network egress and is not audited.  Worker processes are forked from
the test process, so they share its namespace and reach the lab servers exactly as the
test process would, through the same unweakened guard.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.lab.workers import redis_command

__all__ = [
    "CeleryClient",
    "PrivateRedis",
    "Worker",
    "celery_client",
    "celery_eager",
    "private_redis",
    "process_env",
    "redis_socket",
    "start_logged",
    "stop_process",
    "wait_for",
    "worker_factory",
]

ROOT = Path(__file__).resolve().parents[2]


def wait_for(
    predicate: Callable[[], Any], timeout: float, interval: float = 0.05, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def start_logged(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own process group, its output (both streams) in ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def stop_process(process: subprocess.Popen[Any], *, group: bool = True) -> None:
    """Stop a process (its group) started by :func:`start_logged`: TERM, then KILL."""
    _stop(process, group=group)


def _stop(process: subprocess.Popen[Any], *, group: bool = True, sig: int = signal.SIGTERM) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(process.pid, sig)
        else:
            process.send_signal(sig)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
        process.wait(10)


def _missing(what: str) -> None:
    """Skip locally; in CI a missing service is a failure, never a silent skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(what)
    pytest.skip(what)


def _require_celery() -> None:
    """Skip (also in CI) when the ``[celery]`` extra is not installed: the noextras env."""
    pytest.importorskip("celery", reason="needs the [celery] extra")


# -- Redis ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_socket() -> Iterator[str]:
    """The path of a Redis Unix socket: tests/run.sh's server, or one started here."""
    url = os.environ.get("WEBFETCH_TEST_REDIS_URL", "")
    if url.startswith("unix://"):
        yield url[len("unix://") :]
        return
    binary = shutil.which("redis-server")
    if binary is None:
        _missing("redis-server is not installed (tests/run.sh installs it)")
    directory = tempfile.mkdtemp(prefix="webfetch-redis-")
    path = os.path.join(directory, "redis.sock")
    process = subprocess.Popen(
        redis_command(binary, path, directory),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: os.path.exists(path) or process.poll() is not None, 10, what="redis-server"
        )
        if process.poll() is not None:
            pytest.fail("redis-server did not start")
        yield path
    finally:
        _stop(process, group=False)
        shutil.rmtree(directory, ignore_errors=True)


class PrivateRedis:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            _missing("redis-server is not installed (tests/run.sh installs it)")
        self.binary = str(binary)
        self.directory = tempfile.mkdtemp(prefix="webfetch-redis-q-")
        self.path = os.path.join(self.directory, "redis.sock")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                "0",
                "--unixsocket",
                self.path,
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.directory,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: self.length("x") == 0, 10, what="redis-server")

    def stop(self) -> None:
        if self.process is not None:
            _stop(self.process, group=False)
            self.process = None
        if os.path.exists(self.path):
            os.unlink(self.path)

    def restart(self) -> None:
        """What a restart without persistence does: every queued message is gone."""
        self.stop()
        self.start()

    def crash_and_restart(self) -> None:
        """A crash (``kill -9``) and a start: every queued message is gone, and the clients
        see their connections reset rather than closed."""
        if self.process is not None:
            _stop(self.process, group=False, sig=signal.SIGKILL)
            self.process = None
        if os.path.exists(self.path):
            os.unlink(self.path)
        self.start()

    def length(self, queue: str) -> int | None:
        import redis

        try:
            return int(redis.Redis(unix_socket_path=self.path).llen(queue))
        except (redis.ConnectionError, OSError):
            return None


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    """A Redis of the test's own (Unix socket, no persistence) that it may stop, crash
    and restart; a module uses it by overriding ``redis_socket`` with its path."""
    server = PrivateRedis()
    server.start()
    yield server
    server.stop()
    shutil.rmtree(server.directory, ignore_errors=True)


def broker_url(socket_path: str) -> str:
    return f"redis+socket://{socket_path}"


# -- the Celery client in the test process ------------------------------------------------------


@dataclass
class CeleryClient:
    app: Any
    queue: str
    broker_url: str
    transport_options: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def _current_app(app: Any) -> Iterator[Any]:
    from celery import _state

    previous_default = _state.default_app
    previous_current = getattr(_state._tls, "current_app", None)
    app.set_current()
    app.set_default()
    import django_webfetch.tasks  # noqa: F401 - registers the shared tasks

    try:
        yield app
    finally:
        _state.default_app = previous_default
        _state._tls.current_app = previous_current
        app.close()


#: Short redelivery for the tests: Redis hands an unacknowledged message to another worker
#: once it is older than this (production keeps Celery's default of an hour).
TEST_TRANSPORT_OPTIONS = {
    "visibility_timeout": 8,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}


@pytest.fixture
def celery_client(redis_socket: str, settings: Any) -> Iterator[CeleryClient]:
    """A Celery app in the test process that queues onto Redis (a fresh queue per test)."""
    _require_celery()
    from celery import Celery

    queue = f"webfetch-test-{uuid.uuid4().hex[:12]}"
    url = broker_url(redis_socket)
    app = Celery("webfetch-test-client", set_as_current=False)
    app.conf.update(
        broker_url=url,
        broker_connection_retry_on_startup=True,
        broker_transport_options=dict(TEST_TRANSPORT_OPTIONS),
        task_default_queue=queue,
        task_ignore_result=True,
    )
    settings.WEBFETCH_ASYNC_RUNS = True
    with _current_app(app):
        yield CeleryClient(app, queue, url, dict(TEST_TRANSPORT_OPTIONS))


@pytest.fixture
def celery_eager(settings: Any) -> Iterator[Any]:
    """Celery in eager mode (``task_always_eager``): tasks run inline, no broker."""
    _require_celery()
    from celery import Celery

    app = Celery("webfetch-test-eager", set_as_current=False)
    app.conf.update(
        task_always_eager=True,
        task_eager_propagates=True,
        broker_url="memory://",
        task_ignore_result=True,
    )
    settings.WEBFETCH_ASYNC_RUNS = True
    with _current_app(app):
        yield app


# -- workers --------------------------------------------------------------------------------


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[Any]
    log: Path
    ready_file: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill9(self) -> None:
        """SIGKILL the whole worker (main process and pool children)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


def _database_env() -> dict[str, str]:
    from django.db import connections

    settings_dict = connections["default"].settings_dict
    if settings_dict["ENGINE"].endswith("sqlite3"):
        name = str(settings_dict["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            pytest.skip("workers need a database file (see tests/runs/conftest.py)")
        return {"WEBFETCH_TEST_DB_ENGINE": "sqlite", "WEBFETCH_TEST_DB": name}
    return {
        "WEBFETCH_TEST_DB_ENGINE": "postgresql",
        "WEBFETCH_TEST_DB": str(settings_dict["NAME"]),
        "WEBFETCH_TEST_DB_HOST": str(settings_dict.get("HOST") or ""),
        "WEBFETCH_TEST_DB_PORT": str(settings_dict.get("PORT") or ""),
        "WEBFETCH_TEST_DB_USER": str(settings_dict.get("USER") or ""),
    }


def process_env(settings_module: str, *, settings: Any = None) -> dict[str, str]:
    """The environment of a Django process the tests start (a worker, an MCP server): no
    proxy variables, the test database, and the lab's DNS server, CA and timeout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env.update(_database_env())
    env.update(
        DJANGO_SETTINGS_MODULE=settings_module,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        PYTHONWARNINGS="ignore",
    )
    if settings is not None:
        nameservers = getattr(settings, "WEBFETCH_DNS_NAMESERVERS", None)
        if nameservers:
            env["WEBFETCH_TEST_NAMESERVERS"] = json.dumps(list(nameservers))
        ca_file = getattr(settings, "WEBFETCH_CA_FILE", None)
        if ca_file:
            env["WEBFETCH_TEST_CA_FILE"] = ca_file
        timeout = getattr(settings, "WEBFETCH_TIMEOUT", None)
        if timeout is not None:
            env["WEBFETCH_TEST_TIMEOUT"] = str(timeout)
    return env


def worker_env(
    client: CeleryClient, *, settings: Any = None, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = process_env("tests.runs.worker_settings", settings=settings)
    env.update(
        WEBFETCH_TEST_BROKER_URL=client.broker_url,
        WEBFETCH_TEST_QUEUE=client.queue,
        WEBFETCH_TEST_TRANSPORT_OPTIONS=json.dumps(client.transport_options),
    )
    env.update(extra or {})
    return env


@pytest.fixture
def worker_factory(
    celery_client: CeleryClient, settings: Any, tmp_path: Path
) -> Iterator[Callable[..., Worker]]:
    """Start real ``celery worker`` processes on the test's queue and database."""
    started: list[Worker] = []

    def start(
        name: str = "",
        *,
        pool: str = "prefork",
        concurrency: int = 1,
        beat: bool = False,
        wait: bool = True,
        env: dict[str, str] | None = None,
        queues: list[str] | None = None,
    ) -> Worker:
        name = name or f"w{len(started) + 1}"
        log = tmp_path / f"{name}.log"
        ready = tmp_path / f"{name}.ready"
        extra = {"WEBFETCH_TEST_READY_FILE": str(ready), **(env or {})}
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.celery_app",
            "worker",
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "-Q",
            ",".join(queues or [celery_client.queue]),
            "-n",
            f"{name}-{celery_client.queue}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "INFO",
        ]
        if beat:
            command += ["--beat", "--schedule", str(tmp_path / f"{name}-beat")]
        process = start_logged(
            command, log, worker_env(celery_client, settings=settings, extra=extra)
        )
        worker = Worker(name, process, log, ready)
        started.append(worker)
        if wait:
            try:
                wait_for(
                    lambda: ready.exists() or process.poll() is not None, 60, what=f"worker {name}"
                )
            except AssertionError:
                print(worker.output())
                raise
            if process.poll() is not None:
                pytest.fail(f"worker {name} exited:\n{worker.output()[-4000:]}")
        return worker

    yield start
    # The test is over: a cold shutdown (SIGQUIT) ends the tasks still running at once,
    # where a warm one (SIGTERM) would wait for them (a 40 s fetch) until the KILL.
    for worker in started:
        _stop(worker.process, sig=signal.SIGQUIT)
    if any(w.process.returncode not in (0, -3, -9, -15, None) for w in started):
        for worker in started:
            print(f"---- {worker.name} ----\n{worker.output()[-4000:]}")


# -- PostgreSQL -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PostgresCluster:
    socket_dir: str
    port: int
    user: str = "postgres"
    data_dir: str = ""
    options: str = ""

    def restart(self, down: float = 0.3) -> None:
        """Stop the server (``pg_ctl stop -m fast``: every connection is cut), wait ``down``
        seconds (new connections are refused meanwhile), and start it again."""
        import pwd

        account = pwd.getpwnam(self.user)
        pg_ctl = shutil.which("pg_ctl")
        assert pg_ctl is not None

        def as_postgres() -> None:
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)

        env = {**os.environ, "LC_ALL": "C", "HOME": str(Path(self.data_dir).parent)}
        log = os.path.join(Path(self.data_dir).parent, "log")
        subprocess.run(
            [pg_ctl, "-D", self.data_dir, "-m", "fast", "-w", "stop"],
            check=True,
            preexec_fn=as_postgres,
            env=env,
            capture_output=True,
        )
        time.sleep(down)
        subprocess.run(
            [pg_ctl, "-D", self.data_dir, "-o", self.options, "-l", log, "-w", "start"],
            check=True,
            preexec_fn=as_postgres,
            env=env,
            capture_output=True,
        )

    def env(self, database: str) -> dict[str, str]:
        return {
            "WEBFETCH_TEST_DB_ENGINE": "postgresql",
            "WEBFETCH_TEST_DB": database,
            "WEBFETCH_TEST_DB_HOST": self.socket_dir,
            "WEBFETCH_TEST_DB_PORT": str(self.port),
            "WEBFETCH_TEST_DB_USER": self.user,
        }

    def psql(self, sql: str, database: str = "postgres") -> None:
        """Run ``sql`` on ``database`` of this cluster (``psql``, stopping at the first error)."""
        _run(
            [_client("psql"), "-q", "-X", "-v", "ON_ERROR_STOP=1", *self._connect(database)]
            + ["-c", sql]
        )

    def _connect(self, database: str) -> list[str]:
        return ["-h", self.socket_dir, "-p", str(self.port), "-U", self.user, "-d", database]

    def template(self, name: str, make: Callable[[str], None]) -> str:
        """Database ``name`` of this cluster, filled by ``make(name)`` (e.g. ``manage.py
        migrate``) once per test run: a test copies it (:meth:`copy`) instead of migrating
        a database of its own from nothing.

        ``make`` runs once per run: what it wrote is kept as a ``pg_dump`` in the run's
        shared directory (``WEBFETCH_TEST_SHARED_DIR``, made by tests/run.sh), and the
        cluster of every other xdist worker loads that dump instead of running it again."""
        if (self.data_dir, name) in _TEMPLATES:
            return name
        import fcntl

        shared = os.environ.get("WEBFETCH_TEST_SHARED_DIR", "")
        directory = shared if shared and os.path.isdir(shared) else str(Path(self.data_dir).parent)
        dump = os.path.join(directory, f"pg-{name}.sql")
        self.psql(f'DROP DATABASE IF EXISTS "{name}"')
        self.psql(f'CREATE DATABASE "{name}"')
        with open(dump + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.exists(dump):
                make(name)
                _run([_client("pg_dump"), "--no-owner", *self._connect(name), "-f", dump + ".part"])
                os.replace(dump + ".part", dump)
            else:
                _run(
                    [_client("psql"), "-q", "-X", "-v", "ON_ERROR_STOP=1"]
                    + [*self._connect(name), "-f", dump]
                )
        _TEMPLATES.add((self.data_dir, name))
        return name

    def copy(self, template: str, name: str) -> None:
        """A new database ``name`` (dropped first if it exists), a copy of ``template``."""
        self.psql(f'DROP DATABASE IF EXISTS "{name}"')
        self.psql(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')

    def _migrate(self, database: str) -> None:
        """Every migration of the nested sessions' settings, as Django's test runner runs
        them when it creates a test database."""
        env = {**os.environ, **self.env(database), "DJANGO_SETTINGS_MODULE": PG_SETTINGS}
        _run(
            [sys.executable, "-m", "django", "migrate", "--run-syncdb", "--noinput", "-v", "0"],
            env=env,
        )

    def run_pytest(self, database: str, *args: str) -> str:
        """Run ``pytest args`` in a nested session on this cluster; return its summary line.

        The nested session must pass and run something (a session that only skips, or
        that failed to collect, fails the calling test).  Its test database is a new copy of
        a migrated template (:meth:`template`; ``--reuse-db``: Django checks the migrations,
        finds them applied, and keeps the copy), not migrated from nothing in every session."""
        self.copy(self.template(_TEMPLATE, self._migrate), f"test_{database}")
        env = {**os.environ, **self.env(database), "DJANGO_SETTINGS_MODULE": PG_SETTINGS}
        # In a network namespace (and lab) of its own, as an xdist worker is: the nested
        # session's lab never collides with this session's addresses and ports.  (The
        # cluster and Redis are on Unix sockets, reached from any network namespace.)
        python = [sys.executable]
        if env.get("WEBFETCH_LAB_PYTHON") and os.geteuid() == 0:
            python = [os.path.join(ROOT, "tests", "lab", "worker-python")]
        result = subprocess.run(
            [*python, "-m", "pytest", "-q", "-p", "no:randomly", "-rfEs", "--reuse-db"]
            + ["--ds", PG_SETTINGS, *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        print(f"PostgreSQL session: {summary}")
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
        assert " passed" in summary and "failed" not in summary, summary
        return summary


#: The settings of a nested session on the throwaway cluster.
PG_SETTINGS = "tests.runs.pg_settings"
#: The migrated database every nested session's test database is copied from.
_TEMPLATE = "webfetch_migrated_template"
#: The templates (cluster data directory, database) this process made or loaded.
_TEMPLATES: set[tuple[str, str]] = set()


def _run(command: list[str], env: dict[str, str] | None = None) -> None:
    """Run ``command`` (from the repository); it must succeed (its output says why not)."""
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, (command[:3], done.stdout[-3000:], done.stderr[-3000:])


def _client(name: str) -> str:
    """A PostgreSQL client program (``psql``, ``pg_dump``) on PATH."""
    path = shutil.which(name)
    if path is None:  # pragma: no cover - installed with the server (tests/run.sh)
        pytest.fail(f"{name} is not installed")
    return path


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL cluster on a Unix socket, run as the ``postgres`` user."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb is None or pg_ctl is None:
        _missing("PostgreSQL (initdb, pg_ctl) is not installed (tests/run.sh installs it)")
    import pwd

    try:
        account = pwd.getpwnam("postgres")
    except KeyError:
        _missing("no postgres user to run the cluster as")
    directory = tempfile.mkdtemp(prefix="webfetch-pg-")
    os.chown(directory, account.pw_uid, account.pw_gid)
    data, sockets = os.path.join(directory, "data"), os.path.join(directory, "run")
    os.mkdir(sockets)
    os.chown(sockets, account.pw_uid, account.pw_gid)
    port = 54329

    def as_postgres() -> None:
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)

    env = {**os.environ, "LC_ALL": "C", "HOME": directory}
    subprocess.run(
        [initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        check=True,
        preexec_fn=as_postgres,
        env=env,
        capture_output=True,
    )
    options = (
        f"-c listen_addresses='' -c unix_socket_directories={sockets} -p {port} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    )
    subprocess.run(
        [pg_ctl, "-D", data, "-o", options, "-l", os.path.join(directory, "log"), "-w", "start"],
        check=True,
        preexec_fn=as_postgres,
        env=env,
        capture_output=True,
    )
    try:
        yield PostgresCluster(sockets, port, data_dir=data, options=options)
    finally:
        subprocess.run(
            [pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"],
            preexec_fn=as_postgres,
            env=env,
            capture_output=True,
        )
        shutil.rmtree(directory, ignore_errors=True)
