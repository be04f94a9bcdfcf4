"""History: issue 30, round 30, finding 1 (Low).

A data file's copies (a file the settings name: a SQLite database, a log, a credential
file; a file the host writes) are every sibling whose name holds the file's name, or its
root with the extension kept last, as a whole word, in any case: bounded on each side by
an end of the name or a character that is no letter or digit (space, parenthesis, ``-``,
``_``, ``.``): ``backup-db.sqlite3``, ``old_db.sqlite3``, ``20261207-db.sqlite3``,
``db (1).sqlite3`` (GNOME's duplicate), ``db copy.sqlite3`` (macOS's),
``backup-django.log``, ``old.django.log`` (``bubblewrap._data_copy``), as a directory's
copies are since round 26 (``bubblewrap._of_directory``).  The root only as part of a
longer word (``mydb.sqlite3``, ``dbx.sqlite3``) or another extension (``db-old.txt``)
stays a neighbour (decision 0060, amended for round 30).

Observed from inside the real sandbox with the codeprobe plugin (``tests/plugins/probe_site``)
reading a directory a system bind holds, and through ``bubblewrap.copies`` for generated
names.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

#: Copies of a data file an operator (or a desktop file manager, or a backup script) makes
#: beside it whose name puts a word *before* the file's name, or a space after its root.
_PREFIXED_COPIES = (
    "backup-db.sqlite3",
    "old_db.sqlite3",
    "20261207-db.sqlite3",
    "db (1).sqlite3",
    "db copy.sqlite3",
    "backup-django.log",
    "old.django.log",
)
#: Beside ``db.sqlite3`` and ``django.log``: the root only as part of a longer word, or
#: another extension (a copy keeps the extension, or the whole name).
_NEIGHBOURS = ("mydb.sqlite3", "dbx.sqlite3", "xdb.sqlite3", "db-old.txt", "djangoapp.log")


def test_a_data_files_copy_named_with_a_word_before_it_is_not_readable(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 30, finding 1 (Low).

    A project under a directory the sandbox binds whole (``/usr/local/lib/<app>``,
    ``BASE_DIR`` not masking it whole), its SQLite database and its log named by the
    settings: ``db.sqlite3`` and ``django.log`` were masked with ``db.sqlite3.bak``,
    ``db-20261207.sqlite3``, ``db_backup.sqlite3``, ``django.log.1``, but a copy whose
    name puts a word first (``backup-db.sqlite3``, ``old_db.sqlite3``, a date first) or
    a space after the root (``db (1).sqlite3``, ``db copy.sqlite3``) was read whole by
    any untrusted plugin.  Each is masked now; neighbours (``mydb.sqlite3``,
    ``dbx.sqlite3``, ``xdb.sqlite3``, ``db-old.txt``, ``djangoapp.log``) stay readable."""
    secret = f"fix30-1-{uuid.uuid4().hex}"
    base = system_library_dir / "mysite"
    package = base / "fix30_1_datasite"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text("DEBUG = False\n")
    data = base / "var"
    data.mkdir()
    database = data / "db.sqlite3"
    log = data / "django.log"
    database.write_text(f"SQLite format 3 session {secret}-live\n")
    log.write_text(f"ERROR password reset token {secret}-live\n")
    controls = ("db.sqlite3.bak", "db-20261207.sqlite3", "db_backup.sqlite3", "django.log.1")
    for name in (*controls, *_PREFIXED_COPIES):
        (data / name).write_text(f"a copy holding {secret}-{name}\n")
    for name in ("other.txt", *_NEIGHBOURS):
        (data / name).write_text("a neighbour\n")
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(base))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "fix30_1_datasite.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    monkeypatch.setitem(
        settings.DATABASES,
        "fix30_1",
        {"ENGINE": "django.db.backends.sqlite3", "NAME": str(database)},
    )
    settings.LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(log)}},
    }
    masked = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    for name in ("db.sqlite3", "django.log", *controls):  # masked before: the controls
        assert os.path.realpath(data / name) in masked, name
    missing = [name for name in _PREFIXED_COPIES if os.path.realpath(data / name) not in masked]
    seen = read_all(probe, [str(base)], secret)
    for name in ("other.txt", *_NEIGHBOURS):  # the sandbox reads the directory
        assert str(data / name) in seen["read"], (name, seen)
    assert missing == [] and seen["leaked"] == [], (
        f"copies of the site's database and log not masked: {missing}; "
        f"read whole in the sandbox: {seen['leaked']}"
    )
