"""A cheaper way back to the migrated database between transactional tests (issue 28).

Every database test of the suite commits for real (tests/fixtures.py), so Django's
``TransactionTestCase`` flushes every table after it and, with ``serialized_rollback``,
deserializes the rows the migrations made (built-in tool groups, content types,
permissions) before the next one: about 65 ms of CPU a test, over 4,000 times.  On the
suite's SQLite database the same state comes back with SQLite's own backup API from a copy
taken once, right after the migrations: well under a millisecond.  That holds for the
database in shared memory and for the file a full run uses (``tests/runs/conftest.py``: real
worker processes open it too; the copy is written back page by page while no connection of
the run holds a lock, and every connection reads the restored pages).  Until 2026-12-06 the
file was left out, so a full run flushed and deserialized after every test (tests/runs'
state machine: 27 CPU seconds for 137 tests, 12 with the copy).

What a test sees is the same as with the flush: every table as the migrations left it.
One thing is kept across tests on purpose, as the flush keeps it (``reset_sequences`` is
off): the AUTOINCREMENT counters, so no two tests of a worker hand out the same primary key
(per-user keys in the worker's Redis, plugin processes keyed by instance, and the like never
meet a row of an earlier test under the same number).

On PostgreSQL (the nested sessions of ``tests/runs/infra.py``) the copy is a schema of its
own in the test database, ``webfetch_snapshot``, holding every non-empty table right after
the migrations; the way back is one transaction that empties every table Django's flush
empties and copies the snapshot's rows back, with the foreign-key triggers off
(``session_replication_role = replica``, the cluster's superuser): tens of milliseconds
instead of a ``TRUNCATE`` of every table and a deserialization (about a second a test on
this machine).  Sequences are kept, as the flush keeps them.

Where the copy cannot be written back (another connection holds a lock, or any error),
Django's own flush and deserialization run, as before.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

_snapshots: dict[str, sqlite3.Connection] = {}
#: PostgreSQL: the tables Django's flush empties, and those the snapshot schema holds.
_pg_snapshots: dict[str, tuple[list[str], list[str]]] = {}
_PG_SCHEMA = "webfetch_snapshot"
#: Aliases whose database is, right now, exactly the migrated state.
_pristine: set[str] = set()


def _raw(alias: str) -> sqlite3.Connection | None:
    from django.db import connections

    connection = connections[alias]
    if connection.vendor != "sqlite":
        return None
    connection.ensure_connection()
    raw = connection.connection
    return raw if isinstance(raw, sqlite3.Connection) else None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _postgresql(alias: str) -> Any:
    from django.db import connections

    connection = connections[alias]
    return connection if connection.vendor == "postgresql" else None


def _pg_snapshot(alias: str) -> None:
    connection = _postgresql(alias)
    if connection is None or alias in _pg_snapshots:
        return
    from django.db import transaction

    tables = sorted(connection.introspection.django_table_names(True, include_views=False))
    kept = []
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {_PG_SCHEMA} CASCADE")
        cursor.execute(f"CREATE SCHEMA {_PG_SCHEMA}")
        for table in tables:
            cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {_quote(table)})")
            if cursor.fetchone()[0]:
                cursor.execute(
                    f"CREATE TABLE {_PG_SCHEMA}.{_quote(table)} AS TABLE {_quote(table)}"
                )
                kept.append(table)
    _pg_snapshots[alias] = (tables, kept)
    _pristine.add(alias)


def _pg_restore(alias: str) -> bool:
    connection = _postgresql(alias)
    snapshot = _pg_snapshots.get(alias)
    if connection is None or snapshot is None or connection.in_atomic_block:
        return False
    from django.db import DatabaseError, transaction

    tables, kept = snapshot
    statements = [
        "SET LOCAL lock_timeout = '5s'",
        "SET LOCAL session_replication_role = replica",
        *(f"DELETE FROM {_quote(table)}" for table in tables),
        *(
            f"INSERT INTO {_quote(table)} OVERRIDING SYSTEM VALUE "
            f"SELECT * FROM {_PG_SCHEMA}.{_quote(table)}"
            for table in kept
        ),
    ]
    try:
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.execute(";\n".join(statements))
    except DatabaseError:
        return False
    return True


def _snapshot(alias: str) -> None:
    """The first transactional test of the worker sets up on the migrated database."""
    if alias in _snapshots:
        return
    _pg_snapshot(alias)
    raw = _raw(alias)
    if raw is None:
        return
    copy = sqlite3.connect(":memory:", check_same_thread=False)
    raw.backup(copy)
    _snapshots[alias] = copy
    _pristine.add(alias)


def _restore(alias: str) -> bool:
    if alias in _pg_snapshots:
        return _pg_restore(alias)
    copy = _snapshots.get(alias)
    raw = _raw(alias) if copy is not None else None
    if copy is None or raw is None or raw.in_transaction:
        return False
    counters = dict(raw.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    for _attempt in range(100):
        try:
            copy.backup(raw)
            break
        except sqlite3.OperationalError:  # another connection of the process holds a lock
            time.sleep(0.02)
    else:
        return False
    restored = dict(raw.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    raw.execute("DELETE FROM sqlite_sequence")
    raw.executemany(
        "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)",
        [(name, max(seq, counters.get(name, 0))) for name, seq in {**counters, **restored}.items()],
    )
    if raw.in_transaction:
        raw.commit()
    return True


def install() -> None:
    """Wrap ``TransactionTestCase``'s fixture set-up and tear-down (once per process)."""
    from django.test import TransactionTestCase

    if getattr(TransactionTestCase, "_webfetch_restore", False):
        return
    setup = TransactionTestCase._fixture_setup
    teardown = TransactionTestCase._fixture_teardown

    def _fixture_setup(cls: Any) -> None:  # a classmethod, as Django's
        aliases = cls._databases_names(include_mirrors=False)
        for alias in aliases:
            _snapshot(alias)
        if cls.serialized_rollback and all(alias in _pristine for alias in aliases):
            # The migrated rows are there: nothing to deserialize.
            cls.serialized_rollback = False
            try:
                setup.__func__(cls)
            finally:
                cls.serialized_rollback = True
        else:
            setup.__func__(cls)
        _pristine.difference_update(aliases)

    def _fixture_teardown(self: Any) -> None:
        aliases = self._databases_names(include_mirrors=False)
        if self.available_apps is None and all(_restore(alias) for alias in aliases):
            _pristine.update(aliases)
            return
        teardown(self)

    TransactionTestCase._fixture_setup = classmethod(_fixture_setup)  # type: ignore[method-assign,assignment]
    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[method-assign]
    TransactionTestCase._webfetch_restore = True  # type: ignore[attr-defined]
