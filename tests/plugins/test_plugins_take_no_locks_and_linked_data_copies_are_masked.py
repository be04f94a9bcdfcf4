"""No plugin process holds a file lock, another process's locks never decide its pooling,
and the copies of a data path reached through a link are masked beside its name.

History: issue 30, rounds 21 and 22, outside attacks; each test failed on the code it was
written against (2c56c20, d950f7b), and its docstring keeps the severity, the route and
the gain.  The tests run a hostile plugin in its real sandbox (``host.execute``) and
observe from the host side.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import struct
import tempfile
import threading
from typing import Any

import pytest

from django_webfetch.plugins.runtime import host

pytestmark = pytest.mark.django_db

#: A plugin whose call tries every way to take a file lock on a file of its own ``/tmp``
#: (its scratch directory): ``flock`` shared and exclusive, ``lockf``, ``fcntl``'s POSIX
#: and OFD commands (waiting and not), then the round-21 attack: OFD locks kept by a
#: mapping after the descriptor is closed.  It reports each errno, what ``F_GETLK`` and
#: ``F_OFD_GETLK`` (allowed: they take nothing) say, and that an in-memory SQLite
#: database works (it needs no lock).
_TRIES_EVERY_LOCK = """
import errno, fcntl, json, mmap, os, sqlite3, struct

_KEPT = []
_FLOCK = "hhxxxxqqi4x"


def idle(plugin, arguments):
    return "idle"


def _try(call):
    try:
        call()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "taken"


def tries(plugin, arguments):
    fd = os.open("locked", os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, 4096)
    read_lock = struct.pack(_FLOCK, fcntl.F_RDLCK, 0, 0, 1, 0)
    got = {
        "flock_sh": _try(lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),
        "flock_ex": _try(lambda: fcntl.flock(fd, fcntl.LOCK_EX)),
        "lockf": _try(lambda: fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)),
        "setlk": _try(lambda: fcntl.fcntl(fd, fcntl.F_SETLK, read_lock)),
        "setlkw": _try(lambda: fcntl.fcntl(fd, fcntl.F_SETLKW, read_lock)),
        "ofd_setlk": _try(lambda: fcntl.fcntl(fd, fcntl.F_OFD_SETLK, read_lock)),
        "ofd_setlkw": _try(lambda: fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, read_lock)),
    }
    probe = struct.pack(_FLOCK, fcntl.F_WRLCK, 0, 0, 0, 0)
    got["getlk"] = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, probe))[0]
    got["ofd_getlk"] = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_OFD_GETLK, probe))[0]
    got["mapped"] = _try(lambda: fcntl.fcntl(fd, fcntl.F_OFD_SETLK, read_lock))
    free = os.dup(fd)  # the lowest free number: where the mapping's own copy goes
    os.close(free)
    _KEPT.append(mmap.mmap(fd, 4096, mmap.MAP_PRIVATE, mmap.PROT_READ))
    os.close(free)  # the mapping alone keeps the file (and any lock it had) open
    os.close(fd)
    with sqlite3.connect(":memory:") as db:
        got["sqlite_memory"] = db.execute("SELECT 6 * 7").fetchone()[0]
    return json.dumps(got)
