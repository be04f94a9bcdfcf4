"""A cheaper way back to the migrated database between transactional tests (issue 28).

Every database test of the suite commits for real (tests/fixtures.py), so Django's
``TransactionTestCase`` flushes every table after it and, with ``serialized_rollback``,
deserializes the rows the migrations made (built-in tool groups, content types,
permissions) before the next one: about 65 ms of CPU a test, over 4,000 times.  On the
suite's in-memory SQLite database the same state comes back with SQLite's own backup API
from a copy taken once, right after the migrations: well under a millisecond.

What a test sees is the same as with the flush: every table as the migrations left it.
One thing is kept across tests on purpose, as the flush keeps it (``reset_sequences`` is
off): the AUTOINCREMENT counters, so no two tests of a worker hand out the same primary key
(per-user keys in the worker's Redis, plugin processes keyed by instance, and the like never
meet a row of an earlier test under the same number).

Where the copy cannot be written back (another connection holds a lock, another database
engine such as the PostgreSQL sessions), Django's own flush and deserialization run, as
before.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

_snapshots: dict[str, sqlite3.Connection] = {}
#: Aliases whose database is, right now, exactly the migrated state.
_pristine: set[str] = set()


def _raw(alias: str) -> sqlite3.Connection | None:
    from django.db import connections

    connection = connections[alias]
    if connection.vendor != "sqlite" or not connection.is_in_memory_db():
        return None
    connection.ensure_connection()
    raw = connection.connection
    return raw if isinstance(raw, sqlite3.Connection) else None


def _snapshot(alias: str) -> None:
    """The first transactional test of the worker sets up on the migrated database."""
    if alias in _snapshots:
        return
    raw = _raw(alias)
    if raw is None:
        return
    copy = sqlite3.connect(":memory:", check_same_thread=False)
    raw.backup(copy)
    _snapshots[alias] = copy
    _pristine.add(alias)


def _restore(alias: str) -> bool:
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
