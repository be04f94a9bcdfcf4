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
import re
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
    with bubblewrap._reading() as listings:
        masked = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    assert os.path.realpath(data) in listings, listings  # a new copy retires pooled processes
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


_ROOTS = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
_EXTENSIONS = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)
#: The words an operator, a backup script or a file manager puts before a copy's name.
_PREFIXES = ("backup", "old", "bak", "prev", "Copy of", "copy (2) of", "%Y%m%d", "%Y-%m-%d")
#: What comes between such a word and the name (or the root).
_SEPARATORS = ("-", "_", ".", " ", " - ", "(", "[", "+", "@", "~")
#: What follows the whole name in a copy (nothing, a backup suffix, a duplicate's number).
_TAILS = ("", ".bak", " (1)", "~", ".gz", "-old", "_%Y%m%d", " copy")
#: What follows the root in a copy that keeps the extension last (GNOME's and macOS's
#: duplicates, dates, words).
_AFTERS = (" (1)", " (copy 2)", " copy", " 2", "-old", "_%Y-%m-%d", ".%Y%m%d", "-%Y%m%d%H", ".1")
_COMPRESSED = ("", ".gz", ".bz2", ".xz", ".zst", ".Z", ".gz.gz")
#: Letters or digits glued to the root: it is then part of a longer word.  (After the
#: root, a date, a version or a copy word glued makes a copy: ``_GLUED_AFTER``.)
_GLUES = ("my", "x", "2", "app", "news")
#: Glued after the root, each makes a copy, as after a directory's name (``_GLUED_COPY``).
_GLUED_AFTER = ("%Y%m%d", "%Y-%m-%d", "%d.%m.%Y", "v41", "OLD", "bak2", "copy", "Backup")
_CASES = (str, str.upper, str.title, str.swapcase, str.casefold)


@st.composite
def _word_copy(draw: Any) -> tuple[str, str, list[str]]:
    """(a data file's name, a copy of it named with a word before it or a word after its
    root, in some case, neighbours that hold its root only inside a longer word or have
    another extension)."""
    root, extension = draw(_ROOTS), draw(_EXTENSIONS)
    name = f"{root}.{extension}"
    moment = time.gmtime(draw(st.integers(0, 4_102_444_800)))

    def pick(options: tuple[str, ...]) -> str:
        return time.strftime(draw(st.sampled_from(options)), moment)

    lead = draw(st.sampled_from(["", pick(_PREFIXES) + pick(_SEPARATORS)]))
    after, glue = pick(_AFTERS), draw(st.sampled_from(_GLUES))
    compressed = draw(st.sampled_from(_COMPRESSED))
    if draw(st.booleans()):  # the whole name as a word, a word before it
        lead = lead or pick(_PREFIXES) + pick(_SEPARATORS)
        copy = f"{lead}{name}{pick(_TAILS)}"
    elif draw(st.booleans()):  # the root as a word, the extension last
        copy = f"{lead}{root}{after}.{extension}{compressed}"
    else:  # the root and a date, a version or a copy word glued to it
        copy = f"{lead}{root}{pick(_GLUED_AFTER)}.{extension}{compressed}"
    copy = draw(st.sampled_from(_CASES))(copy)
    other = "txt" if extension != "txt" else "dat"
    neighbours = [
        f"{glue}{root}.{extension}",  # a glued prefix: the documented limit
        f"old{root}.{extension}",
        f"{root}{glue}.{extension}",  # a longer word that starts with the root
        f"{lead}{glue}{root}{after}.{extension}",
        f"{lead}{root}{glue}{after}.{extension}",
        f"{lead}{root}{after}.{other}",  # another extension
        f"{lead}{root}{after}.{extension}x",  # the extension continued
        f"{lead}{root}{after}.{extension}.txt",  # no compression after it
    ]
    # The root that is itself one of the words around it (``old`` in ``old-old.log``)
    # makes a neighbour a copy: not a neighbour then.
    around = (lead + " " + after + " " + glue + " " + other).casefold()
    if re.search(rf"(?<![^\W_]){re.escape(root)}(?![^\W_])", around):
        neighbours = []
    return name, copy, neighbours


@hypothesis_settings(max_examples=300, deadline=None)
@given(case=_word_copy())
def test_every_copy_of_a_data_file_named_with_a_word_before_or_after_is_among_its_copies(
    case: tuple[str, str, list[str]],
) -> None:
    """History: issue 30, round 30, finding 1 (Low).  Over generated data file names and
    their copies named with a word, a date or a duplicate's number before the name or
    after its root (any separator: ``-``, ``_``, ``.``, space, parenthesis, bracket;
    or a date, a version or a copy word glued after the root; any case; the extension
    kept last, compressed or not): each is among
    ``bubblewrap.copies`` of the file; no neighbour is (the root glued to a longer word
    before or after it, another extension, an extension continued or followed by a
    non-compression suffix)."""
    name, copy, neighbours = case
    with tempfile.TemporaryDirectory() as top:
        real = os.path.realpath(top)
        path = os.path.join(real, name)
        Path(path).write_text("today\n")
        Path(real, copy).write_text("a copy\n")
        for neighbour in neighbours:
            if neighbour not in (name, copy):
                Path(real, neighbour).write_text("a neighbour\n")
        found = bubblewrap.copies(path)[0]
        assert os.path.join(real, copy) in found, (copy, found)
        for neighbour in neighbours:
            if neighbour not in (name, copy):
                assert os.path.join(real, neighbour) not in found, (neighbour, found)
