"""The example project, scaled with no code change: ``DATABASE_URL`` (a throwaway
PostgreSQL cluster) and ``CELERY_BROKER_URL`` (Redis) switch it to PostgreSQL and Celery
workers.  A real ``celery -A example_project.celery_app worker`` runs the editor's tool
calls and the assistant runs; an approval given in another process resumes the run on the
worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.runs.infra import redis_socket  # noqa: F401 - a fixture

pytestmark = [pytest.mark.postgres, pytest.mark.worker, pytest.mark.redis, pytest.mark.lab]

ROOT = Path(__file__).resolve().parents[2]
MANAGE = str(ROOT / "example_project" / "manage.py")

SCRIPT = """
import json, sys, time
from django.contrib.auth import get_user_model
from django_webfetch import runs
from django_webfetch.assistant import services
from django_webfetch.assistant.models import AssistantRun
from django_webfetch.models import ToolCall

User = get_user_model()
editor, admin = User.objects.get(username="editor"), User.objects.get(username="admin")

def wait(run, states, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        run = AssistantRun.objects.get(pk=run.pk)
        if run.state in states or time.monotonic() > deadline:
            return run
        time.sleep(0.2)

out = {}
conversation = services.create_conversation(editor, "scaled")
run = wait(services.post_message(conversation, "What does our page /about/ say?", user=editor),
           {"completed", "failed"})
call = ToolCall.objects.filter(tool="read_page").get()
out["read_page"] = [run.state, call.state, call.worker, "1952" in call.result["content"]]

run = services.post_message(conversation, "Summarise http://news.lab.example/page", user=editor)
run = wait(run, {"waiting_for_approval", "failed", "completed"})
call = ToolCall.objects.get(tool="fetch_external_url")
out["waiting"] = [run.state, call.state]
runs.approve(call, by=admin)
run = wait(run, {"completed", "failed"})
call.refresh_from_db()
out["fetch"] = [run.state, call.state, call.worker, "Lab page" in call.result["content"]]
from django.db import connection
out["vendor"] = connection.vendor
print("RESULT " + json.dumps(out))
"""


def _env(database_url: str, broker_url: str, lab) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
        and not k.startswith(("DJANGO_", "WEBFETCH_EXAMPLE"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="example_project.settings",
        PYTHONPATH=str(ROOT),
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=broker_url,
        WEBFETCH_DNS_NAMESERVERS=lab.nameservers[0],
        WEBFETCH_CA_FILE=lab.ca_file,
        PYTHONWARNINGS="ignore",
    )
    return env


def _manage(env, *args: str, timeout: float = 180) -> str:
    out = subprocess.run(
        [sys.executable, MANAGE, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def database_url(cluster: Any, name: str) -> str:
    return f"postgres://{cluster.user}@:{cluster.port}/{name}?host={cluster.socket_dir}"


def example_database(cluster: Any, lab: Any, name: str) -> str:
    """A new database ``name`` on ``cluster`` as ``manage.py migrate`` and ``demo_setup`` make
    it: a copy of a template they filled once per test run (``PostgresCluster.template``);
    its URL."""

    def make(template: str) -> None:
        env = _env(database_url(cluster, template), "", lab)
        env.pop("CELERY_BROKER_URL")
        _manage(env, "migrate", "--noinput", "-v", "0")
        _manage(env, "demo_setup")

    cluster.copy(cluster.template("example_migrated_template", make), name)
    return database_url(cluster, name)


@pytest.mark.long  # tens of seconds: started first (tests/conftest.py)
def test_the_example_on_postgresql_redis_and_a_worker(
    postgres_cluster,
    redis_socket,  # noqa: F811
    lab,
    tmp_path,
):
    pytest.importorskip("psycopg")
    # Migrated, with the demo's pages and users (migrate and demo_setup, once per run).
    name = f"example_{os.getpid()}"
    url = example_database(postgres_cluster, lab, name)
    lab.dns.set("news.lab.example", a=[lab.PUBLIC_V4[0]])
    env = _env(url, f"redis+socket://{redis_socket}", lab)
    # Groups content and web enabled, as the admin's form saves them (psql: no start of
    # the example for ``manage shell``, issue 28).
    postgres_cluster.psql(
        "UPDATE django_webfetch_toolgroup SET enabled = true WHERE slug IN ('content', 'web')",
        database=name,
    )
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "example_project.celery_app",
                "worker",
                "--pool",
                "solo",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in log.read_bytes():
            assert worker.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.2)
        output = _manage(env, "shell", "-c", textwrap.dedent(SCRIPT))
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
    result = json.loads(output.split("RESULT ", 1)[1])
    worker_log = log.read_text(errors="replace")
    assert result["vendor"] == "postgresql"
    state, call_state, call_worker, quoted = result["read_page"]
    assert (state, call_state, quoted) == ("completed", "succeeded", True), worker_log[-3000:]
    assert not call_worker.startswith("in-process"), call_worker  # ran on the worker
    assert result["waiting"] == ["waiting_for_approval", "awaiting_approval"]
    state, call_state, call_worker, quoted = result["fetch"]
    assert (state, call_state, quoted) == ("completed", "succeeded", True), worker_log[-3000:]
    assert not call_worker.startswith("in-process"), call_worker
    assert "django_webfetch.run_tool_call" in worker_log
    assert [(r.host, r.path) for r in lab.requests] == [("news.lab.example", "/page")]


def test_run_sh_says_at_once_when_the_database_cannot_be_reached(tmp_path):
    """``run.sh`` with a ``DATABASE_URL`` where nothing listens: it says the database cannot
    be reached, with the driver's message, and stops (exit 1); it does not take the failed
    ``migrate --check`` for an unapplied migration and migrate (a newcomer waited almost two
    minutes of pool timeouts for 112 lines of traceback)."""
    from tests.asgi import free_port

    port = free_port()  # loopback, nothing listens there
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "WEBFETCH_EXAMPLE", "CELERY_"))
    }
    env.update(
        DATABASE_URL=f"postgres://webfetch:secret@127.0.0.1:{port}/webfetch",
        PYTHONWARNINGS="ignore",
    )
    out = subprocess.run(
        ["sh", str(ROOT / "example_project" / "run.sh"), "manage", "check"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "==> the database cannot be reached (DATABASE_URL):" in out.stderr, out.stderr
    assert "OperationalError" in out.stderr and "refused" in out.stderr, out.stderr
    assert "migrating the database" not in out.stdout, out.stdout
