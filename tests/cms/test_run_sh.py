"""``sh example_project/run.sh explain URL``: sets up the database on first use and does not
migrate again while nothing changed."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.exampledb import start_migrated

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.lab


@pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "python").exists(), reason="run.sh uses the checkout's .venv"
)
@pytest.mark.long  # tens of seconds: started first (tests/conftest.py)
def test_explain_migrates_only_when_needed(lab, tmp_path):
    lab.dns.set("docs.lab.example", a=[lab.PUBLIC_V4[0]])
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_URL", "CELERY_"))
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env.update(
        WEBFETCH_EXAMPLE_DB=str(tmp_path / "db.sqlite3"),
        WEBFETCH_DNS_NAMESERVERS=lab.nameservers[0],
        PYTHONWARNINGS="ignore",
    )

    def explain() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", "example_project/run.sh", "explain", "http://docs.lab.example/"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    first = explain()
    assert "==> migrating the database" in first.stdout
    # Groups start disabled: the live policy of group web refuses by scope.
    assert "DENIED (scope)" in first.stdout, first.stdout + first.stderr
    second = explain()
    assert "migrating" not in second.stdout
    assert "DENIED (scope)" in second.stdout
    assert lab.dns.lookups("docs.lab.example") == 0
    # README trial 9: WEBFETCH_DNS_NAMESERVERS (comma-separated) is the example's resolver.
    # Group web enabled, as the admin's form saves it: one row written here, not a start of
    # the example for ``manage shell`` (issue 28).
    with contextlib.closing(sqlite3.connect(tmp_path / "db.sqlite3")) as db, db:
        assert (
            db.execute(
                "UPDATE django_webfetch_toolgroup SET enabled = 1 WHERE slug = 'web'"
            ).rowcount
            == 1
        )
    # Nothing answers on 127.0.0.9 (the lab's resolv.conf would have answered).
    env["WEBFETCH_DNS_NAMESERVERS"] = "127.0.0.9"
    unanswered = explain()
    assert "dns_error" in unanswered.stdout, unanswered.stdout + unanswered.stderr
    assert lab.dns.lookups("docs.lab.example") == 0
    env["WEBFETCH_DNS_NAMESERVERS"] = f"127.0.0.9, {lab.nameservers[0]} ,"
    third = explain()
    assert f"{lab.PUBLIC_V4[0]}" in third.stdout, third.stdout + third.stderr
    assert "ALLOWED" in third.stdout, third.stdout
    assert lab.dns.lookups("docs.lab.example") >= 1
    assert lab.requests == []


@pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "python").exists(), reason="run.sh uses the checkout's .venv"
)
@pytest.mark.long  # tens of seconds: started first
def test_a_command_printed_through_run_sh_runs_through_run_sh(tmp_path):
    """README trial 8: run through run.sh, the CLI printed ``python manage.py ...``, which
    runs nothing from the checkout; it prints run.sh's own command, which runs.

    The database starts migrated (a copy of the run's, tests/exampledb.py): the test above
    has run.sh migrate one from nothing."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_URL", "CELERY_", "WEBFETCH_MANAGE"))
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env.update(
        WEBFETCH_EXAMPLE_DB=str(tmp_path / "db.sqlite3"),
        WEBFETCH_PLUGIN_DIRS=str(ROOT / "example_project" / "plugins"),
        PYTHONWARNINGS="ignore",
    )
    start_migrated(env, tmp_path / "db.sqlite3")

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

    listed = run("sh", "example_project/run.sh", "manage", "webfetch", "plugin", "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    [available] = [line for line in listed.stdout.splitlines() if line.startswith("available:")]
    printed = available.split("(", 1)[1].rstrip(")")
    assert printed == "sh example_project/run.sh manage webfetch plugin install demo"
    installed = run(*printed.split())
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "installed demo 1.0 as 'demo'" in installed.stdout