"""


def _lock_lines_of(pid: int) -> list[bytes]:
    """The lines of ``/proc/locks`` naming ``pid`` (the test reads it all: it is small
    here)."""
    with open("/proc/locks", "rb") as fh:
        return [line for line in fh.read().splitlines() if line.split()[4:5] == [b"%d" % pid]]


def test_no_lock_call_succeeds_in_the_sandbox_whatever_its_kind(tmp_path, caplog):
    """Every call that takes a file lock fails ``ENOSYS`` in the sandbox
    (``bubblewrap.LOCK_COMMANDS`` and ``flock``: decision 0062), the queries that take
    nothing work, and the process, holding no lock, is pooled: nothing of it idles in the
    kernel's lock table, and no file of the host stays locked.
    History -- issue 30, round 21, finding 1 (Medium): a call took 200,000 OFD locks on
    sparse files of its own ``/tmp`` and kept them through private mappings after closing
    the descriptors (38 MB of ``file_lock_cache`` in a pooled process); fixed then by
    reading the machine's lock table, which round 22 turned against the pool (the next
    test).  Now no lock can be taken at all."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    origin = _plugin(tmp_path / "site", "webfetch_nolocks", "nolocks", _TRIES_EVERY_LOCK,
                     {"idle": "idle", "tries": "tries"})  # fmt: skip
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)
    key = ("nolocks", 1)

    def call(tool: str) -> Any:
        message = {"tool": tool, "arguments": {}, "config": {}, "plugin": "nolocks",
                   "alias": "nolocks", "reference": "nolocks"}  # fmt: skip
        outcome = host.execute(origin, key, message, None, limits=limits)
        assert outcome.kind in ("text", "json"), outcome
        return outcome.text

    caplog.set_level(logging.INFO, logger="django_webfetch.plugins")
    host.shutdown()
    try:
        call("idle")
        [ready] = host._pool._idle[key]
        got = json.loads(call("tries"))
        refused = ("flock_sh", "flock_ex", "lockf", "setlk", "setlkw", "ofd_setlk", "ofd_setlkw")
        assert {name: got[name] for name in refused} == dict.fromkeys(refused, "ENOSYS"), got
        assert got["mapped"] == "ENOSYS", got
        assert (got["getlk"], got["ofd_getlk"]) == (fcntl.F_UNLCK, fcntl.F_UNLCK), got
        assert got["sqlite_memory"] == 42, got
        # It holds nothing: pooled, the same process, no lock of it anywhere.
        said = [r.getMessage() for r in caplog.records]
        assert host._pool._idle.get(key) == [ready], said
        assert host._locks(ready.pid) == [] and _lock_lines_of(ready.pid) == []
        assert not [r for r in caplog.records if host.HOLDS_LOCKS in r.getMessage()]
    finally:
        host.shutdown()


def _thread_read_bytes() -> int:
    """Bytes this thread has read through ``read`` and the like (``rchar``)."""
    with open(f"/proc/self/task/{threading.get_native_id()}/io", "rb") as fh:
        for line in fh.read().splitlines():
            if line.startswith(b"rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar")


#: A well-behaved plugin.
_BENIGN = """
def ping(plugin, arguments):
    return "pong"
"""

#: How many locks another process of the machine holds in the next test: their lines in
#: ``/proc/locks`` (about 50 bytes each) are well past the 256 KiB that round 21's bound
#: read before it called a process unpoolable.
_OTHER_LOCKS = 10_000


