"""What the sandbox shows of the site beyond its code, and what a pooled process may keep.

The site's data beside its settings (its SQLite database, media, logs) is unreadable, and
no plugin keeps a lock on it (docs/decisions/0060); a virtualenv root under a system
library directory and the base interpreter's package directories are hollowed or masked
(docs/decisions/0061); a process holding socketpairs made at import is never pooled with
what a call queued in them (docs/decisions/0059, amended).  History: issue 30, round 20,
an outside attack; each test failed on the code it was written against (b1520e3), and
its docstring keeps the severity, the route and the gain.  The tests run the codeprobe
plugin (``tests/plugins/probe_site``) in its real sandbox and observe from the host side.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

_SECRET = "attack20-the-sites-secret"


def _read_all(probe: Any, roots: list[str]) -> dict[str, Any]:
    return read_all(probe, roots, _SECRET)


def _write_project(base: Path, name: str, data: str) -> None:
    """A Django project as ``startproject`` lays it out, its ``BASE_DIR`` being ``base``:
    the settings package ``name`` (no secret in it: the secret is in the data), and its
    ``data``: the SQLite database ``base/db.sqlite3`` (a user's session row holding the
    secret), the ``MEDIA_ROOT`` ``base/media`` (an upload holding the secret) or its log
    file ``base/logs/django.log`` (a line holding the secret)."""
    package = base / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(
        "from pathlib import Path\n"
        "BASE_DIR = Path(__file__).resolve().parent.parent\n"
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3',"
        " 'NAME': BASE_DIR / 'db.sqlite3'}}\n"
        "MEDIA_ROOT = BASE_DIR / 'media'\n"
    )
    if data == "database":
        with sqlite3.connect(base / "db.sqlite3") as db:
            db.execute("CREATE TABLE django_session (session_key TEXT, session_data TEXT)")
            db.execute("INSERT INTO django_session VALUES (?, ?)", (_SECRET, "{}"))
        db.close()
    elif data == "log":
        (base / "logs").mkdir()
        (base / "logs" / "django.log").write_text(f"ERROR password reset token {_SECRET}\n")
    else:
        (base / "media" / "invoices").mkdir(parents=True)
        (base / "media" / "invoices" / "customer-42.txt").write_text(f"IBAN {_SECRET}\n")
    (base / "attack20_other.py").write_text("VALUE = 1\n")  # the control: readable
    open_up(base)


@pytest.mark.parametrize("data", ["database", "media", "log"])
@pytest.mark.parametrize("layout", ["system-library-dir", "site-packages"])
def test_the_sites_database_uploads_and_logs_beside_its_masked_settings_are_not_readable(
    probe, system_library_dir, tmp_path, monkeypatch, settings, layout, data
):
    """Round 20, finding 1 (Medium): the site's database, uploads and logs beside its masked
    settings were readable in the sandbox; fixed (decision 0060).

    History: the sandbox masked the site's *code* only (``bubblewrap._site_code``: the
    top-level packages of ``DJANGO_SETTINGS_MODULE`` and ``ROOT_URLCONF``,
    ``WEBFETCH_PLUGIN_HIDDEN_PATHS``).  A project laid out as ``startproject`` does
    (``BASE_DIR = Path(__file__).resolve().parent.parent``) keeps its SQLite database
    (``DATABASES[...]['NAME'] = BASE_DIR / 'db.sqlite3'``), its uploads (``MEDIA_ROOT =
    BASE_DIR / 'media'``) and, often, its log files (``LOGGING``'s ``FileHandler`` at
    ``BASE_DIR / 'logs'``) beside the settings package: where that lies in a directory
    the sandbox binds (``/usr/local/lib/<app>``, or ``pip install .`` into
    ``site-packages``: the layouts rounds 6 and 19 accepted) the settings package was
    masked and the database (every session key, password hash, plugin configuration),
    the media root and the logs beside it were not, though the host knows each path from
    its settings.

    Now: every file the site's settings name as its data (``DATABASES`` SQLite ``NAME``
    with its ``-wal``/``-shm``/``-journal``, ``MEDIA_ROOT``, ``STATIC_ROOT``,
    ``FILE_UPLOAD_TEMP_DIR``, file caches, log files: ``bubblewrap._site_data``) is masked
    wherever the sandbox binds it, like the site's code; a plugin reading every file of
    the bound directory finds the secret in none, and reads the other files there."""
    top = system_library_dir if layout == "system-library-dir" else tmp_path
    base = top / "mysite" if layout == "system-library-dir" else top / "lib" / "site-packages"
    _write_project(base, "attack20_site", data)
    open_up(top)
    monkeypatch.syspath_prepend(str(base))
    if layout == "site-packages":
        assert os.path.realpath(base) in bubblewrap.site_dirs()
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack20_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    # The host's settings name the site's data as the site's settings module does.
    if data == "database":
        monkeypatch.setitem(
            settings.DATABASES,
            "attack20",
            {"ENGINE": "django.db.backends.sqlite3", "NAME": base / "db.sqlite3"},
        )
    elif data == "log":
        settings.LOGGING = {
            "version": 1,
            "disable_existing_loggers": False,
            "handlers": {
                "file": {
                    "class": "logging.FileHandler",
                    "filename": str(base / "logs" / "django.log"),
                }
            },
        }
    else:
        settings.MEDIA_ROOT = str(base / "media")
    masked = bubblewrap.hidden_paths([os.path.realpath(base)], [])
    assert os.path.realpath(base / "attack20_site") in masked, "the settings are masked"
    seen = _read_all(probe, [str(base)])
    assert seen["read"], seen  # the control: the directory is bound and readable
    assert seen["leaked"] == [], f"the site's {data} is readable in the sandbox: {seen['leaked']}"


@pytest.mark.parametrize("kernel", ["landlock", "no-landlock"])
def test_the_sites_virtualenv_root_under_a_system_library_directory_is_not_readable(
    system_library_dir, kernel
):
    """Round 20, finding 3 (Medium), fixed: the virtualenv's root under a system library
    directory is hollowed, only its ``site-packages`` bound back into it, and left out of
    the guest's Landlock rules (docs/decisions/0061;
    tests/plugins/test_sandbox_hollows_interpreter_prefixes.py).

    Severity: Medium (the ``SECRET_KEY``, database URL and API keys many deployment
    guides export from ``bin/activate`` or keep in an env file at the virtualenv's root;
    needs the site's virtualenv under ``/usr/lib``, ``/usr/local/lib``, ``/lib``: a
    distribution's package layout, ``dh-virtualenv`` configured for ``/usr/lib/<app>``, an
    image that keeps its application under ``/usr/local/lib/<app>``).  Route: round 6
    (finding 2) stopped binding the virtualenv's root: only its ``site-packages`` is
    bound (``bubblewrap._python_dirs``), and docs/plugins.rst claims the sandbox shows
    "never the rest of its prefix, nor the root of the site's virtual environment, where
    ``bin/activate`` and env files may export ``SECRET_KEY``".  But the system library
    directories are bound whole (``bubblewrap._system``) and are whole Landlock read
    rules (``guest.read_paths``), and round 19 masks only the site's *code* under them:
    a virtualenv there has its root, ``bin/activate`` and the env file beside it readable,
    with Landlock and without.  Gain: an untrusted plugin reads the site's secret key and
    credentials.  Expected: the virtualenv's root (``sys.prefix`` when it is not
    ``sys.base_prefix``) is masked wherever a system bind holds it, but for its package
    directories, or the sandbox is not built (``site_code_unmaskable``)."""
    import subprocess
    import sys

    import django_webfetch
    from tests.plugins.test_hostile_plugin_at_run_time import _READER, _VENV_HOST, _plugin

    venv = system_library_dir / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)  # fmt: skip
    with open(venv / "bin" / "activate", "a") as fh:
        fh.write(f'\nexport DJANGO_SECRET_KEY="{_SECRET}"\n')
    (venv / "mysite.env").write_text(f"SECRET_KEY={_SECRET}\n")
    open_up(system_library_dir)
    origin = _plugin(system_library_dir / "plugins", "webfetch_a20_reader", "a20reader",
                     _READER, {"read": "read"})  # fmt: skip
    open_up(system_library_dir)
    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _VENV_HOST, origin.path, origin.top_level, kernel],
        capture_output=True, text=True, timeout=120, cwd=root, start_new_session=True,
        env={**os.environ, "PYTHONPATH": ":".join([root, *bubblewrap.site_dirs()])},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["prefix"] == str(venv), report
    assert report["kind"] == "json", report
    assert bool(report["landlock"]) is (kernel == "landlock"), report
    seen = json.loads(report["text"])
    assert any(str(venv) in path for path in seen), seen  # the plugin found the site's venv
    assert _SECRET not in report["text"], f"a plugin read the site's virtualenv: {seen}"
    for name in ("bin/activate", "pyvenv.cfg", "mysite.env"):
        assert seen[str(venv / name)] == "FileNotFoundError", seen


#: A plugin that makes stream socketpairs at import (``socketpair`` is allowed: asyncio's
#: self-pipe), all empty when it gets ready; ``keep`` keeps ``kib`` KiB more resident, and
#: ``fill`` queues bytes in both directions of every pair, to each sender's default send
#: buffer: kernel memory in no ``VmRSS``, in descriptors the process held at ready.
_PAIRS_AT_IMPORT = """
import json, socket, sys

