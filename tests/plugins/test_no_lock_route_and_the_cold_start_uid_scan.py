"""No route to a file lock passes the sandbox's filter, SQLite on a file fails at once there,
and another user's processes do not make a root host read more per cold start.

History: issue 30, round 23, an outside attack; each finding's test failed on the code it
was written against (edffe27), and its docstring keeps the severity, the route and the
gain.  The tests run plugins in their real sandbox (``host.execute``) and observe from the
host side.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
from typing import Any

import pytest

from django_webfetch.plugins.runtime import host, identity
from tests.plugins.test_plugins_take_no_locks_and_linked_data_copies_are_masked import (
    _BENIGN,
    _thread_read_bytes,
)

pytestmark = pytest.mark.django_db


#: How many sleeping processes of another, unprivileged user the next test starts: an
#: ordinary local account may run tens of thousands (``ulimit -u``, ``pid_max``).
_OTHER_PROCESSES = 1_000


def _processes_of(uid: int) -> int:
    """How many processes of the machine run as ``uid`` (their ``/proc`` directory's owner:
    other tests' processes come and go meanwhile, so the whole count proves nothing)."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                continue  # ended while counted
    return count


def test_other_users_processes_do_not_make_each_cold_start_read_all_of_proc(tmp_path):
    """Fixed (decision 0063): a host process keeps the uids it verified, locked, and hands
    a stocked one out without reading ``/proc``; ``launch`` ends whatever still runs with
    it (``kill(-1, SIGKILL)`` as the uid).  History, round 23, finding 1 -- Severity: Low
    (availability; sites run as root, where every plugin process gets an outer uid of its
    own: decision 0047).

    Route: every plugin process start on a root site runs ``identity.acquire``, which,
    after taking the uid's lock, calls ``identity.in_use``: it lists ``/proc`` and opens
    and reads ``/proc/<pid>/status`` of *every* process of the machine, in the thread that
    serves the call.  The number of processes is what any local account can grow: one
    unprivileged user's ``sleep`` processes (here 1,000 of uid 65534; ``ulimit -u`` is
    96,367 on this machine and distributions set ``pid_max`` to 4,194,304) are each read
    at each cold start.  The same class as round 22's finding: a cost of one plugin
    process decided by data any process of the machine can change.

    Measured (``identity.in_use`` alone, best of 5, 2-core machine): 3.8 ms with 125
    processes, 187 ms with 2,126, 463 ms with 10,104 (about 46 us per process).  Gain: an
    unprivileged local account (a tenant, a compromised service, nothing of the site)
    adds about half a second of the site's CPU per 10,000 sleeping processes to every
    plugin process start, in the request thread; a plugin made single-use (any call that
    leaves a thread, a hook or a descriptor: the pool recycles it) pays it on every call.

    Expected: a start reads a bounded amount of ``/proc`` whatever else runs on the
    machine (the uid checked by something that does not scale with the process count:
    e.g. a forked helper that takes the uid and ``kill(-1, SIGKILL)``s whatever still
    runs with it before the uid is handed out, or a cgroup per uid whose ``cgroup.procs``
    is read)."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    if os.geteuid() != 0:
        pytest.skip("the outer uid (and its scan) is a root site's")
    benign = _plugin(tmp_path / "b", "webfetch_procscan", "procscan", _BENIGN,
                     {"ping": "ping"})  # fmt: skip
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)
    key = ("procscan", 1)

    def cold_call(end_the_pool: bool = True) -> int:
        """The bytes this thread reads for one call in a fresh process."""
        if end_the_pool:
            host.shutdown()
        message = {"tool": "ping", "arguments": {}, "config": {}, "plugin": "procscan",
                   "alias": "procscan", "reference": "procscan"}  # fmt: skip
        before = _thread_read_bytes()
        outcome = host.execute(benign, key, message, None, limits=limits)
        read = _thread_read_bytes() - before
        assert outcome.kind == "text" and outcome.text == "pong", outcome
        return read

    others: subprocess.Popen[bytes] | None = None
    try:
        cold_call()  # the first start warms what is read once per host process
        quiet = cold_call()
        # The ended process's uid back in this host's stock (decision 0063): it comes back
        # once the process is reaped (within 2 s; a loaded machine may take longer, and
        # then the uid stays taken, so another start is tried).
        first, size = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1).uid_range
        for _ in range(5):
            host.shutdown()
            if any(first <= uid < first + size for uid in identity.stocked()):
                break
            cold_call(end_the_pool=False)
        else:
            raise AssertionError("no ended plugin process gave its uid back to the stock")
        others = subprocess.Popen(
            [
                "sh",
                "-c",
                f"i=0; while [ $i -lt {_OTHER_PROCESSES} ]; do sleep 300 & "
                "i=$((i+1)); done; echo up; wait",
            ],  # fmt: skip
            stdout=subprocess.PIPE,
            start_new_session=True,
            user=65534,
            group=65534,
            extra_groups=[],
        )
        assert others.stdout is not None and others.stdout.readline() == b"up\n"
        assert _processes_of(65534) >= _OTHER_PROCESSES
        crowded = cold_call(end_the_pool=False)
        assert crowded < quiet + (64 << 10), (
            f"a cold start read {crowded - quiet} more bytes with {_OTHER_PROCESSES} "
            f"processes of another user on the machine ({quiet} without them)"
        )
    finally:
        if others is not None:
            os.killpg(others.pid, signal.SIGKILL)
            others.wait()
            if others.stdout is not None:
                others.stdout.close()
        host.shutdown()


#: A plugin that tries every route to a lock the round-22 fix did not name, with raw
#: system calls made through a trampoline of its own (no ``ctypes`` look-up: the audit
#: hook records ``dlsym``): ``fcntl``'s lock commands with high bits set in the command
#: (seccomp compares 64 bits, the kernel reads ``unsigned int``), leases and
#: delegations, ``flock`` with high bits, ``io_uring``, ``mlock`` and ``MAP_LOCKED``; in
#: tools of their own, the x32 ABI and the 32-bit ``int 0x80`` entry.
_LOCK_ROUTES = r"""
import ctypes, errno, fcntl, json, mmap, struct

_KEPT = []
_FLOCK = "hhxxxxqqi4x"


def _raw():
    if not _KEPT:
        page = mmap.mmap(-1, 4096, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                         mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        # mov rax, rdi; mov rdi, rsi; mov rsi, rdx; mov rdx, rcx; syscall; ret
        page.write(bytes.fromhex("4889f84889f74889d64889ca0f05c3"))
        kind = ctypes.CFUNCTYPE(ctypes.c_long, *[ctypes.c_long] * 4)
        _KEPT.extend([page, kind(ctypes.addressof(ctypes.c_char.from_buffer(page)))])
    return _KEPT[1]


def _call(number, *arguments):
    got = _raw()(number, *(list(arguments) + [0] * (3 - len(arguments))))
    return "taken" if got >= 0 else errno.errorcode.get(-got, str(-got))


def _file():
    import os

    fd = os.open("locked", os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, 4096)
    return fd


def routes(plugin, arguments):
    fd = _file()
    lock = ctypes.create_string_buffer(struct.pack(_FLOCK, fcntl.F_WRLCK, 0, 0, 1, 0), 32)
    where = ctypes.addressof(lock)
    got = {}
    for name, command in [
        ("setlk_high32", 6 | 1 << 32), ("setlkw_high32", 7 | 1 << 32),
        ("ofd_setlk_high32", 37 | 1 << 32), ("ofd_setlkw_high32", 38 | 1 << 32),
        ("setlk_high62", 6 | 1 << 62), ("setlk_negative", 6 - (1 << 32)),
        ("setlease", 1024), ("notify", 1026), ("cmd_1039", 1039), ("cmd_1040", 1040),
    ]:
        got[name] = _call(72, fd, command, where)
    got["flock_high32"] = _call(73, fd, 2 | 4 | 1 << 32)
    got["io_uring_setup"] = _call(425, 8, where)
    got["mlock"] = _call(149, where, 4096)
    try:
        _KEPT.append(mmap.mmap(-1, 4096, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x2000))
        got["map_locked"] = "taken"
    except OSError as exc:
        got["map_locked"] = errno.errorcode.get(exc.errno, str(exc.errno))
    return json.dumps(got)


def x32_flock(plugin, arguments):
    return _call(0x40000000 | 73, _file(), 2 | 4)


def int80_flock(plugin, arguments):
    code = (b"\xb8" + struct.pack("<I", 143) + b"\xbb" + struct.pack("<I", _file())
            + b"\xb9" + struct.pack("<I", 6) + b"\xcd\x80\xc3")
    page = mmap.mmap(-1, 4096, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                     mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    _KEPT.append(page)
    return str(ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))())
"""


def test_no_lock_route_past_the_filter_held(tmp_path, caplog):
    """Held (recorded so the review can trust the negative result): no route to a file
    lock or lease gets past the sandbox's filter.  ``fcntl`` with a lock command whose
    upper 32 bits are set (the kernel's ``cmd`` is an ``unsigned int``, seccomp compares
    all 64) matches neither ``LOCK_COMMANDS`` nor ``FCNTL_COMMANDS`` and is refused by the
    default (``EPERM``); ``F_SETLEASE``, ``F_NOTIFY``, commands 1039/1040, ``io_uring``,
    ``mlock`` and ``MAP_LOCKED``: ``EPERM``; ``flock`` with high bits: ``ENOSYS``; the
    x32 ABI (``0x40000000 | nr``) and the 32-bit ``int 0x80`` entry kill the process
    (``SIGSYS``: libseccomp's bad-architecture action), a crash of that call only."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    origin = _plugin(tmp_path / "site", "webfetch_lockroutes", "lockroutes", _LOCK_ROUTES,
                     {"routes": "routes", "x32": "x32_flock", "int80": "int80_flock"})  # fmt: skip
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)
    key = ("lockroutes", 1)

    def call(tool: str) -> Any:
        message = {"tool": tool, "arguments": {}, "config": {}, "plugin": "lockroutes",
                   "alias": "lockroutes", "reference": "lockroutes"}  # fmt: skip
        return host.execute(origin, key, message, None, limits=limits)

    caplog.set_level(logging.INFO, logger="django_webfetch.plugins")
    host.shutdown()
    try:
        outcome = call("routes")
        assert outcome.kind in ("text", "json") and not outcome.violations, outcome
        got = json.loads(outcome.text)
        refused = dict.fromkeys(got, "EPERM") | {"flock_high32": "ENOSYS"}
        assert got == refused, got
        for tool in ("x32", "int80"):
            with pytest.raises(host.RuntimeFailure, match=f"ended \\({128 + signal.SIGSYS}\\)"):
                call(tool)
    finally:
        host.shutdown()


