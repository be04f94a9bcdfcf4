"""Issue 30, round 20 fixed (findings 1 and 2): the site's data is masked with its code, and
no pooled plugin process keeps a lock on a file of the host
(docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst).

The sandbox binds the interpreter, the site's package directories, the plugin's package and
the system library directories whole.  Besides the site's code, every path the site's
settings name as its data (``bubblewrap._site_data``: SQLite databases with their journals,
``MEDIA_ROOT``, ``STATIC_ROOT``, the upload, session, e-mail, cache, storage and fixture
directories, the log files) is masked wherever a bind holds it, with every copy of it, and
``BASE_DIR`` as a whole where it holds nothing the plugin process needs.  The property below
generates settings and layouts and checks what the sandbox is built from; the other tests
read from inside the real sandbox, and lock files from a plugin's import.  Each data path
is masked under both of its names, where the kernel resolves it as given and at its lexical
form (issue 30, round 22, finding 2: a second property generates links and ``..``).
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap, host
from django_webfetch.plugins.runtime.host import capabilities
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

_SECRET = "fix20a-the-sites-data"
_names = itertools.count()
#: What the settings name as the site's data (each a file holding the secret, beneath it).
_DATA = (
    "database",
    "journals",
    "backup",
    "media",
    "static",
    "uploads",
    "sessions",
    "email",
    "cache",
    "storage",
    "log",
    "fixtures",
)


@dataclass(frozen=True)
class Layout:
    #: Where the project (``BASE_DIR``) lies: in a directory under a system library
    #: directory (bound whole), or it is a package directory itself (``pip install .``).
    place: str
    data: frozenset[str]
    #: The settings define ``BASE_DIR``.
    base_dir: bool
    #: ``BASE_DIR`` holds the plugin's own package (what the plugin process needs).
    plugin_in_base: bool
    #: Paths given as ``str`` rather than ``pathlib.Path``.
    as_text: bool


_LAYOUTS = st.builds(
    Layout,
    place=st.sampled_from(["system", "packages"]),
    data=st.frozensets(st.sampled_from(_DATA)),
    base_dir=st.booleans(),
    plugin_in_base=st.booleans(),
    as_text=st.booleans(),
)


def _covered(path: str | Path, by: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == m or real.startswith(m.rstrip("/") + "/") for m in by)


def _secret_file(path: Path, text: str = _SECRET) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")
    return path


def _database(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE django_session (session_key TEXT, session_data TEXT)")
        db.execute("INSERT INTO django_session VALUES (?, ?)", (_SECRET, "{}"))
    db.close()
    return path


def _project(base: Path, layout: Layout) -> tuple[dict[str, Any], dict[str, Any]]:
    """The data of ``layout`` written under ``base``: (settings overridden, the
    ``DATABASES`` entry or ``{}``)."""
    path: Any = str if layout.as_text else (lambda p: p)
    overrides: dict[str, Any] = {}
    database: dict[str, Any] = {}
    if layout.base_dir:
        overrides["BASE_DIR"] = path(base)
    base.mkdir(parents=True, exist_ok=True)
    (base / ".env").write_text(f"SECRET_KEY={_SECRET}\n")  # BASE_DIR's alone
    if layout.data & {"database", "journals", "backup"}:
        db = _database(base / "db.sqlite3")
        database = {"ENGINE": "django.db.backends.sqlite3", "NAME": path(db)}
        if "journals" in layout.data:
            for ending in ("-wal", "-shm"):
                shutil.copyfile(db, f"{db}{ending}")
            shutil.copyfile(db, f"{db}-mj0A1B2C3D")  # a super-journal
        if "backup" in layout.data:
            shutil.copyfile(db, f"{db}.bak")
            shutil.copyfile(db, f"{db}~")
    directories = {
        "media": ("MEDIA_ROOT", "media", "invoices/customer-42.txt"),
        "static": ("STATIC_ROOT", "staticfiles", "private/admin-notes.txt"),
        "uploads": ("FILE_UPLOAD_TEMP_DIR", "uploads", "tmp1234.upload"),
        "sessions": ("SESSION_FILE_PATH", "sessions", "sessionid1234"),
        "email": ("EMAIL_FILE_PATH", "sent-mail", "20261207-1.log"),
    }
    for kind, (setting, name, inside) in directories.items():
        if kind in layout.data:
            _secret_file(base / name / inside)
            overrides[setting] = path(base / name)
    if "fixtures" in layout.data:
        _secret_file(base / "fixtures" / "users.json")
        overrides["FIXTURE_DIRS"] = [path(base / "fixtures")]
    if "cache" in layout.data:
        _secret_file(base / "cache" / "0a1b2c.djcache")
        overrides["CACHES"] = {
            "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
            "files": {
                "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                "LOCATION": path(base / "cache"),
            },
        }
    if "storage" in layout.data:
        _secret_file(base / "private" / "contract.txt")
        overrides["STORAGES"] = {
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
            "private": {
                "BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": path(base / "private")},
            },
        }
    if "log" in layout.data:
        log = _secret_file(base / "logs" / "django.log")
        _secret_file(base / "logs" / "django.log.1")  # rotated
        _secret_file(base / "logs" / "django.log.2026-12-06")  # rotated by time
        overrides["LOGGING"] = {
            "version": 1,
            "disable_existing_loggers": False,
            "handlers": {
                "file": {
                    "class": "logging.handlers.RotatingFileHandler",
                    "filename": str(log),
                    "delay": True,
                }
            },
        }
    (base / "README.txt").write_text("a neighbour\n")
    return overrides, database


@hypothesis_settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(layout=_LAYOUTS)
@example(Layout("system", frozenset(_DATA), True, False, False))
@example(Layout("system", frozenset({"database", "log"}), True, True, True))
@example(Layout("packages", frozenset(_DATA), True, False, True))
def test_every_data_path_the_settings_name_is_masked_with_its_copies(
    tmp_path, system_library_dir, monkeypatch, settings, layout
):
    """Over generated settings and layouts (a ``startproject`` directory under a system
    library directory, or a package directory that is ``BASE_DIR``; any of the site's
    data kinds; ``BASE_DIR`` defined or not, holding the plugin's package or not): every
    file holding the site's secret under a directory the sandbox binds is under a path it
    masks and one the guest's Landlock rules leave out, with every copy (journals, a
    super-journal, backups, rotated logs); a SQLite journal not written yet is left out of
    the Landlock rules; ``BASE_DIR`` is masked whole exactly when it holds nothing the
    plugin process needs (its ``.env`` then too); other files stay readable."""
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    packages = root / "lib" / "site-packages"
    packages.mkdir(parents=True)
    (packages / "fix20a_other.py").write_text("VALUE = 1\n")
    holder = Path(tempfile.mkdtemp(dir=system_library_dir))
    base = holder / "mysite" if layout.place == "system" else packages
    base.mkdir(exist_ok=True)
    overrides, database = _project(base, layout)
    plugin_path, top = "/nonexistent", "nothing"
    if layout.plugin_in_base:
        top = f"fix20a_plugin{next(_names)}"
        (base / "plugins" / top).mkdir(parents=True)
        (base / "plugins" / top / "__init__.py").write_text("")
        plugin_path = str(base / "plugins")
    whole = layout.base_dir and layout.place == "system" and not layout.plugin_in_base
    # One override for the example, the hidden paths with it: the ``settings`` fixture's
    # own override made inside this one would put this one back when the test ends (its
    # ``CACHES`` then leaked into the next test of the worker).
    overrides["WEBFETCH_PLUGIN_HIDDEN_PATHS"] = []
    with monkeypatch.context() as patch, override_settings(**overrides):
        patch.syspath_prepend(str(packages))
        if database:
            patch.setitem(settings.DATABASES, "fix20a", database)
        spec = bubblewrap.SandboxSpec(plugin_path, top, 3, 4, 5, "/tmp/fix20a")
        entries = bubblewrap._layout(spec)
        hidden = bubblewrap.masks(spec)
    bound = [e[1] for e in entries if e[0] == "bind"]
    masked = [e[1] for e in entries if e[0] == "mask"]
    holders = [
        p
        for p in base.rglob("*")
        if p.is_file() and _SECRET.encode() in p.read_bytes() and (whole or p.name != ".env")
    ]
    visible = [p for p in holders if _covered(p, bound)]
    assert visible or not layout.data, (layout, holders, bound)  # the control: bound
    for path in visible:
        assert _covered(path, masked), (layout, path, masked)
        assert _covered(path, hidden), (layout, path, hidden)
    if layout.data & {"database", "journals", "backup"}:
        assert _covered(f"{base}/db.sqlite3-journal", hidden), (layout, hidden)
    assert (os.path.realpath(base) in masked) is whole, (layout, masked)
    if not whole:
        assert _covered(base / "README.txt", bound)
        assert not _covered(base / "README.txt", hidden), (layout, hidden)
    assert _covered(packages / "fix20a_other.py", bound)
    assert not _covered(packages / "fix20a_other.py", hidden)
    if layout.plugin_in_base:
        assert not _covered(base / "plugins" / top / "__init__.py", hidden), hidden


@pytest.mark.parametrize("setting", ["MEDIA_ROOT", "STATIC_ROOT", "database"])
def test_a_data_path_holding_what_the_guest_needs_refuses_the_sandbox(
    tmp_path, monkeypatch, settings, setting
):
    """A data path that is, or holds, what the plugin process needs (a whole package
    directory, the plugin's own package) cannot be masked: the sandbox is not built,
    reason ``site_code_unmaskable``, rather than the data left readable; ``BASE_DIR``
    holding it is only not masked whole (the property above)."""
    packages = tmp_path / "lib" / "site-packages"
    plugin = packages / "fix20a_needed"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(packages))
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    if setting == "MEDIA_ROOT":
        settings.MEDIA_ROOT = str(packages)  # a whole package directory
        expected = packages
    elif setting == "STATIC_ROOT":
        settings.STATIC_ROOT = plugin  # the plugin's own package
        expected = plugin
    else:
        monkeypatch.setitem(
            settings.DATABASES,
            "fix20a",
            {"ENGINE": "django.db.backends.sqlite3", "NAME": str(plugin)},
        )
        expected = plugin
    spec = bubblewrap.SandboxSpec(str(packages), "fix20a_needed", 3, 4, 5, "/tmp/fix20a")
    with pytest.raises(bubblewrap.SiteCodeUnmaskable) as raised:
        bubblewrap.command(spec)
    assert raised.value.filename == os.path.realpath(expected)
    origin = host.Origin("fix20a_needed:manifest", str(packages), "fix20a_needed")
    with pytest.raises(host.IsolationUnavailable) as refused:
        host.Worker(origin, host.Limits(5, 20, 1 << 30, 1 << 16, 5, 2), "fix20a")
    assert host.reason_of(refused.value.detail) == "site_code_unmaskable", refused.value.detail


def test_sqlite_names_that_are_no_file_are_no_data(settings, monkeypatch):
    """An in-memory database (``:memory:``, a ``file:`` URI with ``mode=memory``) names no
    file; a ``file:`` URI names its path (Django opens ``NAME`` with ``uri=True``)."""
    databases = {
        "memory": ":memory:",
        "uri_memory": "file:memorydb_default?mode=memory&cache=shared",
        "uri": "file:///srv/fix20a/db.sqlite3?mode=ro",
    }
    for alias, name in databases.items():
        monkeypatch.setitem(
            settings.DATABASES, alias, {"ENGINE": "django.db.backends.sqlite3", "NAME": name}
        )
    data = bubblewrap._site_data()
    assert "/srv/fix20a/db.sqlite3" in data and "/srv/fix20a/db.sqlite3-wal" in data, data
    assert not any("memory" in path for path in data), data


def test_a_startproject_directory_shows_nothing_of_itself_in_the_sandbox(
    probe, system_library_dir, settings, monkeypatch
):
    """A ``startproject`` directory under a system library directory (``BASE_DIR``,
    holding nothing the plugin process needs): its ``.env``, a ``local_settings.py`` the
    settings import, its database and its media are all unreadable from inside the real
    sandbox (``BASE_DIR`` masked whole); a file beside it is read."""

    base = system_library_dir / "mysite"
    layout = Layout("system", frozenset({"database", "media"}), True, False, False)
    overrides, database = _project(base, layout)
    _secret_file(base / "mysite" / "local_settings.py", f"SECRET_KEY = {_SECRET!r}")
    (system_library_dir / "other.txt").write_text("a neighbour\n")
    open_up(system_library_dir)
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    monkeypatch.setitem(settings.DATABASES, "fix20a", database)
    for name, value in overrides.items():
        setattr(settings, name, value)
    seen = read_all(probe, [str(system_library_dir)], _SECRET)
    assert seen["read"] == [str(system_library_dir / "other.txt")], seen  # the control
    assert seen["leaked"] == [], seen


#: Reads the files given (``True``: held the secret; else the error's name).
_READ_LATER = """\
import json, sys
seen = {'same_process': '__fix20a__' in sys.modules}
sys.modules.setdefault('__fix20a__', sys)
for path in %r:
    try:
        with open(path, 'rb') as fh:
            seen[path] = %r in fh.read()
    except OSError as exc:
        seen[path] = type(exc).__name__
result = json.dumps(seen)
"""
#: Waits (up to about 15 s) until each of the files given exists (Landlock does not stop a
#: ``stat``), then reads as ``_READ_LATER``: the files are written while the call runs.
_WAIT_THEN_READ = (
    """\
import os, time
for _ in range(1500):
    if all(os.path.lexists(path) for path in %r):
        break
    time.sleep(0.01)
"""
    + _READ_LATER
)


@pytest.mark.skipif(
    not capabilities().get("isolated") or not capabilities().get("landlock"),
    reason="a host that builds the plugin sandbox on a kernel with Landlock",
)
def test_data_written_after_the_process_started_is_unreadable_with_landlock(
    probe, tmp_path, monkeypatch, settings
):
    """A plugin process outlives its masks while its call runs (and, pooled, until a
    directory whose listing decided them changes: ``bubblewrap.Reading``, round 26): the
    site writes a SQLite write-ahead log when it opens its database in WAL mode, and
    rotates its log (renaming the masked file, which lifts its mask in another mount
    namespace, and writing a new one) while the call of a pooled process runs.  No such
    file is readable in it: the guest gives the directory of each data path one Landlock
    rule per entry it held when it started (``bubblewrap._guards``)."""
    from django_webfetch.plugins.runtime.host import shutdown

    packages = tmp_path / "lib" / "site-packages"
    db = _database(packages / "db.sqlite3")
    log = _secret_file(packages / "logs" / "django.log")
    monkeypatch.syspath_prepend(str(packages))
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    monkeypatch.setitem(
        settings.DATABASES, "fix20a", {"ENGINE": "django.db.backends.sqlite3", "NAME": db}
    )
    settings.LOGGING = {
        "version": 1,
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(log)}},
    }
    open_up(tmp_path)
    # Changed a minute ago: a fingerprint younger than ``bubblewrap.RECENT_NS`` matches
    # nothing, and the pooled process would not be handed the second call.
    for path in [tmp_path, *tmp_path.rglob("*")]:
        if path.is_dir():
            os.utime(path, (time.time() - 60, time.time() - 60))
    paths = [str(db), f"{db}-wal", str(log), f"{log}.1"]
    done = threading.Event()

    def rotate_once_taken() -> None:
        # Once the pooled process is taken for the second call (no idle one left).
        while host.idle_processes() and not done.wait(0.01):
            pass
        if not done.is_set():
            shutil.copyfile(db, f"{db}-wal")
            os.replace(log, f"{log}.1")
            _secret_file(log)
            open_up(tmp_path)

    try:
        first = probe(_READ_LATER % (paths, _SECRET.encode()))
        before = json.loads(json.loads(first.text)["result"])
        assert host.idle_processes() == 1
        writer = threading.Thread(target=rotate_once_taken)
        writer.start()
        try:
            code = _WAIT_THEN_READ % ([f"{db}-wal", f"{log}.1"], paths, _SECRET.encode())
            after = json.loads(json.loads(probe(code).text)["result"])
        finally:
            done.set()
            writer.join()
    finally:
        shutdown()
    assert before["same_process"] is False and after["same_process"] is True, (before, after)
    assert os.path.exists(f"{db}-wal") and os.path.exists(f"{log}.1")  # written meanwhile
    read = [seen[path] for seen in (before, after) for path in paths if path in seen]
    assert True not in read, (before, after)


#: At import: opens ``path`` (``own-tmp``: a file it writes in its working directory, under
#: its own ``/tmp``) and locks it (``kind``); ``mapped``: maps it and closes every descriptor
#: of it (an ``flock`` or OFD lock then lives on in the mapping, in no ``fdinfo``).
_LOCKER = """
import errno, fcntl, mmap, os, struct

_PATH, _KIND, _MAPPED = {path!r}, {kind!r}, {mapped!r}
if _PATH == "own-tmp":
    _PATH = os.path.join(os.getcwd(), "state.db")
    with open(_PATH, "wb") as fh:
        fh.write(b"x" * 8192)
_FD = os.open(_PATH, os.O_RDONLY)
_GOT = "ok"
try:
    if _KIND == "posix":
        fcntl.lockf(_FD, fcntl.LOCK_SH | fcntl.LOCK_NB)
    elif _KIND == "flock":
        fcntl.flock(_FD, fcntl.LOCK_SH | fcntl.LOCK_NB)
    elif _KIND == "ofd":
        fcntl.fcntl(_FD, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_RDLCK, 0, 0, 0, 0))