_PAIRS = []
for _ in range(12):
    _a, _b = socket.socketpair()
    _a.setblocking(False)
    _b.setblocking(False)
    _PAIRS.append((_a, _b))
_KEPT = []


def keep(plugin, arguments):
    block = bytearray(int(arguments["kib"]) << 10)
    for i in range(0, len(block), 4096):
        block[i] = 1
    _KEPT.append(block)
    return str(len(block))


def fill(plugin, arguments):
    queued = 0
    for a, b in _PAIRS:
        for sender in (a, b):
            try:
                while True:
                    queued += sender.send(b"x" * 65536)
            except BlockingIOError:
                pass
    return json.dumps({"queued": queued})
"""


def test_a_process_holding_socketpairs_made_at_import_is_never_pooled_with_their_queues(
    tmp_path, caplog
):
    """Round 20, finding 5: socketpairs made at import and filled by a call kept kernel
    memory in a pooled process (Low: kernel memory past the pool's idle bound, as round
    18's finding 2, whose fix this passed).  Route: round 18 made the pool compare the
    descriptors a process holds with those it held at ready by identity (number, link,
    dev/inode, ``fdinfo`` but ``pos``: ``host._descriptors``), so a call can no longer swap
    in a full socket.  But a socket's queued bytes are in none of these: a plugin makes
    stream socketpairs at import (allowed: ``socketpair(AF_UNIX, SOCK_STREAM)``; up to
    ``guest.MAX_FILES`` descriptors), all empty at ready; a call fills both directions
    of each to the default send buffer.  The process held exactly the descriptors it
    held at ready, its ``VmRSS`` did not move, and it was pooled with the queued bytes on
    top of the ``MAX_IDLE_GROWTH`` it may keep resident (measured: 12 pairs, 5,464 KiB
    queued, 21,504 KiB held against the 16,384 KiB bound).  Fixed (decision 0059, amended
    2026-12-07): the pool keeps a process only when every descriptor it holds besides its
    channel is of a kind that cannot queue data (``host._queueing``) and its channel is
    measured empty; a process holding a socketpair besides it serves one call
    (``plugin_queues_held``, logged), before and after a call fills the pairs, so no
    pooled process holds more than ``MAX_IDLE_GROWTH`` over its ready footprint whatever
    its memory's kind (every kind:
    tests/plugins/test_pool_refuses_descriptors_that_queue_data.py)."""
    import logging

    from django_webfetch.plugins.runtime import host
    from django_webfetch.plugins.runtime.host import QUEUES_HELD, Limits, execute, shutdown
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    origin = _plugin(tmp_path / "site", "webfetch_a20_pairs", "a20pairs", _PAIRS_AT_IMPORT,
                     {"keep": "keep", "fill": "fill"})  # fmt: skip
    limits = Limits(5, 20, 256 << 20, 1 << 16, 5, 1)
    key = ("a20-pairs", 1)

    def call(tool: str, **arguments: Any) -> str:
        message = {"tool": tool, "arguments": arguments, "config": {}, "plugin": "a20pairs",
                   "alias": "a20pairs", "reference": "a20pairs"}  # fmt: skip
        outcome = execute(origin, key, message, None, limits=limits)
        assert outcome.kind in ("text", "json"), outcome
        return str(outcome.text)

    def pooled() -> Any:
        workers = [w for idle in host._pool._idle.values() for w in idle]
        assert len(workers) <= 1, workers
        return workers[0] if workers else None

    caplog.set_level(logging.INFO, logger="django_webfetch.plugins")
    shutdown()
    try:
        # Empty at ready, and after a call that queued nothing: not kept all the same
        # (what the next call queues would idle with it).
        assert call("keep", kib=64) == str(64 << 10)
        assert pooled() is None, "a process holding socketpairs besides its channel is pooled"
        queued = int(json.loads(call("fill"))["queued"])
        assert queued > 1 << 20, queued  # the pairs were filled: ~5 MiB
        assert pooled() is None, f"a process holding {queued >> 10} KiB queued is pooled"
    finally:
        shutdown()
    said = [m for m in caplog.messages if QUEUES_HELD in m]
    assert len(said) == 2, said
    assert all("socket:[" in m for m in said), said


@pytest.fixture
def base_site_packages() -> Iterator[Path]:
    """A directory made in the *base* interpreter's ``site-packages`` (the one a virtual
    environment's site does not import from: ``include-system-site-packages = false``),
    removed after the test; skipped where the site runs from no virtual environment."""
    import sys
    import sysconfig

    if sys.prefix == sys.base_prefix:
        pytest.skip("the site runs from no virtual environment")
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    purelib = os.path.realpath(base["purelib"])
    if not os.path.isdir(purelib) or purelib in bubblewrap.site_dirs():
        pytest.skip("no base site-packages apart from the site's")
    top = tempfile.mkdtemp(prefix="webfetch_attack20_", dir=purelib)
    try:
        yield Path(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_the_base_interpreters_site_packages_is_not_readable_from_a_virtualenv_site(
    probe, base_site_packages, settings
):
    """Round 20, finding 4 (Low), fixed: the base interpreter's package directories that
    are none of the site's are masked in the bound standard library and left out of its
    Landlock rule (docs/decisions/0061; tests/plugins/test_sandbox_hollows_interpreter_prefixes.py).

    Severity: Low (another project's code and settings installed globally on the same
    machine: a second site, a ``sudo pip install .``, a tool's credentials module; needs a
    site run from a virtual environment over an interpreter with a global
    ``site-packages``, as pyenv, a ``python:3.x`` image or ``/usr/local`` builds have).
    Route: the sandbox binds the standard library as one directory (``bubblewrap.
    _python_dirs``: ``dirname(os.__file__)``), and the guest's Landlock rules read it
    whole (``guest.read_paths``: ``sysconfig``'s ``stdlib``); the base interpreter's
    ``site-packages`` lies inside it (``<prefix>/lib/python3.X/site-packages``).  A site
    run from a virtual environment (``include-system-site-packages = false``) never
    imports from it, so it is none of the site's package directories, none of its code is
    ever found as the site's (``_site_code`` looks on the site's ``sys.path``), and yet
    every file of it is readable in the sandbox: docs/plugins.rst claims the interpreter
    shows "its executable, standard library and ``libpython``; never the rest of its
    prefix".  Gain: an untrusted plugin reads whatever the machine installed globally
    (here: a second site's settings).  Expected: the base interpreter's package
    directories that are not the site's are masked (or left out of the bind and of the
    Landlock rules) like any other path outside the interpreter's standard library."""
    package = base_site_packages / "othersite"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(f"SECRET_KEY = {_SECRET!r}\n")
    open_up(base_site_packages)
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    stdlib_json = os.path.join(os.path.dirname(os.path.realpath(os.__file__)), "json")
    seen = _read_all(probe, [str(base_site_packages), stdlib_json])
    assert seen["read"], seen  # the control: the standard library beside it is readable
    assert seen["leaked"] == [], (
        f"the base interpreter's site-packages is readable in the sandbox: {seen['leaked']}"
    )


