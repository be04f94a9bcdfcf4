"""The example project's SQLite database as ``manage.py migrate`` leaves it, migrated once
per run (issue 28: migrating django CMS and every app takes about 4 CPU seconds of a child
process, and the browser tests, the MCP example-site test and ``run.sh``'s tests each
started from nothing).

The first process of the run that needs it migrates it into the run's shared directory
(``WEBFETCH_TEST_SHARED_DIR``, tests/run.sh) under a file lock; every other one finds it
there and copies it (SQLite's backup API).  Without the shared directory (a plain
``pytest`` run) nothing is shared: each site migrates its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def migrated_template(env: dict[str, str]) -> Path | None:
    """The run's migrated database for the example settings of ``env`` (its
    ``DJANGO_SETTINGS_MODULE``, ``example_project.settings`` when unset, as ``manage.py``
    defaults); ``None`` without the run's shared directory."""
    shared = os.environ.get("WEBFETCH_TEST_SHARED_DIR", "")
    if not shared or not os.path.isdir(shared):
        return None
    settings_module = env.get("DJANGO_SETTINGS_MODULE", "example_project.settings")
    template = Path(shared) / f"example-{settings_module}.sqlite3"
    with open(f"{template}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            part = template.with_name(template.name + ".part")
            part.unlink(missing_ok=True)
            out = subprocess.run(
                [sys.executable, str(ROOT / "example_project" / "manage.py")]
                + ["migrate", "--noinput", "-v", "0"],
                cwd=ROOT,
                env={
                    **{k: v for k, v in env.items() if k != "DATABASE_URL"},
                    "WEBFETCH_EXAMPLE_DB": str(part),
                },
                capture_output=True,
                text=True,
                # A far safety net against a hang, not a bound on the work: at a load of
                # ~15 on 2 cores a first ``migrate`` of django CMS took over 120 s.
                timeout=900,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            os.replace(part, template)
    return template


def start_migrated(env: dict[str, str], db: Path) -> bool:
    """Make ``db`` (a new SQLite file) a copy of :func:`migrated_template`; ``False`` (and
    ``db`` untouched) without the run's shared directory."""
    template = migrated_template(env)
    if template is None:
        return False
    with (
        contextlib.closing(sqlite3.connect(f"file:{template}?mode=ro", uri=True)) as source,
        contextlib.closing(sqlite3.connect(db)) as target,
    ):
        source.backup(target)
    return True
