"""No pooled process keeps a file lock, reading the kernel's lock table costs a bounded read,
and the copies of a data path reached through a link are masked beside its name.

History: issue 30, round 21, an outside attack; each test failed on the code it was
written against (2c56c20), and its docstring keeps the severity, the route and the gain.  The
tests run a hostile plugin in its real sandbox (``host.execute``) and observe from the
host side.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any

import pytest

from django_webfetch.plugins.runtime import host

pytestmark = pytest.mark.django_db

#: How many byte-range locks the hostile call takes on files of its own ``/tmp`` (the
#: attack took 200,000: 38 MB of kernel memory; a few suffice to show the process is not
#: pooled, and stay far under ``host.LOCKS_READ``, so no other test's pooling is touched).
_LOCKS = 2_000

#: A plugin whose call, for each of ``count // _PER_FILE`` files of its own ``/tmp`` (its
#: scratch directory; sparse, no block written), takes ``_PER_FILE`` OFD read locks on
#: separate bytes through one descriptor, maps one page of the file (a private read-only
#: file-backed mapping, never touched: no ``VmRSS``), then closes the descriptor and the
#: duplicate ``mmap.mmap`` keeps (the lowest free number: found by a ``dup`` first).  The
#: open file description, and every lock it owns, live on in the mapping; the process
#: holds the very descriptors it held at ready.  Many files, not one: the kernel checks
#: each new lock against every lock of its file.
_LOCKS_IN_MAPPINGS = """
import fcntl, json, mmap, os, struct, time

_KEPT = []
_PER_FILE = 1000


def idle(plugin, arguments):
    return "idle"


def hold(plugin, arguments):
    count = int(arguments.get("count", 0))
    taken, inodes = 0, []
    for f in range(count // _PER_FILE):
        fd = os.open("held-locks-%d" % f, os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, 4096)  # sparse: no block of /tmp
        for n in range(_PER_FILE - 1, -1, -1):
            # struct flock: l_type F_RDLCK, l_whence SEEK_SET, l_start, l_len 1, l_pid 0
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK,
                        struct.pack("hhxxxxqqi4x", fcntl.F_RDLCK, 0, 2 * n, 1, 0))
            taken += 1
        free = os.dup(fd)
        os.close(free)
        _KEPT.append(mmap.mmap(fd, 4096, mmap.MAP_PRIVATE, mmap.PROT_READ))  # dup: ``free``
        inodes.append(os.fstat(fd).st_ino)
        os.close(free)
        os.close(fd)
    return json.dumps({"taken": taken, "inodes": inodes})


def hold_and_wait(plugin, arguments):
    held = hold(plugin, arguments)
    time.sleep(float(arguments.get("seconds", 0)))
    return held
"""


def _lock_lines(inodes: list[int]) -> int:
    """Lines of ``/proc/locks`` on one of ``inodes`` (any device)."""
    wanted = {b"%d" % inode for inode in inodes}
    with open("/proc/locks", "rb") as fh:
        return sum(
            1 for line in fh.read().splitlines()
            if len(line.split()) > 5 and line.split()[5].rpartition(b":")[2] in wanted
        )  # fmt: skip


def test_a_process_holding_locks_kept_by_mappings_in_its_own_tmp_is_not_pooled(tmp_path, caplog):
    """Fixed (decision 0060, amended): a process holding any file lock is not pooled, its
    own ``/tmp``'s too (``host._locks``).  History, round 21, finding 1 -- Severity:
    Medium.  Route: the pool keeps a process whose call left kernel memory
    in no ``VmRSS``, no byte of ``/tmp`` and no descriptor: file locks.  ``host._locks``
    leaves out every lock on a file of the process's own ``/tmp`` (decision 0060: "its
    own business"), ``_descriptors`` sees no change (the call closed the descriptor it
    locked through; the open file description lives on in a private read-only mapping of
    one page, so its OFD locks do too), ``_queueing`` calls a regular file quiet.  A call
    takes 200,000 OFD locks on separate bytes (``fcntl`` ``F_OFD_SETLK`` is allowed;
    nothing bounds how many locks a process holds): each a ``struct file_lock`` in kernel
    memory (measured: 38 MB of ``file_lock_cache``, 192 bytes each, past
    ``MAX_IDLE_GROWTH``'s 16 MiB), and a line of ``/proc/locks``.  Gain: (1) the call's kernel
    memory idles in the pool with the process, past ``MAX_IDLE_GROWTH``, for as long as no
    call comes, in each of up to ``MAX_IDLE_PROCESSES`` processes (round 20's finding 5
    class, through a kind the fix calls quiet); (2) host DoS: every pooling decision of
    every plugin process on the machine reads all of ``/proc/locks`` with no bound
    (``host._locks``: ``fh.read()`` and a split of each line) while these idle: tens of MB
    read and hundreds of thousands of lines split in the site's worker per call
    (``test_one_plugins_locks_make_every_other_plugins_call_read_all_of_proc_locks``).
    Expected: a process holding locks beyond a small bound (or any lock a call took after
    ready, its own ``/tmp`` included) is not pooled."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    origin = _plugin(tmp_path / "site", "webfetch_a21locks", "a21locks", _LOCKS_IN_MAPPINGS,
                     {"idle": "idle", "hold": "hold"})  # fmt: skip
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)
    key = ("a21locks", "locks")

    def call(tool: str, arguments: dict[str, Any]) -> Any:
        message = {"tool": tool, "arguments": arguments, "config": {}, "plugin": "a21locks",
                   "alias": "a21locks", "reference": "a21locks"}  # fmt: skip
        outcome = host.execute(origin, key, message, None, limits=limits)
        assert outcome.kind in ("text", "json"), outcome
        return outcome.text

    caplog.set_level(logging.INFO, logger="django_webfetch.plugins")
    host.shutdown()
    try:
        call("idle", {})
        ready = list(host._pool._idle.get(key, []))
        assert len(ready) == 1, "the control: a process holding nothing is pooled"
        held = json.loads(call("hold", {"count": _LOCKS}))
        assert held["taken"] == _LOCKS, held
        kept = list(host._pool._idle.get(key, []))
        said = [r.getMessage() for r in caplog.records if host.HOLDS_LOCKS in r.getMessage()]
        assert kept == [] and said, (kept, said)  # recycled: its locks ended with it
        # Its locks end with it: the kill is asynchronous, so wait for the kernel (a loaded
        # run counted them before the process had gone).
        for _ in range(600):
            if _lock_lines(held["inodes"]) == 0:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the recycled process's locks outlived it")
    finally:
        host.shutdown()


