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
with it, real, effective, saved or file-system (``in_use``): a lock is never the only
witness that a uid is free (issue 30, sixth attack, finding 1).
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

__all__ = ["DEFAULT_RANGE", "IdentityUnavailable", "OuterIdentity", "acquire", "lock_path"]

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
    """Whether a process visible in ``/proc`` runs with ``uid`` (any of its four ids).
    ``/proc/<pid>`` is owned by the process's effective uid, so only the status of a
    process whose effective uid is root (its real or saved uid may be ``uid``) is read."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return False
    for name in names:
        if not name.isdigit():
            continue
        try:
            owner = os.stat(f"/proc/{name}").st_uid
        except OSError:
            continue  # gone
        if owner not in (0, uid):
            continue
        if owner == uid or _status_uid(name, uid):
            return True
    return False


def _status_uid(pid: str, uid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Uid:"):
                    return str(uid).encode() in line.split()[1:]
    except OSError:
        pass
    return False


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
    """One plugin process's uid and gid outside its namespace, held until ``release``."""

    def __init__(self, uid: int, fd: int) -> None:
        self.uid = uid
        self.gid = uid
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """The process is gone: another may take this uid."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)

    def forget(self) -> None:
        """In a forked child: close this process's copy (the parent keeps the lock)."""
        self.release()


def acquire(first: int, count: int) -> OuterIdentity:
    """A uid of ``first .. first + count - 1`` that no other plugin process of this machine
    holds, locked for the caller.  Raises ``IdentityUnavailable``."""
    try:
        fd = _open_lock()
    except IdentityUnavailable:
        raise
    except OSError as exc:
        raise IdentityUnavailable(exc.errno or errno.EIO, f"lock file: {exc}") from exc
    start = random.randrange(count)
    try:
        for step in range(min(_TRIES, count)):
            uid = first + (start + step) % count
            if _lock(fd, uid):  # the byte at offset uid: the same for every range
                if not in_use(uid):
                    return OuterIdentity(uid, fd)
                _unlock(fd, uid)  # its lock's holder died, its process lives: not free
    except OSError as exc:
        os.close(fd)
        raise IdentityUnavailable(exc.errno or errno.EIO, f"lock: {exc}") from exc
    os.close(fd)
    raise IdentityUnavailable(errno.EBUSY, f"no free uid after {min(_TRIES, count)} tries")
