"""The identity a plugin process has *outside* its user namespace when the site runs as
root (docs/decisions/0047-a-dedicated-uid-per-plugin-process.rst).

bwrap maps the sandbox's uid 65534 to the uid that started it.  Started by a root site,
that is uid 0: the plugin process would be root as the host sees it (the owner of root's
0600 files, exempt from ``RLIMIT_NPROC``, a process of the site's identity).  So a root
host starts bwrap under a uid and gid of their own, one per plugin process, taken from a
range no account uses (``WEBFETCH_PLUGIN_UID_RANGE``), with no supplementary group.

Two plugin processes never share an outer uid, across every host process of the machine:
each holds an open-file-description lock (``F_OFD_SETLK``) on the byte of its uid in one
root-owned lock file, for as long as its process lives; the kernel drops the lock when
the holder closes it or dies, so nothing is left to clean up.  The byte locked is at the
offset *equal to the uid* (not its index in the caller's range), so two sites whose
ranges overlap, or one site whose range moved while old workers still run, lock the same
byte for the same uid; POSIX record locks may lie beyond the end of the file, which stays
empty.  Host processes that do not share this lock file (separate ``/run`` directories,
as in containers) must be given ranges that do not overlap.

The lock is the host's, and dies with it; the plugin process cannot outlive its host (its
death signal cannot be cleared: ``bubblewrap.PRCTL_OPTIONS``), but a uid is handed out
only when, besides its lock, no process of this PID namespace (and those below it) runs
with it, real, effective, saved or file-system, nor as a group id (``in_use``, which
reads the status of every process): a lock is never the only witness that a uid is free
(issue 30, sixth attack, finding 1; eighth attack, finding 4).

A host process keeps the uids it verified
(docs/decisions/0063-a-host-keeps-the-uids-it-verified.rst): when a plugin process ends,
its uid goes back to this process's stock, still locked, up to ``STOCK_SIZE`` (past it,
the oldest is unlocked); ``acquire`` hands out a stocked uid of the caller's range without
reading ``/proc``.  Held locked since its scan, such a uid can have run only
this host's own plugin processes, and ``launch`` ends whatever of them is left
(``kill(-1, SIGKILL)`` as the uid) before the next starts.  Only a uid new to this host is
scanned (``in_use``).  Every descriptor of the lock file this process holds belongs to
one identity in one registry (``_Registry``: a plugin process's, idle or in a call, a
stocked one, one being acquired); a forked child closes its copies of them all without
unlocking (the parent's keep the locks) and forgets those identities.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import random
import stat
import struct
import tempfile
import threading

__all__ = [
    "DEFAULT_RANGE",
    "STOCK_SIZE",
    "IdentityUnavailable",
    "OuterIdentity",
    "acquire",
    "descriptors",
    "lock_path",
    "stocked",
]

#: (first uid, how many): 2,000,000,000 up to 2,000,999,999, inside systemd's "unused"
#: block above its container ranges (0x80000..0x6FFFFFFF) and below 2^31, far above
#: shadow's ``SUB_UID_MAX`` (600,100,000) and every distribution's account ranges.
DEFAULT_RANGE = (2_000_000_000, 1_000_000)
#: How many uids are tried before giving up (each try is one lock attempt).
_TRIES = 64
_DIRECTORY = "django-webfetch"
_FILE = "plugin-uids.lock"
# struct flock (x86_64 and every LP64 Linux): short l_type, short l_whence, off_t l_start,
# off_t l_len, pid_t l_pid (0 for OFD locks), padding.
_FLOCK = "hhqqi4x"
_F_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", 37)
#: How many verified uids a host process keeps locked after their plugin processes end
#: (decision 0063): enough for a pool's churn, few enough that a host process holds little
#: of the range.
STOCK_SIZE = 8


class IdentityUnavailable(OSError):
    """No outer uid could be taken (``uid_unavailable``)."""


def lock_path() -> str:
    """The lock file every host process of this machine shares: under ``/run`` (root's),
    or the temporary directory where there is no ``/run``."""
    base = "/run" if os.path.isdir("/run") else tempfile.gettempdir()
    return os.path.join(base, _DIRECTORY, _FILE)


def _safe_directory(path: str) -> None:
    """``path`` exists, is a real directory of root's that no one else may write."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != 0 or found.st_mode & 0o022:
        raise IdentityUnavailable(errno.EPERM, f"{path} is not a directory of root's alone")


def _open_lock() -> int:
    path = lock_path()
    _safe_directory(os.path.dirname(path))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode) or found.st_uid != 0:
        os.close(fd)
        raise IdentityUnavailable(errno.EPERM, f"{path} is not a file of root's")
    return fd