def test_another_process_s_locks_never_decide_a_plugin_process_s_pooling(tmp_path, caplog):
    """While another process of the machine holds 10,000 locks (here the test's own, on
    files of its temporary directory; an attacker would need a process outside the
    sandbox, where no plugin can take one), a well-behaved plugin's warm call is pooled as
    before, logs no ``plugin_holds_locks`` and costs the host no read of the kernel's lock
    table (``host._locks`` reads the process's own ``fdinfo`` only: decision 0062).
    History -- issue 30, round 22, finding 1 (Medium, availability): round 21 read
    ``/proc/locks`` to 256 KiB per pooling decision and called a process unpoolable past
    it; ``/proc/locks`` is every lock of the machine, so one untrusted call holding 5,000
    locks on files of its own ``/tmp`` made every process of every plugin single-use (a
    cold sandbox per call); round 21, finding 2 (High): before that bound, every decision
    read all of it (10 s of the host's CPU at 200,000 locks)."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    benign = _plugin(tmp_path / "b", "webfetch_otherlocks", "otherlocks", _BENIGN,
                     {"ping": "ping"})  # fmt: skip
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)
    key = ("otherlocks", 1)

    def call() -> Any:
        message = {"tool": "ping", "arguments": {}, "config": {}, "plugin": "otherlocks",
                   "alias": "otherlocks", "reference": "otherlocks"}  # fmt: skip
        outcome = host.execute(benign, key, message, None, limits=limits)
        assert outcome.kind == "text", outcome
        return outcome.text

    caplog.set_level(logging.INFO, logger="django_webfetch.plugins")
    host.shutdown()
    held: list[int] = []
    try:
        assert call() == "pong"
        [ready] = host._pool._idle[key]
        before = _thread_read_bytes()
        assert call() == "pong"
        quiet = _thread_read_bytes() - before
        per_file = 1000
        for _ in range(_OTHER_LOCKS // per_file):
            fd, _name = tempfile.mkstemp(dir=tmp_path)
            held.append(fd)
            for n in range(per_file):
                lock = struct.pack("hhxxxxqqi4x", fcntl.F_RDLCK, 0, 2 * n, 1, 0)
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock)
        with open("/proc/locks", "rb") as fh:
            assert len(fh.read()) > 256 << 10  # past round 21's bound
        caplog.clear()
        before = _thread_read_bytes()
        assert call() == "pong"
        read = _thread_read_bytes() - before
        assert host._pool._idle[key] == [ready], "the same process, pooled again"
        assert not [r for r in caplog.records if host.HOLDS_LOCKS in r.getMessage()]
        assert read < quiet + (64 << 10), (read, quiet)
    finally:
        for fd in held:
            os.close(fd)
        host.shutdown()


def test_a_backup_beside_a_symlinked_database_is_not_readable(
    probe, tmp_path, monkeypatch, settings
):
    """Fixed: the copies of a path reached through a link are sought beside its name too
    (``bubblewrap._site_code``).  History, round 21, finding 3 -- Severity: Medium (every
    session key, password hash and plugin configuration of the
    site, in a backup; needs the database ``NAME`` to be a symbolic link, as a deployment
    that keeps its data on a volume links it into the project, and a backup made beside
    the name the settings give: ``cp db.sqlite3 db.sqlite3.bak``, ``sqlite3 db.sqlite3
    .backup db.sqlite3.bak``).  Route: ``bubblewrap._placed`` takes each data path from
    ``_site_code``, which resolves it (``os.path.realpath``) before ``copies`` looks for
    its copies: the copies of a symlinked ``NAME`` are sought beside its *target*
    (``/var/lib/app/db.sqlite3.*``), never beside the name the settings give, where the
    operator's backups are.  ``_site_data``'s ``NAME-*`` is listed in the target's
    directory too.  The project is installed into ``site-packages`` (``BASE_DIR`` is it,
    so it is not masked whole: decision 0060), its database a link to a file outside every
    bind (unreadable in the sandbox: the control), its backup a regular file beside the
    link.  docs/plugins.rst and decision 0060 say a file beside a data file named
    ``<name>.*`` (``db.sqlite3.bak``) is masked with it.  Gain: an untrusted plugin reads
    the site's whole database from the backup.  Expected: the copies of each data path
    are sought beside the name the settings give as well as beside its target."""
    import sqlite3

    from django_webfetch.plugins.runtime import bubblewrap
    from tests.plugins.packages import open_up
    from tests.plugins.test_sandbox_site_data_venv_and_pooled_queues import (
        _SECRET,
        _read_all,
    )

    base = tmp_path / "lib" / "site-packages"
    package = base / "attack21_site"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text("SECRET = None\n")
    volume = tmp_path / "volume"
    volume.mkdir()
    with sqlite3.connect(volume / "db.sqlite3") as db:
        db.execute("CREATE TABLE django_session (session_key TEXT, session_data TEXT)")
        db.execute("INSERT INTO django_session VALUES (?, ?)", (_SECRET, "{}"))
    db.close()
    (base / "db.sqlite3").symlink_to(volume / "db.sqlite3")
    (base / "db.sqlite3.bak").write_bytes((volume / "db.sqlite3").read_bytes())
    (base / "attack21_other.py").write_text("VALUE = 1\n")  # the control: readable
    open_up(tmp_path)
    monkeypatch.syspath_prepend(str(base))
    assert os.path.realpath(base) in bubblewrap.site_dirs()
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack21_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.BASE_DIR = base
    monkeypatch.setitem(
        settings.DATABASES,
        "attack21",
        {"ENGINE": "django.db.backends.sqlite3", "NAME": base / "db.sqlite3"},
    )
    seen = _read_all(probe, [str(base)])
    assert seen["read"], seen  # the control: the directory is bound and readable
    assert seen["leaked"] == [], f"the site's database is readable: {seen['leaked']}"