#: A plugin that uses SQLite as a plugin author would: a database file in its working
#: directory, opened with ``sqlite3.connect`` and its defaults; then the ways round the
#: missing locks (``nolock=1``, ``immutable=1``) and a read-only open of a file.
_SQLITE_ON_A_FILE = r"""
import json, sqlite3


def _try(work):
    try:
        return work()
    except sqlite3.Error as exc:
        return str(exc)


def _write(name, uri=False):
    db = sqlite3.connect(name, uri=uri)
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    db.commit()
    return db.execute("SELECT count(*) FROM t").fetchone()[0]


def _read(name):
    return sqlite3.connect(name, uri=True).execute("SELECT count(*) FROM t").fetchone()[0]


def probe(plugin, arguments):
    return json.dumps({
        "file": _try(lambda: _write("cache.db")),
        "nolock": _try(lambda: _write("file:kept.db?nolock=1", uri=True)),
        "read_only": _try(lambda: _read("file:kept.db?mode=ro")),
        "immutable": _try(lambda: _read("file:kept.db?immutable=1")),
    })
"""


def test_sqlite_on_a_file_fails_at_once_and_nolock_and_immutable_work(tmp_path):
    """Fixed (decision 0062, amended): the lock calls fail ``ENOSYS``, which SQLite reports
    at once.  History, round 23, finding 2 -- Severity: Low (documentation; what a plugin
    author loses to decision 0062).

    Route: a plugin opens a SQLite database file the ordinary way
    (``sqlite3.connect("cache.db")``).  docs/plugins.rst ("A plugin process can take no
    file lock") and decision 0062 say SQLite then fails with ``disk I/O error``
    (``SQLITE_IOERR_LOCK``).  It does not: SQLite maps ``ENOSYS`` to ``SQLITE_BUSY`` (an
    NFS retry error to it), so each statement runs the connection's busy handler until
    its timeout (Python's default: 5 s; measured 5.02 s in the sandbox) and then says
    ``database is locked``, the message of a database another process holds.  Reads fail
    the same way, a read-only open (``mode=ro``) too; ``immutable=1`` and ``nolock=1``
    work (the docs name only ``nolock=1`` and ``:memory:``).

    Gain (for nobody; a cost to plugin authors): a plugin that ships or keeps a SQLite
    file spends 5 s of its call's wall bound per statement before failing with a message
    that points at contention, not at the sandbox; the docs send its author to look for
    an I/O fault.  Expected: the docs (and decision 0062) say what happens (``database is
    locked`` after the busy timeout, reads and ``mode=ro`` included; ``immutable=1`` for
    shipped read-only data), or the lock commands fail with an errno SQLite reports at
    once."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    origin = _plugin(tmp_path / "site", "webfetch_sqlitefile", "sqlitefile", _SQLITE_ON_A_FILE,
                     {"probe": "probe"})  # fmt: skip
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)
    message = {"tool": "probe", "arguments": {}, "config": {}, "plugin": "sqlitefile",
               "alias": "sqlitefile", "reference": "sqlitefile"}  # fmt: skip
    host.shutdown()
    try:
        outcome = host.execute(origin, ("sqlitefile", 1), message, None, limits=limits)
    finally:
        host.shutdown()
    assert outcome.kind in ("text", "json"), outcome
    got = json.loads(outcome.text)
    assert (got["nolock"], got["immutable"]) == (1, 1), got  # the ways round hold
    assert got["file"] == "disk I/O error", got  # what docs/plugins.rst and 0062 say
    assert got["read_only"] == "disk I/O error", got
