"""The suite's SQLite test database is migrated once per run, not once per xdist worker
(issue 28).

Each xdist worker has a SQLite test database of its own (in memory, or a file where it
collects tests/runs), and Django's
``create_test_db`` migrates it from nothing (every migration of every installed app, their
``post_migrate`` receivers, then a serialization of the rows for ``serialized_rollback``):
about 13 CPU seconds a worker with coverage on.  The workers of one run would all end in the
same state, so the first one that needs the database migrates it as Django does and writes
a copy (SQLite's backup API, to a temporary name renamed into place, under an ``fcntl``
lock) into the run's shared directory, ``WEBFETCH_TEST_SHARED_DIR`` (made and removed by
tests/run.sh); every other worker waits on the lock, then restores its database
from that copy (backup API) and skips the migrations.  The serialized rows are shared the
same way, so no worker serializes them again.

What a worker ends with is what ``create_test_db`` gives: the same ``NAME`` in the
settings and on the connection, every table, index and row the migrations made (the
``django_migrations`` rows among them, so ``migrate`` finds nothing to do), the
AUTOINCREMENT counters, ``_test_serialized_contents`` when Django would have set it, and the
cache tables (``createcachetable`` runs as in Django).  ``tests/django/test_dbshare.py``
compares a restored database with a freshly migrated one.

The copy's name is a hash of everything that shapes the schema: the settings module, the
installed apps, the Django and SQLite versions, and the files of every installed app's
migrations module (or its models module, for an app without migrations), so a stale copy is
never used.  Without the shared directory (a plain ``pytest`` run), a database that is not
SQLite, or ``--reuse-db``, Django's ``create_test_db`` runs as before.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sqlite3
from pathlib import Path
from typing import Any

#: The run's shared directory (tests/run.sh).
SHARED_DIR_ENV = "WEBFETCH_TEST_SHARED_DIR"
#: In it: one line per child that migrated from nothing (``migrate``), printed by run.sh.
MISSES = "dbshare-misses.log"


def _source_files(module_name: str) -> list[Path]:
    """The files of ``module_name`` (a package: every file under it, recursively)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return []
    paths = list(getattr(module, "__path__", []))
    if paths:
        return sorted(
            path
            for directory in paths
            for path in Path(directory).rglob("*")
            if path.is_file() and path.suffix in (".py", ".json", ".sql")
        )
    file = getattr(module, "__file__", None)
    return [Path(file)] if file else []


def schema_key(like: str | None = None) -> str:
    """A hash of everything that shapes the migrated test database (``like``: the settings
    module to name instead of this process's, for settings that import it and change no
    setting that shapes the schema or the rows the migrations write)."""
    import django
    from django.apps import apps
    from django.conf import settings
    from django.db.migrations.loader import MigrationLoader

    digest = hashlib.sha256()

    def add(*parts: object) -> None:
        for part in parts:
            data = part if isinstance(part, bytes) else str(part).encode()
            digest.update(len(data).to_bytes(8, "big") + data)

    add(
        like or os.environ.get("DJANGO_SETTINGS_MODULE", ""),
        like or settings.SETTINGS_MODULE,
        django.__version__,
        sqlite3.sqlite_version,
    )
    for app in apps.get_app_configs():
        module_name, _explicit = MigrationLoader.migrations_module(app.label)
        files = _source_files(module_name) if module_name else []
        if not files and app.models_module is not None:
            # No migrations: ``migrate --run-syncdb`` makes its tables from the models.
            files = _source_files(app.models_module.__name__)
        add(app.label, app.name, module_name or "", len(files))
        for path in files:
            add(path.name, path.read_bytes())
    return digest.hexdigest()[:32]


def _shared_dir() -> Path | None:
    shared = os.environ.get(SHARED_DIR_ENV, "")
    return Path(shared) if shared and os.path.isdir(shared) else None


def _raw(connection: Any) -> sqlite3.Connection:
    connection.ensure_connection()
    raw = connection.connection
    assert isinstance(raw, sqlite3.Connection), raw
    return raw


def save(connection: Any, path: Path, serialized: str | None) -> None:
    """Write the migrated database of ``connection`` (and its serialized rows) to ``path``."""
    part = path.with_name(path.name + ".part")
    part.unlink(missing_ok=True)
    target = sqlite3.connect(part)
    try:
        _raw(connection).backup(target)
    finally:
        target.close()
    if serialized is not None:
        json_part = path.with_name(path.name + ".json.part")
        json_part.write_text(serialized, encoding="utf-8")
        os.replace(json_part, path.with_name(path.name + ".json"))
    os.replace(part, path)