#: A plugin that, at import, opens the site's SQLite database read-only (a path it found
#: in the bound directory) and takes a POSIX read lock on SQLite's SHARED byte range, as a
#: reader in a transaction does; its one tool does nothing.  The descriptor and its lock
#: are the process's as it got ready, so a pooled process keeps both, stopped.
_LOCKS_THE_DATABASE = """
import errno, fcntl, os

try:
    _DB = os.open({db!r}, os.O_RDONLY)
except OSError as exc:  # masked: nothing to read, nothing to lock
    _HEAD = type(exc).__name__
else:
    _HEAD = os.pread(_DB, 15, 0).decode("latin-1")
    try:
        fcntl.lockf(_DB, fcntl.LOCK_SH | fcntl.LOCK_NB, 510, 0x40000002)
    except OSError as exc:  # no lock in the sandbox (decision 0062)
        _HEAD += " lock:" + errno.errorcode.get(exc.errno, str(exc.errno))


def noop(plugin, arguments):
    return _HEAD
"""


@pytest.mark.parametrize("named", ["in-the-settings", "unknown-to-the-settings"])
def test_a_plugin_cannot_keep_a_lock_on_the_sites_database(
    system_library_dir, monkeypatch, caplog, named
):
    """Round 20, finding 2 (Medium): a plugin held a lock on the site's SQLite database
    from its import, pooled with it, and the site could not write; fixed (decision 0060).

    History: the site's SQLite database was readable in the sandbox (finding 1), and
    ``fcntl(F_SETLK)`` is allowed (``bubblewrap.FCNTL_COMMANDS``: a read lock needs only a
    read-only descriptor; Landlock does not govern locks).  A plugin opened the database
    at import and took a read lock on SQLite's SHARED range; POSIX locks are on the host's
    inode, so every writer of the site failed ``database is locked``; the descriptor and
    its lock were what the process held at ready (``host._descriptors``' ``fdinfo``
    unchanged), so the pool kept the process, stopped, with the lock.

    Now: a database the settings name is masked (``in-the-settings``): the plugin cannot
    open it, so it has nothing to lock.  A file the host does not know as
    the site's (``unknown-to-the-settings``: another program's database in the same
    directory) is readable, but no lock can be taken on it (``ENOSYS``: the sandbox's
    filter refuses every lock, decision 0062, issue 30, round 22): the process is pooled
    holding nothing, and the site writes."""
    from django_webfetch.plugins.runtime import host
    from django_webfetch.plugins.runtime.host import Limits, execute, shutdown
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    base = system_library_dir / "mysite"
    _write_project(base, "attack20_site", "database")
    open_up(system_library_dir)
    db = base / "db.sqlite3"
    if named == "in-the-settings":
        from django.conf import settings

        monkeypatch.setitem(
            settings.DATABASES,
            "attack20",
            {"ENGINE": "django.db.backends.sqlite3", "NAME": db},
        )
    origin = _plugin(system_library_dir / "plugins", "webfetch_a20_locker", "a20locker",
                     _LOCKS_THE_DATABASE.format(db=str(db)), {"noop": "noop"})  # fmt: skip
    open_up(system_library_dir)
    limits = Limits(5, 20, 256 << 20, 1 << 16, 5, 1)
    message = {"tool": "noop", "arguments": {}, "config": {}, "plugin": "a20locker",
               "alias": "a20locker", "reference": "a20locker"}  # fmt: skip
    shutdown()
    try:
        with caplog.at_level("INFO", logger="django_webfetch.plugins"):
            outcome = execute(origin, ("a20-locker", 1), message, None, limits=limits)
        assert outcome.kind == "text", outcome
        head = outcome.text
        said = [r.getMessage() for r in caplog.records if host.HOLDS_LOCKS in r.getMessage()]
        if named == "in-the-settings":
            # Masked by a device node on a ``nodev`` mount: it cannot even be opened.
            assert head == "PermissionError", f"the plugin opened the site's database: {head!r}"
            assert not said, said
        else:
            assert head == "SQLite format 3 lock:ENOSYS", head  # readable, not lockable
            assert not said and len(host._pool._idle[("a20-locker", 1)]) == 1, said
        site = sqlite3.connect(db, timeout=0)
        try:
            site.execute("INSERT INTO django_session VALUES ('k', '{}')")
            site.commit()
        except sqlite3.OperationalError as exc:
            pytest.fail(f"the site cannot write its own database: {exc}")
        finally:
            site.close()
    finally:
        shutdown()
