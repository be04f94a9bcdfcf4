"""The state machine on PostgreSQL: a throwaway cluster (Unix socket only), and a pytest
session on it running the state-machine tests (every transition, every service, the races)
and the row-lock tests, which only PostgreSQL can prove."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .infra import ROOT


@pytest.mark.postgres
def test_the_state_machine_on_postgresql(postgres_cluster):
    if os.environ.get("WEBFETCH_TEST_DB_ENGINE") == "postgresql":
        pytest.skip("already inside the PostgreSQL session")
    env = {
        **os.environ,
        **postgres_cluster.env("webfetch"),
        "DJANGO_SETTINGS_MODULE": "tests.runs.pg_settings",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-rfEs",
            "--ds",
            "tests.runs.pg_settings",
            "tests/runs/test_state_machine.py",
            "tests/runs/test_locking.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    print(f"PostgreSQL session: {summary}")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in summary and "skipped" not in summary, summary