def load(connection: Any, path: Path) -> None:
    """Replace the database of ``connection`` by the copy at ``path``."""
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        source.backup(_raw(connection))
    finally:
        source.close()


def _shared_create_test_db(
    original: Any,
    creation: Any,
    verbosity: int = 1,
    autoclobber: bool = False,
    serialize: bool = True,
    keepdb: bool = False,
) -> str:
    import fcntl

    from django.conf import settings
    from django.core.management import call_command

    connection = creation.connection
    shared = _shared_dir()
    test_name = creation._get_test_db_name()
    # In memory or in a file (tests/runs/conftest.py makes it a file for every worker that
    # collects tests/runs, a whole run's workers among them: real workers open it): the copy
    # is restored into either with SQLite's backup API.  A full run that shared only
    # in-memory databases migrated in every phase-two worker and in each of 15 children.
    if shared is None or keepdb or connection.settings_dict["TEST"]["MIGRATE"] is False:
        return str(original(creation, verbosity, autoclobber, serialize, keepdb))
    path = shared / f"sqlite-{connection.alias}-{schema_key()}.db"
    json_path = path.with_name(path.name + ".json")
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            name = str(original(creation, verbosity, autoclobber, serialize, keepdb))
            save(connection, path, getattr(connection, "_test_serialized_contents", None))
            return name
    # Another worker of this run migrated it: what create_test_db does, with the copy in
    # place of the migrations.
    if verbosity >= 1:
        creation.log(
            "Restoring test database for alias "
            f"{creation._get_database_display_str(verbosity, test_name)} from {path}..."
        )
    creation._create_test_db(verbosity, autoclobber, keepdb)
    connection.close()
    settings.DATABASES[connection.alias]["NAME"] = test_name
    connection.settings_dict["NAME"] = test_name
    load(connection, path)
    if serialize:
        if json_path.exists():
            connection._test_serialized_contents = json_path.read_text(encoding="utf-8")
        else:
            connection._test_serialized_contents = creation.serialize_db_to_string()
    call_command("createcachetable", database=connection.alias)
    connection.ensure_connection()
    return str(test_name)


def migrate(alias: str = "default", like: str | None = None) -> None:
    """``migrate`` for a child interpreter a test starts (``python -c`` with
    ``tests.settings``, or settings ``like`` it: ``schema_key``): its in-memory database
    restored from the run's migrated copy when a worker of this run wrote one, else migrated
    as ``call_command("migrate")`` does.  About 7 CPU seconds a child saved; the tables,
    indexes and rows are the same."""
    from django.core.management import call_command
    from django.db import connections

    connection = connections[alias]
    shared = _shared_dir()
    path = shared / f"sqlite-{alias}-{schema_key(like)}.db" if shared is not None else None
    in_memory = connection.creation.is_in_memory_db(connection.settings_dict["NAME"])
    if path is None or not path.exists() or not in_memory:
        if shared is not None:
            # Said at the end of a full run (tests/run.sh): a child that migrated from nothing
            # costs about 10 CPU seconds, and why it did is the lead to find.
            why = "not in memory" if not in_memory else f"no copy {path.name if path else ''}"
            taken = sorted(p.name for p in shared.glob("sqlite-*.db"))
            with open(shared / MISSES, "a") as log:
                log.write(f"{os.getpid()} {why}; copies: {' '.join(taken) or 'none'}\n")
        call_command("migrate", database=alias, verbosity=0)
        return
    load(connection, path)
    call_command("createcachetable", database=alias)


def install() -> None:
    """Wrap SQLite's ``create_test_db`` (once per process)."""
    from django.db.backends.sqlite3.creation import DatabaseCreation

    if getattr(DatabaseCreation, "_webfetch_shared", False):
        return
    original = DatabaseCreation.create_test_db

    def create_test_db(
        self: Any,
        verbosity: int = 1,
        autoclobber: bool = False,
        serialize: bool = True,
        keepdb: bool = False,
    ) -> str:
        return _shared_create_test_db(original, self, verbosity, autoclobber, serialize, keepdb)

    DatabaseCreation.create_test_db = create_test_db  # type: ignore[method-assign,assignment]
    DatabaseCreation._webfetch_shared = True  # type: ignore[attr-defined]