except OSError as exc:
    _GOT = errno.errorcode.get(exc.errno, str(exc.errno))
if _MAPPED:
    _next = os.dup(_FD)  # the lowest free number: where the mapping's own copy goes
    os.close(_next)
    _MAP = mmap.mmap(_FD, 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    assert os.fstat(_next).st_ino == os.fstat(_FD).st_ino
    os.close(_next)
    os.close(_FD)


def noop(plugin, arguments):
    return _GOT
"""


@pytest.mark.parametrize(
    ("kind", "mapped"),
    [
        ("none", False),
        ("posix", False),
        ("flock", False),
        ("ofd", False),
        ("flock", True),
        ("ofd", True),
    ],
)
@pytest.mark.parametrize("where", ["host", "own-tmp"])
def test_no_pooled_process_keeps_a_lock_on_a_file_of_the_host(
    system_library_dir, caplog, kind, mapped, where
):
    """A plugin tries a lock at import on a file it can read (a file of the host the
    settings do not name: another program's database in a bound directory; or a file of
    its own ``/tmp``): a POSIX lock, an ``flock`` or an OFD lock, to keep on its
    descriptor or in a mapping only.  Each is refused (``ENOSYS``: the sandbox's filter,
    ``bubblewrap.LOCK_COMMANDS``, decision 0062), so the process holds no lock and is
    pooled like one that tried none (the control), and the host locks the file
    exclusively while it idles.  History: issue 30, rounds 20 and 21 (a lock kept so made
    the process single-use: ``HOLDS_LOCKS``); round 22 (reading the machine's lock table
    to tell let another process's locks turn pooling off) made locks impossible instead."""
    from django_webfetch.plugins.runtime.host import Limits, execute, shutdown
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    target = system_library_dir / "otherapp" / "state.db"
    target.parent.mkdir()
    target.write_bytes(b"x" * 8192)
    path = str(target) if where == "host" else "own-tmp"
    top = f"webfetch_f20a_lock{next(_names)}"
    body = _LOCKER.format(path=path, kind=kind, mapped=mapped)
    origin = _plugin(system_library_dir / "plugins", top, "f20alocker", body, {"noop": "noop"})
    open_up(system_library_dir)
    limits = Limits(5, 20, 256 << 20, 1 << 16, 5, 1)
    message = {"tool": "noop", "arguments": {}, "config": {}, "plugin": "f20alocker",
               "alias": "f20alocker", "reference": "f20alocker"}  # fmt: skip
    shutdown()
    try:
        with caplog.at_level("INFO", logger="django_webfetch.plugins"):
            outcome = execute(origin, ("f20a-locker", 1), message, None, limits=limits)
        assert outcome.text == ("ok" if kind == "none" else "ENOSYS"), outcome
        said = [r.getMessage() for r in caplog.records if host.HOLDS_LOCKS in r.getMessage()]
        idle = [w for workers in host._pool._idle.values() for w in workers]
        assert not said and len(idle) == 1, (said, idle)
        assert host._locks(idle[0].pid) == []
        if where == "own-tmp":
            return
        fd = os.open(target, os.O_RDWR)
        try:
            if kind == "flock":
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        shutdown()


#: The steps of a generated data path below ``BASE_DIR``: a directory; a link to a sibling
#: of the directory holding it; a link to a directory two levels deeper; a link to a link
#: to such a sibling (chained); a link to a directory elsewhere by its absolute path; a
#: ``..``; a ``.``.
_STEPS = ("dir", "sibling", "deeper", "chain", "absolute", "..", ".")
#: Which setting names the generated path, and whether it names a file (else a directory).
_KINDS = {
    "NAME": True,
    "TEST_NAME": True,
    "URI": True,
    "LOGGING": True,
    "MEDIA_ROOT": False,
    "STATIC_ROOT": False,
    "FILE_UPLOAD_TEMP_DIR": False,
    "SESSION_FILE_PATH": False,
    "EMAIL_FILE_PATH": False,
    "FIXTURE_DIRS": False,
    "STORAGES": False,
    "CACHES": False,
    "BASE_DIR": False,
    "WEBFETCH_PLUGIN_HIDDEN_PATHS": False,
}


@dataclass(frozen=True)
class Route:
    kind: str
    steps: tuple[str, ...]
    #: The path ends in ``/`` (a directory's).
    trailing: bool
    #: The path is given relative to the working directory (``BASE_DIR``), not absolute.
    relative: bool
    #: The last component is itself a link (to a file or directory elsewhere).
    linked: bool
    as_text: bool


_ROUTES = st.builds(
    Route,
    kind=st.sampled_from(sorted(_KINDS)),
    steps=st.lists(st.sampled_from(_STEPS), max_size=6).map(tuple),
    trailing=st.booleans(),
    relative=st.booleans(),
    linked=st.booleans(),
    as_text=st.booleans(),
)


def _walk(root: Path, base: Path, steps: tuple[str, ...]) -> list[str]:
    """Makes what ``steps`` walk through below ``base`` and returns the path's components:
    each link made where the walk reaches it (as the kernel walks: a link first, then the
    ``..`` after it); a ``..`` that would leave ``root``, the kernel's way or the lexical
    way, is a ``.``."""
    here, lexical = str(base), str(base)
    parts: list[str] = []
    for number, step in enumerate(steps):
        if step == ".." and str(root) not in (here, lexical):
            parts.append("..")
            here, lexical = os.path.dirname(here), os.path.dirname(lexical)
            continue
        if step in ("..", "."):
            parts.append(".")
            continue
        name = f"{step[0]}{number}"
        link = os.path.join(here, name)
        up = "sib" if here == str(root) else "../sib"
        if step == "dir":
            os.makedirs(link, exist_ok=True)
        elif step == "sibling":
            os.makedirs(os.path.join(here, f"{up}{number}"), exist_ok=True)
            os.symlink(f"{up}{number}", link)
        elif step == "deeper":
            os.makedirs(os.path.join(here, f"x{number}", f"y{number}"), exist_ok=True)
            os.symlink(f"x{number}/y{number}", link)
        elif step == "chain":
            os.makedirs(os.path.join(here, f"{up}{number}"), exist_ok=True)
            os.symlink(f"{up}{number}", os.path.join(here, f"k{number}"))
            os.symlink(f"k{number}", link)
        else:
            far = root / "far" / f"f{number}{next(_names)}" / "g"
            far.mkdir(parents=True)
            os.symlink(far, link)
        parts.append(name)
        here, lexical = os.path.realpath(link), os.path.join(lexical, name)
    return parts


def _settings_for(kind: str, value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(settings overridden, the ``DATABASES`` entry or ``{}``) naming ``value``."""
    sqlite = "django.db.backends.sqlite3"
    if kind == "NAME":
        return {}, {"ENGINE": sqlite, "NAME": value}
    if kind == "TEST_NAME":
        return {}, {"ENGINE": sqlite, "NAME": ":memory:", "TEST": {"NAME": value}}
    if kind == "URI":
        return {}, {"ENGINE": sqlite, "NAME": f"file:{value}?mode=rwc"}
    if kind == "LOGGING":
        handler = {"class": "logging.FileHandler", "filename": value, "delay": True}
        return {"LOGGING": {"version": 1, "handlers": {"file": handler}}}, {}
    if kind == "FIXTURE_DIRS":
        return {"FIXTURE_DIRS": [value]}, {}
    if kind == "WEBFETCH_PLUGIN_HIDDEN_PATHS":
        return {kind: [str(value)]}, {}
    if kind == "STORAGES":
        backend = "django.core.files.storage.FileSystemStorage"
        storage = {"BACKEND": backend, "OPTIONS": {"location": value}}
        return {"STORAGES": {"default": {"BACKEND": backend}, "private": storage}}, {}
    if kind == "CACHES":
        backend = "django.core.cache.backends.filebased.FileBasedCache"
        return {"CACHES": {"default": {"BACKEND": backend, "LOCATION": value}}}, {}
    return {kind: value}, {}


@hypothesis_settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(route=_ROUTES)
@example(Route("NAME", ("deeper", ".."), False, False, False, True))  # round 22's
@example(Route("SESSION_FILE_PATH", ("sibling", ".", ".."), True, True, False, True))
@example(Route("BASE_DIR", ("chain", "..", "dir"), True, False, False, False))
@example(Route("LOGGING", ("absolute", "..", ".."), False, True, True, True))
@example(Route("MEDIA_ROOT", ("deeper", "..", "sibling", ".."), True, False, True, False))
def test_a_data_path_named_through_links_and_dotdot_is_masked_where_the_site_opens_it(
    tmp_path, monkeypatch, settings, route
):
    """Over generated layouts (links to a sibling, to a deeper directory, chained, by an
    absolute path; ``..`` after a link, ``.`` components, a trailing slash; the path
    relative to the working directory or not, its last component a link or not) and each
    path-valued setting the sandbox masks: the file the site opens through the name as
    given (the kernel resolves a link before the ``..`` after it: SQLite, the file session
    backend, ``tempfile``), the file it opens through the name's lexical form
    (``abspath``: Django's storages, file cache and e-mail backend, ``logging``), a backup
    beside the name as given and a SQLite write-ahead log are masked where a bind holds
    them (``bubblewrap._placed``, from ``_site_data``/``_site_code``); a journal or a file
    not written yet is masked or left out of the Landlock rules (``_guards``) under both
    names; nothing is refused; a file beside the layout stays readable.  Pure: what the
    sandbox is built from, no sandbox."""
    is_file = _KINDS[route.kind]
    root = Path(os.path.realpath(tempfile.mkdtemp(dir=tmp_path)))
    base = root / "site"
    base.mkdir()
    parts = _walk(root, base, route.steps)
    final = "data.sqlite3" if is_file else "store"
    relative = route.relative and route.kind != "WEBFETCH_PLUGIN_HIDDEN_PATHS"
    folder = ("/".join(parts) or ".") if relative else "/".join([str(base), *parts])
    text = f"{folder}/{final}" + ("/" if route.trailing and not is_file else "")
    value: Any = text if route.as_text or route.kind == "URI" else Path(text)
    overrides, database = _settings_for(route.kind, value)
    overrides.setdefault("WEBFETCH_PLUGIN_HIDDEN_PATHS", [])
    bind = os.path.realpath(tmp_path)
    neighbour = _secret_file(tmp_path / f"neighbour{next(_names)}.txt", "a neighbour")
    with monkeypatch.context() as patch, override_settings(**overrides):
        patch.chdir(base)
        if database:
            patch.setitem(settings.DATABASES, "fix22b", database)
        # The site writes its data through the name as given (the kernel resolves it).
        if route.linked:
            volume = root / "volume" / f"v{next(_names)}" / final
            if is_file:
                volume.parent.mkdir(parents=True)
            else:
                volume.mkdir(parents=True)
            os.symlink(volume, f"{folder}/{final}")
        if is_file and route.kind != "LOGGING":
            _database(Path(text))
            shutil.copyfile(text, os.path.realpath(text) + "-wal")  # beside its target
        elif is_file:
            _secret_file(Path(text))
        else:
            os.makedirs(text, exist_ok=True)
            _secret_file(Path(text, "secret.txt"))
        _secret_file(Path(f"{folder}/{final}.bak"))  # a backup beside the name as given
        lexical = os.path.abspath(text)
        if not os.path.lexists(lexical) and os.path.isdir(os.path.dirname(lexical)):
            # What the storages and logging would write under the lexical form.
            _secret_file(Path(lexical, "secret.txt") if not is_file else Path(lexical))
        # Not written yet: a journal (SQLite's beside the name and beside its target), the
        # lexical form's file, a file made later in a directory, under both names.
        if is_file:
            later = [lexical] if route.kind == "LOGGING" else [lexical + "-journal"]
            later += [] if route.kind == "LOGGING" else [text + "-journal"]
            later += [] if route.kind == "LOGGING" else [os.path.realpath(text) + "-journal"]
        else:
            later = [os.path.join(text, "later.txt"), os.path.join(lexical, "later.txt")]
        if route.kind in ("BASE_DIR", "WEBFETCH_PLUGIN_HIDDEN_PATHS"):
            # Not data: masked where it exists only.
            later = [path for path in later if os.path.isdir(os.path.dirname(path))]
        later = [os.path.realpath(path) for path in later]
        refused, _hollows, masked = bubblewrap._placed([bind], [])
        guards = bubblewrap._guards([bind], [])
        # The control: the kernel reaches what realpath says.
        assert (
            _SECRET.encode()
            in Path(text if is_file else os.path.join(text, "secret.txt")).read_bytes()
        )
    holders = [
        Path(top, name)
        for top, _dirs, names in os.walk(root)
        for name in names
        if not os.path.islink(os.path.join(top, name))
        and _SECRET.encode() in Path(top, name).read_bytes()
    ]
    assert holders, route  # the control
    assert refused == [], (route, refused)
    for path in holders:
        assert _covered(path, masked), (route, text, path, masked)
    for path in later:
        assert _covered(path, [*masked, *guards]), (route, text, path, masked, guards)
    assert not _covered(neighbour, masked), (route, masked)


def test_data_named_through_a_linked_directory_and_dotdot_is_not_readable(
    probe, tmp_path, monkeypatch, settings
):
    """Fixed: each data path is masked where the kernel resolves its name as given and at
    its lexical form (``bubblewrap._paths_of``; decision 0060, amended in round 22).
    History: issue 30, round 22, finding 2 -- Severity: Medium (the site's database and
    uploads; needs a data setting written with ``..`` after a directory that is a link, as
    a release layout gives: ``BASE_DIR`` ``/usr/local/lib/app/current`` linking to
    ``releases/<date>``, built without ``resolve()`` as Django's template did before 3.1
    (``os.path.dirname(os.path.abspath(__file__))``), and the data kept beside the
    releases: ``os.path.join(BASE_DIR, '..', 'db.sqlite3')``, ``SESSION_FILE_PATH =
    os.path.join(BASE_DIR, '..', 'sessions')``).  Route: ``bubblewrap._path_of`` made each
    data setting absolute with ``os.path.abspath``, which drops ``link/..`` as text; the
    kernel (and SQLite, and the storage) walk the link first, then its parent.  So the
    host masked ``<lib>/db.sqlite3`` and ``<lib>/sessions`` (which do not exist: only
    Landlock guards), while the data the site uses, ``<lib>/releases/db.sqlite3`` and
    ``<lib>/releases/sessions``, is in the bound directory, under no mask; ``BASE_DIR``
    (resolved: ``releases/r1``) is masked whole, not its parent.  Gain: an untrusted
    plugin read the site's whole database and every session.  Expected: data paths
    resolved as the kernel resolves them (``os.path.realpath`` of the path as given, never
    ``abspath`` first), and the lexical form kept as a second name."""
    base = tmp_path / "lib" / "site-packages"
    package = base / "attack22_site"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text("SECRET = None\n")
    (base / "attack22_other.py").write_text("VALUE = 1\n")  # the control: readable
    monkeypatch.syspath_prepend(str(base))
    assert os.path.realpath(base) in bubblewrap.site_dirs()
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack22_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    release = base / "releases" / "r1"
    release.mkdir(parents=True)
    (release / "manage.py").write_text("")
    (base / "current").symlink_to(release)
    with sqlite3.connect(base / "releases" / "db.sqlite3") as db:
        db.execute("CREATE TABLE django_session (session_key TEXT, session_data TEXT)")
        db.execute("INSERT INTO django_session VALUES (?, ?)", (_SECRET, "{}"))
    db.close()
    (base / "releases" / "sessions").mkdir()
    (base / "releases" / "sessions" / "sessionidk3y").write_text(f"{{'token': '{_SECRET}'}}")
    here = os.path.join(str(base / "current"))
    settings.BASE_DIR = here
    settings.SESSION_FILE_PATH = os.path.join(here, "..", "sessions")
    monkeypatch.setitem(
        settings.DATABASES,
        "attack22",
        {"ENGINE": "django.db.backends.sqlite3", "NAME": os.path.join(here, "..", "db.sqlite3")},
    )
    # The site opens what the kernel resolves (the control).
    with sqlite3.connect(settings.DATABASES["attack22"]["NAME"]) as db:
        assert db.execute("SELECT session_key FROM django_session").fetchone() == (_SECRET,)
    db.close()
    # django.contrib.sessions.backends.file joins SESSION_FILE_PATH and opens it as given.
    assert os.path.samefile(settings.SESSION_FILE_PATH, base / "releases" / "sessions")
    open_up(tmp_path)
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack22_other.py") in seen["read"], seen  # the control: bound
    assert str(release / "manage.py") not in seen["read"], seen  # the control: masked
    assert seen["leaked"] == [], f"the site's data is readable: {seen['leaked']}"
