"""Run by a root host in place of bwrap: gives up root, then executes bwrap (docs/decisions/
0047-a-dedicated-uid-per-plugin-process.rst).  Standard library only, no Django: the host
starts it as ``python -I -S -B launch.py PLAN``.

The plan (JSON) names the uid and gid to become, bwrap's command line, and ``cover``: the
directories on the way to a bind source that the new uid may not search (``/root`` is
0700: an interpreter under ``/root/.pyenv``), with ``keep``, the bind sources under them.
Where there is a cover, this process first moves into a mount namespace of its own
(private: nothing propagates back to the host), lays an empty tmpfs (0755) over each
covered directory and binds each kept source back at its own path, so that bwrap, running
as the unprivileged uid, can reach exactly those sources and nothing else of the covered
directory.  bwrap still mounts every source from the file descriptor the host opened and
checks it mounted that very inode (``--ro-bind-fd``).

``tmp`` (where the host asks for it): the plugin's private /tmp, a tmpfs bounded in bytes
and in inodes (``nr_inodes``: bwrap's own ``--tmpfs`` takes a size only), mounted in this
process's mount namespace at ``at`` and bound by bwrap as /tmp.

Then: every capability out of the bounding set, no supplementary group, the gid and the
uid (real, effective, saved) set and checked; as that uid, ``kill(-1, SIGKILL)``: the
kernel ends every process whose real or saved uid is this one (this process excepted), in
this PID namespace and those below it, so that nothing of an earlier plugin process of a
uid the host kept (docs/decisions/0063-a-host-keeps-the-uids-it-verified.rst) still runs
when the next starts; and ``execv(bwrap)``.  Any failure ends this
process with status 1 and one line on stderr, ``webfetch-launch: <what>: <why>``, before
bwrap runs: the host reports it as a sandbox that could not be built.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

_CLONE_NEWNS = 0x00020000
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 0x40000
_PR_CAPBSET_DROP = 24


def _fail(what: str, why: str) -> None:
    sys.stderr.write(f"webfetch-launch: {what}: {why}\n")
    sys.stderr.flush()
    os._exit(1)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        _fail(what, os.strerror(code))


def _makedirs(path: str) -> None:
    """``os.makedirs(path, 0o755, exist_ok=True)`` without recursion (``os.makedirs``
    recurses once per missing level: a bind source's path may have thousands)."""
    missing: list[str] = []
    while path and not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o755)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise


def _private(libc: ctypes.CDLL) -> None:
    """Into a mount namespace of its own, nothing propagating back to the host."""
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "mount private")


def _tmp(libc: ctypes.CDLL, tmp: dict[str, object], uid: int, gid: int) -> None:
    """The plugin's private /tmp, made here because bwrap cannot bound its inodes: a tmpfs
    of ``bytes`` and ``inodes`` (``nr_inodes``: the kernel refuses the file past it), mode
    0700, owned by the unprivileged uid, at ``at`` in this namespace; bwrap binds it."""
    options = (
        f"size={int(str(tmp['bytes']))},nr_inodes={int(str(tmp['inodes']))},"
        f"mode=0700,uid={uid},gid={gid}"
    )
    at = os.fsencode(str(tmp["at"]))
    _check(libc.mount(b"tmpfs", at, b"tmpfs", 0, options.encode()), f"tmpfs at {tmp['at']}")


def _cover(libc: ctypes.CDLL, cover: list[str], keep: list[str]) -> None:
    os.umask(0o022)  # the mount points it makes: searchable by the unprivileged uid
    # Opened before the covers hide them, in this namespace (a mount of another namespace
    # cannot be bound here).
    held = []
    for path in keep:
        try:
            held.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC)))
        except OSError as exc:
            _fail(f"open {path}", exc.strerror or str(exc))
    for directory in cover:
        _check(
            libc.mount(b"tmpfs", os.fsencode(directory), b"tmpfs", 0, b"mode=0755,size=64k"),
            f"tmpfs over {directory}",
        )
    for path, fd in held:
        try:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                _makedirs(path)
            else:
                _makedirs(os.path.dirname(path))
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        except OSError as exc:
            _fail(f"mount point {path}", exc.strerror or str(exc))
        source = f"/proc/self/fd/{fd}".encode()
        # ``os.fsencode``: the path's own bytes (a directory name that is not UTF-8 comes
        # as surrogate escapes, which strict UTF-8 refuses).
        target = os.fsencode(path)
        _check(libc.mount(source, target, None, _MS_BIND | _MS_REC, None), f"bind {path}")
        os.close(fd)


def _drop(libc: ctypes.CDLL, uid: int, gid: int) -> None:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        _fail("set uid and gid", exc.strerror or str(exc))
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        _fail("set uid and gid", "not in force")


def _end_leftovers() -> None:
    """As the plugin uid (after ``_drop``): every other process of it ends (``SIGKILL`` to
    each process whose real or saved uid is this one, the caller excepted); none is
    ``ESRCH``."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass  # no process of this uid
    except OSError as exc:
        _fail("kill(-1) as the plugin uid", exc.strerror or str(exc))


def main(argv: list[str]) -> None:
    plan = json.loads(argv[1])
    uid, gid = int(plan["uid"]), int(plan["gid"])
    if uid <= 0 or gid <= 0:
        _fail("plan", "uid and gid must not be root")
    libc = ctypes.CDLL(None, use_errno=True)
    if plan["cover"] or plan.get("tmp"):
        _private(libc)
    if plan.get("tmp"):
        _tmp(libc, dict(plan["tmp"]), uid, gid)
    if plan["cover"]:
        _cover(libc, list(plan["cover"]), list(plan["keep"]))
    _drop(libc, uid, gid)
    _end_leftovers()
    command = [str(part) for part in plan["argv"]]
    try:
        os.execv(command[0], command)
    except OSError as exc:
        _fail(f"execute {command[0]}", exc.strerror or str(exc))


if __name__ == "__main__":
    main(sys.argv)
