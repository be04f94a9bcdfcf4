#!/usr/bin/env python
"""The example project's manage.py: ``python example_project/manage.py migrate``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Set by run.sh: apply unapplied migrations first, in this process (see :func:`_migrate`).
MIGRATE_FIRST = "WEBFETCH_EXAMPLE_MIGRATE_FIRST"


def _migrate() -> None:
    """What ``manage.py migrate --check`` then ``manage.py migrate`` did from run.sh, in the
    command's own process: one start of Django for a ``run.sh`` command instead of two (each
    start is about 1.5 CPU seconds).  Migrates only when a migration is unapplied; a database
    that cannot be opened is said so, and nothing runs."""
    import django
    from django.core.management import call_command
    from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
    from django.db.migrations.executor import MigrationExecutor

    django.setup()
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except OperationalError as exc:
        print("==> the database cannot be reached:", file=sys.stderr)
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    if unapplied:
        print("==> migrating the database", flush=True)
        call_command("migrate", interactive=False, verbosity=0)


def main() -> None:
    # Make ``example_project`` and ``django_webfetch`` importable from a checkout, and keep
    # this folder itself off the path (its modules are ``example_project.*``).
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    from django.core.management import execute_from_command_line

    if os.environ.pop(MIGRATE_FIRST, "") == "1":
        _migrate()
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
