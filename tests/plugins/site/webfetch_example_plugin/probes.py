"""What a hostile plugin tries against its host from inside its process (issue 30,
tests/plugins/test_plugin_process_cannot_reach_the_site.py and test_containment.py).
``probe(plugin, arguments)`` runs the probe named ``arguments["probe"]`` and returns what each
attempt got: ``"done"`` (the call succeeded: whether that reached the host is asserted on the host
side) or
``"refused: <OSError class> errno=N"``.  ``target`` is a host pid (or process group) the
test chose: the plugin could not learn it in a sandbox, but a hostile one would guess.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

#: What a probe keeps alive after its call returned (memory held while idle in the pool).
KEPT: list[Any] = []

_F_SETSIG = 10


def _try(action: Callable[[], Any]) -> str:
    try:
        action()
    except OSError as exc:
        return f"refused: {type(exc).__name__} errno={exc.errno}"
    except Exception as exc:
        return f"refused: {type(exc).__name__}"
    return "done"


def _syscall(number: int, *args: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(number, *[ctypes.c_long(a) for a in args]) < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _sigio(target: int, sig: int) -> None:
    """A signal without kill(): the kernel sends ``sig`` to the pipe's owner (a negative
    ``target`` is a process group) when data arrives on an O_ASYNC pipe."""
    read, write = os.pipe()
    try:
        fcntl.fcntl(read, fcntl.F_SETOWN, target)
        fcntl.fcntl(read, _F_SETSIG, sig)
        fcntl.fcntl(read, fcntl.F_SETFL, fcntl.fcntl(read, fcntl.F_GETFL) | os.O_ASYNC)
        os.write(write, b"x")
    finally:
        os.close(read)
        os.close(write)


def probe_setown(target: int) -> dict[str, str]:
    return {
        "sigio_group_kill": _try(lambda: _sigio(-target, signal.SIGKILL)),
        "sigio_process_stop": _try(lambda: _sigio(target, signal.SIGSTOP)),
    }


def probe_sched(target: int) -> dict[str, str]:
    group = target
    return {
        "sched_setscheduler": _try(
            lambda: os.sched_setscheduler(target, os.SCHED_IDLE, os.sched_param(0))
        ),
        "setpriority_group": _try(lambda: os.setpriority(os.PRIO_PGRP, group, 19)),
        "setpriority_process": _try(lambda: os.setpriority(os.PRIO_PROCESS, target, 19)),
        "sched_setaffinity": _try(lambda: os.sched_setaffinity(target, {0})),
        # ioprio_set(IOPRIO_WHO_PROCESS, pid, IOPRIO_CLASS_IDLE << 13)
        "ioprio_set": _try(lambda: _syscall(251, 1, target, 3 << 13)),
    }


def probe_memfd(size: int) -> dict[str, str]:
    def hold() -> None:
        fd = os.memfd_create("held")
        chunk = b"\1" * (1 << 20)
        for _ in range(size >> 20):
            os.write(fd, chunk)
        KEPT.append(fd)

    def shared() -> None:
        area = mmap.mmap(-1, size, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        area.write(b"\1" * size)
        KEPT.append(area)

    def tmpfs() -> None:
        with open("/dev/shm/held", "wb") as fh:
            fh.write(b"\1" * size)

    return {"memfd": _try(hold), "shared_anonymous": _try(shared), "dev_shm": _try(tmpfs)}


def probe_thread() -> dict[str, str]:
    def spin() -> None:
        while True:
            pass

    threading.Thread(target=spin, daemon=True).start()
    return {"thread": "started"}


def probe_syscalls(numbers: str) -> dict[str, str]:
    """Each system call of ``numbers`` (comma-separated), all arguments 0: ``ok`` or the
    errno's name."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    found = {}
    for number in (int(n) for n in numbers.split(",") if n):
        ctypes.set_errno(0)
        result = libc.syscall(ctypes.c_long(number), *([ctypes.c_long(0)] * 6))
        code = ctypes.get_errno()
        found[str(number)] = "ok" if result >= 0 else errno.errorcode.get(code, str(code))
    return found


def probe_hostname() -> dict[str, str]:
    return {"sethostname": _try(lambda: socket.sethostname("plugin-was-here"))}


def probe(plugin: Any, arguments: dict[str, Any]) -> dict[str, str]:
    # The audit hook's host window, a public name any plugin can open: what stops a probe
    # is the process's containment, not the in-process safety net.
    from django_webfetch.plugins.sandbox import host_io

    with host_io():
        return _probe(arguments)


def _probe(arguments: dict[str, Any]) -> dict[str, str]:
    name = arguments["probe"]
    target = int(arguments.get("target") or 0)
    if name == "setown":
        return probe_setown(target)
    if name == "sched":
        return probe_sched(target)
    if name == "memfd":
        return probe_memfd(int(arguments.get("size") or 256 << 20))
    if name == "thread":
        return probe_thread()
    if name == "hostname":
        return probe_hostname()
    if name == "syscalls":
        return probe_syscalls(str(arguments.get("path") or ""))
    if name == "thread_bomb":
        from .hostile import _threads

        return {"thread_bomb": _threads(5000)}
    if name == "all":
        from .hostile import everything

        return everything(
            target, int(arguments.get("victim") or 0), str(arguments.get("path") or "")
        )
    raise ValueError(f"unknown probe {name!r}")


__all__ = ["KEPT", "errno", "probe"]
