"""The test database restored from the run's shared copy (tests/dbshare.py) is the database
Django's ``create_test_db`` migrates: same schema, same rows, same settings, same serialized
contents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from tests import dbshare

ROOT = Path(__file__).resolve().parents[2]


def _probe(child: bool = False) -> dict[str, Any]:
    """In a process of its own: make the test database as the suite does (or, ``child``, as
    a test's child interpreter does: ``dbshare.migrate()`` on ``:memory:``), then describe
    it."""
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.db.models.signals import pre_migrate

    migrations: list[str] = []
    pre_migrate.connect(lambda sender, **kwargs: migrations.append(sender.label), weak=False)
    if child:
        dbshare.migrate()
        name = connection.settings_dict["NAME"]
    else:
        dbshare.install()
        name = connection.creation.create_test_db(verbosity=0, serialize=True)
    raw = connection.connection
    schema = sorted(
        raw.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall(),
        key=repr,
    )
    tables = [row[1] for row in schema if row[0] == "table"]
    rows = {
        table: sorted(
            (repr(row) for row in raw.execute(f'SELECT * FROM "{table}"').fetchall()),
        )
        for table in tables
    }
    return {
        "name": name,
        "settings_name": settings.DATABASES["default"]["NAME"],
        "connection_name": connection.settings_dict["NAME"],
        "schema": [list(row) for row in schema],
        "rows": rows,
        "serialized": getattr(connection, "_test_serialized_contents", None),
        "migrated": sorted(set(migrations)),
    }


def _run_probe(shared: Path | None, *args: str) -> dict[str, Any]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    env.pop(dbshare.SHARED_DIR_ENV, None)
    env.pop("COVERAGE_PROCESS_START", None)
    if shared is not None:
        env[dbshare.SHARED_DIR_ENV] = str(shared)
    done = subprocess.run(
        [sys.executable, "-m", "tests.django.test_dbshare", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_restored_database_is_the_migrated_one(tmp_path: Path) -> None:
    # The first process of a run migrates (as Django does) and leaves its copy...
    migrated = _run_probe(tmp_path)
    assert "django_webfetch" in migrated["migrated"]
    copies = sorted(p.name for p in tmp_path.iterdir())
    assert [name for name in copies if name.endswith(".db")], copies
    assert [name for name in copies if name.endswith(".db.json")], copies
    # ...the next one restores it and runs no migration at all.
    restored = _run_probe(tmp_path)
    assert restored["migrated"] == []
    # And ends where Django's create_test_db ends.
    assert restored["name"] == migrated["name"]
    assert restored["settings_name"] == migrated["settings_name"] == migrated["name"]
    assert restored["connection_name"] == migrated["connection_name"] == migrated["name"]
    assert restored["schema"] == migrated["schema"]
    assert restored["rows"].keys() == migrated["rows"].keys()
    assert restored["rows"] == migrated["rows"]
    assert migrated["rows"]["django_migrations"], "no migration recorded"
    assert migrated["rows"]["django_webfetch_toolgroup"], "no built-in group"
    assert restored["serialized"] == migrated["serialized"]
    assert json.loads(restored["serialized"]), "nothing serialized"
    # A test's child interpreter (``python -c`` with tests.settings) gets the same tables
    # and rows from ``dbshare.migrate()`` without migrating.
    child = _run_probe(tmp_path, "child")
    assert child["migrated"] == []
    assert child["schema"] == migrated["schema"]
    assert child["rows"] == migrated["rows"]


def test_key_follows_every_migration_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "webfetch_dbshare_migrations"
    package.mkdir()
    (package / "__init__.py").write_text("")
    migration = package / "0001_initial.py"
    migration.write_text("# one\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    base = dbshare.schema_key()
    assert dbshare.schema_key() == base  # stable
    with override_settings(MIGRATION_MODULES={"django_webfetch": package.name}):
        first = dbshare.schema_key()
        migration.write_text("# two\n")
        second = dbshare.schema_key()
        (package / "0002_more.py").write_text("# three\n")
        third = dbshare.schema_key()
    assert len({base, first, second, third}) == 4
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "tests.other_settings")
    assert dbshare.schema_key() != base


if __name__ == "__main__":
    print(json.dumps(_probe(child=sys.argv[1:] == ["child"])))