def in_use(uid: int) -> bool:
    """Whether a process visible in ``/proc`` runs with ``uid`` as any of its four user ids
    (real, effective, saved, file-system) or, as the plugin process's gid is the same
    number, any of its four group ids or a supplementary group.  The status of *every*
    process is read: ``/proc/<pid>`` belongs to the effective uid alone, so its owner says
    nothing of a real or saved uid (a set-user-ID helper, a service that dropped to another
    account: tests/plugins/test_deep_trees_signal_snapshot_uids_and_dependencies.py).  A process
    that ends while it is read is not in use; one whose status cannot be read is judged by its
    directory's owner."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    wanted = str(uid).encode()
    return any(name.isdigit() and _holds(name, uid, wanted) for name in names)


#: The status lines that name a process's ids.
_ID_LINES = (b"Uid:", b"Gid:", b"Groups:")


def _holds(pid: str, uid: int, wanted: bytes) -> bool:
    """Process ``pid`` has ``uid`` among its ids (``/proc/<pid>/status``: its ``Uid:``,
    ``Gid:`` and ``Groups:`` lines); a process that is gone holds nothing."""
    try:
        fd = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # gone
    except OSError:
        return _owner_is(pid, uid)
    seen = 0
    try:
        with os.fdopen(fd, "rb") as fh:
            for line in fh:
                if line.startswith(_ID_LINES):
                    if wanted in line.split()[1:]:
                        return True
                    seen += 1
                    if seen == len(_ID_LINES):
                        return False
    except ProcessLookupError:
        return False  # ended while read (``ESRCH``)
    except OSError:
        return _owner_is(pid, uid)
    return False if seen else _owner_is(pid, uid)


def _owner_is(pid: str, uid: int) -> bool:
    """``/proc/<pid>`` is ``uid``'s or its group's (its status could not be read)."""
    try:
        info = os.stat(f"/proc/{pid}")
    except OSError:
        return False  # gone
    return uid in (info.st_uid, info.st_gid)


def _unlock(fd: int, offset: int) -> None:
    fcntl.fcntl(fd, _F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_UNLCK, os.SEEK_SET, offset, 1, 0))


def _lock(fd: int, offset: int) -> bool:
    """Take the write lock on byte ``offset`` of the lock file (never waits); the offset
    may lie far beyond the end of the (empty) file, as POSIX record locks allow."""
    request = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)
    try:
        fcntl.fcntl(fd, _F_OFD_SETLK, request)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


class OuterIdentity:
    """One plugin process's uid and gid outside its namespace, held until ``release``.

    Made only by ``acquire`` (through ``_registry``): every one that holds a descriptor of
    the lock file is in ``_registry`` until it gives it up."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid = uid
        self.gid = uid
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """The process is gone: the uid goes back to this host process's stock, still
        locked (``STOCK_SIZE``: a full stock unlocks its oldest for anyone to take).  A
        no-op once released, and in a forked child for an identity of its parent's."""
        _registry.release(self)


