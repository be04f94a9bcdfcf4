"""The files that run again on PostgreSQL: a throwaway cluster (Unix socket only), and one
pytest session on it running them all (issue 28: one nested session, not one per file; each
session paid its own interpreter, lab, Django set-up and collection).

- the state machine (every transition, every service, the races) and the row locks, which
  only PostgreSQL can prove (tests/runs/test_state_machine.py, tests/runs/test_locking.py);
- the API's edge, where a NUL or a lone surrogate raised ``DataError`` and a restarted server
  left editors with HTML 500s (tests/runs/test_api_edge.py);
- the review of the API's errors: no answer but a JSON error, schemathesis included
  (tests/runs/test_api_errors_are_json.py);
- what one editor, token or user may hold open, and that no waiter keeps a database
  connection of its own (tests/assistant/test_open_holds.py, tests/mcp/test_open_holds.py,
  tests/budgets/test_open_surfaces.py).

Each file must have run on PostgreSQL with at least one test passed and none failed; the
state machine and the row locks with nothing skipped."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

#: Every file the PostgreSQL session runs (its tests named ``*on_postgresql`` left out: the
#: launchers of a nested session, this file's among them).
FILES = (
    "tests/runs/test_state_machine.py",
    "tests/runs/test_locking.py",
    "tests/runs/test_api_edge.py",
    "tests/runs/test_api_errors_are_json.py",
    "tests/assistant/test_open_holds.py",
    "tests/mcp/test_open_holds.py",
    "tests/budgets/test_open_surfaces.py",
)
#: Files whose every test needs PostgreSQL: nothing of them may be skipped there.
NOTHING_SKIPPED = ("tests/runs/test_state_machine.py", "tests/runs/test_locking.py")


def outcomes(junit: str) -> dict[str, Counter[str]]:
    """``{file: Counter(passed=..., skipped=..., failed=...)}`` of a JUnit report."""
    by_file: dict[str, Counter[str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split("[")[0]
        # ``tests.runs.test_locking`` or ``tests.runs.test_locking.TestClass``.
        parts = module.split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        path = "/".join(parts) + ".py"
        kinds = {child.tag for child in case}
        kind = (
            "failed"
            if kinds & {"failure", "error"}
            else "skipped"
            if "skipped" in kinds
            else "passed"
        )
        by_file.setdefault(path, Counter())[kind] += 1
    return by_file


@pytest.mark.postgres
@pytest.mark.long  # a nested session: started first (tests/conftest.py)
def test_the_postgresql_files_on_postgresql(postgres_cluster, tmp_path):
    if os.environ.get("WEBFETCH_TEST_DB_ENGINE") == "postgresql":
        pytest.skip("already inside the PostgreSQL session")
    junit = str(tmp_path / "postgresql.xml")
    postgres_cluster.run_pytest(
        "webfetch", f"--junitxml={junit}", *FILES, "-k", "not on_postgresql"
    )
    ran = outcomes(junit)
    for path in FILES:
        counts = ran.get(path, Counter())
        assert counts["passed"] > 0 and counts["failed"] == 0, (path, counts)
        if path in NOTHING_SKIPPED:
            assert counts["skipped"] == 0, (path, counts)
    assert set(ran) == set(FILES), sorted(ran)