def _thread_read_bytes() -> int:
    """Bytes this thread has read through ``read`` and the like (``rchar``)."""
    with open(f"/proc/self/task/{threading.get_native_id()}/io", "rb") as fh:
        for line in fh.read().splitlines():
            if line.startswith(b"rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar")


def _all_lock_lines() -> int:
    with open("/proc/locks", "rb") as fh:
        return fh.read().count(b"\n")


#: A well-behaved plugin, another one than the attacker's.
_BENIGN = """
def ping(plugin, arguments):
    return "pong"
"""


def test_one_plugins_locks_cost_another_plugins_call_a_bounded_read_only(tmp_path):
    """Fixed (decision 0060, amended): ``/proc/locks`` is read to ``host.LOCKS_READ`` bytes
    in one pass, and past it the process is not pooled.  History, round 21, finding 2 --
    Severity: High (availability of the site).  Route: at every pooling decision
    (``Pool.release`` -> ``Worker.holds_locks`` -> ``host._locks``) the host reads the
    whole of ``/proc/locks``, the kernel's list of every lock on the machine, with no
    bound (``fh.read()``), in the site's own worker, in the thread that made the call, and
    splits every line.  Any plugin process can put as many lines there as it likes: one
    per byte-range lock (``fcntl`` ``F_OFD_SETLK``/``F_SETLK`` and ``flock`` are allowed;
    nothing bounds their number), on files of its own ``/tmp``, held for the wall time
    of its call, or for as long as it idles in the pool (the other test of this module).
    ``/proc/locks`` is generated by a ``seq_file`` that walks the list from its start for
    each chunk read, so its cost grows with the square of the lines: measured here, one
    ``host._locks`` with 200,000 locks held took 10.4 s of the host's CPU (10 MB read);
    with more processes holding more, each call of every plugin of the site (and of every
    other site on the machine running this code) is held for minutes in the request's
    thread.  Gain: an untrusted plugin stalls every worker of the site, while its own
    process stays within every limit.  Here: while the attacker's call holds 10,000
    locks, another plugin's warm call makes the host thread read megabytes.
    Expected: the pooling decision reads a bound of ``/proc/locks`` (or none: the
    process's own descriptors' ``fdinfo`` and ``/proc/<pid>/maps`` name what it locks),
    and refuses to pool when it cannot tell within the bound."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    attacker = _plugin(tmp_path / "a", "webfetch_a21locks", "a21locks", _LOCKS_IN_MAPPINGS,
                       {"idle": "idle", "hold": "hold", "wait": "hold_and_wait"})  # fmt: skip
    benign = _plugin(tmp_path / "b", "webfetch_a21benign", "a21benign", _BENIGN,
                     {"ping": "ping"})  # fmt: skip
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)

    def call(origin: Any, key: Any, name: str, tool: str, arguments: dict[str, Any]) -> Any:
        message = {"tool": tool, "arguments": arguments, "config": {}, "plugin": name,
                   "alias": name, "reference": name}  # fmt: skip
        outcome = host.execute(origin, key, message, None, limits=limits)
        assert outcome.kind in ("text", "json"), outcome
        return outcome.text

    host.shutdown()
    baseline = _all_lock_lines()
    done: list[Any] = []
    attack = threading.Thread(
        target=lambda: done.append(
            call(
                attacker, ("a21locks", "wait"), "a21locks", "wait", {"count": 10_000, "seconds": 4}
            )
        ),  # fmt: skip
        daemon=True,
    )
    try:
        assert call(benign, ("a21benign", 1), "a21benign", "ping", {}) == "pong"
        assert host._pool._idle.get(("a21benign", 1)), "the control: the benign one is pooled"
        before = _thread_read_bytes()
        assert call(benign, ("a21benign", 1), "a21benign", "ping", {}) == "pong"
        quiet = _thread_read_bytes() - before  # a warm call, no attacker
        attack.start()
        for _ in range(600):
            if _all_lock_lines() >= baseline + 10_000:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the attacker took no locks: {done}")
        before = _thread_read_bytes()
        assert call(benign, ("a21benign", 1), "a21benign", "ping", {}) == "pong"
        read = _thread_read_bytes() - before
        assert read < quiet + (1 << 20), (
            f"a warm call of a well-behaved plugin made the host read {read} bytes "
            f"({quiet} with no attacker): all of /proc/locks, the attacker's locks"
        )
    finally:
        attack.join(90)
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
    from tests.plugins.test_sandbox_site_data_venv_and_pooled_queues import (
        _SECRET,
        _open_up,
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
    _open_up(tmp_path)
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
