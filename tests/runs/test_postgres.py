"""The state machine on PostgreSQL: a throwaway cluster (Unix socket only), and a pytest
session on it running the state-machine tests (every transition, every service, the races)
and the row-lock tests, which only PostgreSQL can prove."""

from __future__ import annotations

import os

import pytest


@pytest.mark.postgres
@pytest.mark.long  # a nested session: started first (tests/conftest.py)
def test_the_state_machine_on_postgresql(postgres_cluster):
    if os.environ.get("WEBFETCH_TEST_DB_ENGINE") == "postgresql":
        pytest.skip("already inside the PostgreSQL session")
    summary = postgres_cluster.run_pytest(
        "webfetch", "tests/runs/test_state_machine.py", "tests/runs/test_locking.py"
    )
    assert "skipped" not in summary, summary