class _Registry:
    """Every ``OuterIdentity`` of this process that holds a descriptor of the lock file,
    whatever its state: a plugin process's (idle in the pool or in a call), one being
    acquired (its uid not chosen yet: ``uid`` -1) and the stocked ones (the uids this
    process verified and has held locked since, their processes ended, oldest first).

    Each descriptor is opened and registered, and unregistered and closed, under one lock
    that a fork waits for (``os.register_at_fork``): a forked child finds every descriptor
    it inherited here, and closes its copies of them all, without an ``F_UNLCK`` (an OFD
    lock belongs to the open file description, which the parent's descriptor keeps: the
    lock goes only with the last descriptor of it).  Each identity is then forgotten in
    the child: its ``release`` does nothing there (issue 30, round 24, finding 1: a process
    in a call was in neither the pool's idle list nor the stock, and a child forked then
    kept its uid locked for its whole life)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[OuterIdentity] = set()
        self._stock: list[OuterIdentity] = []

    def open(self) -> OuterIdentity:
        """A new identity, its uid not chosen yet, on a descriptor of its own."""
        with self._lock:
            held = OuterIdentity(-1, _open_lock())
            self._live.add(held)
        return held

    def _close(self, held: OuterIdentity) -> None:
        fd, held._fd = held._fd, -1
        self._live.discard(held)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self, held: OuterIdentity) -> None:
        """Unlock ``held``'s uid for anyone to take (its descriptor closed)."""
        with self._lock:
            self._close(held)

    def release(self, held: OuterIdentity) -> None:
        """Stock ``held``'s uid (its descriptor moved to a new identity: ``held`` gives it
        up); a full stock unlocks its oldest to make room (a uid of a range no longer asked
        for does not hold its slot).  ``STOCK_SIZE`` 0: unlocked at once."""
        with self._lock:
            if held._fd < 0:  # released already, or forgotten at a fork
                return
            if STOCK_SIZE <= 0:
                self._close(held)
                return
            kept = OuterIdentity(held.uid, held._fd)
            held._fd = -1
            self._live.discard(held)
            self._live.add(kept)
            self._stock.append(kept)
            while len(self._stock) > STOCK_SIZE:
                self._close(self._stock.pop(0))

    def take(self, first: int, count: int) -> OuterIdentity | None:
        """The oldest stocked uid of ``first .. first + count - 1``, if any."""
        with self._lock:
            for index, kept in enumerate(self._stock):
                if first <= kept.uid < first + count:
                    del self._stock[index]
                    return kept
        return None

    def uids(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(kept.uid for kept in self._stock)

    def descriptors(self) -> tuple[int, ...]:
        """The descriptors of the lock file this process holds (one per identity)."""
        with self._lock:
            return tuple(sorted(held._fd for held in self._live))

    def before_fork(self) -> None:
        self._lock.acquire()

    def after_fork_in_parent(self) -> None:
        self._lock.release()

    def after_fork_in_child(self) -> None:
        """Close this process's copies of every descriptor (never an ``F_UNLCK``: that
        would unlock the parent's uid) and forget every identity."""
        for held in self._live:
            fd, held._fd = held._fd, -1
            with contextlib.suppress(OSError):
                os.close(fd)
        self._live = set()
        self._stock = []
        self._lock = threading.Lock()  # the forking thread held the parent's


_registry = _Registry()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_registry.before_fork,
        after_in_parent=_registry.after_fork_in_parent,
        after_in_child=_registry.after_fork_in_child,
    )


def stocked() -> tuple[int, ...]:
    """The uids this host process keeps locked for its next plugin processes, oldest first."""
    return _registry.uids()


def descriptors() -> tuple[int, ...]:
    """The descriptors of the lock file this process holds: one per plugin process (idle or
    in a call), per stocked uid and per ``acquire`` under way; none in a child just forked."""
    return _registry.descriptors()


def acquire(first: int, count: int) -> OuterIdentity:
    """A uid of ``first .. first + count - 1`` that no other plugin process of this machine
    holds, locked for the caller: a stocked one first (no scan), else one new to this host
    process, locked and then scanned (``in_use``).  Raises ``IdentityUnavailable``."""
    kept = _registry.take(first, count)
    if kept is not None:
        return kept
    try:
        held = _registry.open()
    except IdentityUnavailable:
        raise
    except OSError as exc:
        raise IdentityUnavailable(exc.errno or errno.EIO, f"lock file: {exc}") from exc
    start = random.randrange(count)
    try:
        for step in range(min(_TRIES, count)):
            uid = first + (start + step) % count
            if _lock(held._fd, uid):  # the byte at offset uid: the same for every range
                if not in_use(uid):
                    held.uid = held.gid = uid
                    return held
                _unlock(held._fd, uid)  # its lock's holder died, its process lives: not free
    except OSError as exc:
        _registry.close(held)
        raise IdentityUnavailable(exc.errno or errno.EIO, f"lock: {exc}") from exc
    _registry.close(held)
    raise IdentityUnavailable(errno.EBUSY, f"no free uid after {min(_TRIES, count)} tries")
