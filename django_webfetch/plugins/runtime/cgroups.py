"""A cgroup per plugin process, where the host can make one: memory that counts every page
the process holds (memfd, tmpfs, shared memory, page cache it dirtied, kernel memory) and
a bound on its threads, on top of the address-space limit and the seccomp refusals.

Where each controller comes from, first found wins:

- ``WEBFETCH_PLUGIN_CGROUP`` (environment): a cgroup v2 directory the operator delegated
  to the site (``memory`` and ``pids`` in its ``cgroup.subtree_control``, writable);
- the cgroup v1 hierarchy of the controller, at the host process's own cgroup, where it is
  writable (a site run as root on a cgroup v1 host).

A cgroup v2 directory of the host process's own cannot take children with controllers
while the host process is in it (the "no internal processes" rule), so it is not used
without the operator's delegation.  Nothing found: ``Cgroup`` is not made, and the limits
are the address space and the refusals (docs/plugins.rst, "Containment").

The plugin process is moved into its cgroup by the host after bwrap started it and before
the host sends its ``setup``: nothing of the plugin has run by then.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from dataclasses import dataclass

__all__ = ["Cgroup", "available", "make"]

#: Threads (and processes: none can start) of one plugin process.
MAX_PIDS = 64


@dataclass(frozen=True)
class _Controller:
    version: int
    directory: str  # where the per-process child cgroups are made


def _mounts() -> dict[str, tuple[str, str]]:
    """cgroup mount point by controller (v1) and ``"v2"``: (type, mount point)."""
    found: dict[str, tuple[str, str]] = {}
    try:
        with open("/proc/self/mountinfo") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point, kind, options = fields[4], tail[0], tail[2].split(",")
        if kind == "cgroup2":
            found.setdefault("v2", (kind, point))
        elif kind == "cgroup":
            for option in options:
                found.setdefault(option, (kind, point))
    return found


def _own(controller: str) -> str | None:
    """The host process's cgroup path in the v1 hierarchy of ``controller``."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _number, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return None


def _writable(directory: str) -> bool:
    return os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK)


def _controller(name: str) -> _Controller | None:
    delegated = os.environ.get("WEBFETCH_PLUGIN_CGROUP", "")
    if delegated and _writable(delegated):
        with (
            contextlib.suppress(OSError),
            open(os.path.join(delegated, "cgroup.subtree_control")) as fh,
        ):
            if name in fh.read().split():
                return _Controller(2, delegated)
    mounts = _mounts()
    if name in mounts:
        own = _own(name)
        if own is not None:
            directory = os.path.join(mounts[name][1], own.lstrip("/"))
            if _writable(directory):
                return _Controller(1, directory)
    return None


def available() -> dict[str, str]:
    """``{"memory": "v1"|"v2", "pids": ...}`` for the controllers this host can use."""
    found = {}
    for name in ("memory", "pids"):
        controller = _controller(name)
        if controller is not None:
            found[name] = f"v{controller.version}"
    return found


class Cgroup:
    """The cgroups of one plugin process (one per controller found)."""

    def __init__(self, label: str, memory_bytes: int) -> None:
        self.directories: list[str] = []
        self.kinds: dict[str, str] = {}
        settings = {
            "memory": {
                1: [("memory.limit_in_bytes", memory_bytes), ("memory.swappiness", 0)],
                2: [("memory.max", memory_bytes), ("memory.swap.max", 0)],
            },
            "pids": {1: [("pids.max", MAX_PIDS)], 2: [("pids.max", MAX_PIDS)]},
        }
        for name, by_version in settings.items():
            controller = _controller(name)
            if controller is None:
                continue
            directory = os.path.join(controller.directory, f"webfetch-plugin-{label}")
            try:
                os.mkdir(directory)
            except OSError:
                continue
            try:
                for file, value in by_version[controller.version]:
                    with open(os.path.join(directory, file), "w") as fh:
                        fh.write(str(value))
            except OSError:
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
                continue
            self.directories.append(directory)
            self.kinds[name] = f"v{controller.version}"

    def enter(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into every cgroup made."""
        for directory in self.directories:
            with open(os.path.join(directory, "cgroup.procs"), "w") as fh:
                fh.write(str(pid))

    def remove(self, wait_seconds: float = 2.0) -> None:
        """Remove every cgroup made.  A cgroup with a process still in it (one being reaped
        after SIGKILL) cannot be removed yet (EBUSY): asked again, briefly, so that no
        directory is left behind."""
        deadline = time.monotonic() + wait_seconds
        left = list(self.directories)
        while left:
            busy = []
            for directory in left:
                try:
                    os.rmdir(directory)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno == errno.EBUSY:
                        busy.append(directory)
            left = busy
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        self.directories = left


def make(label: str, memory_bytes: int) -> Cgroup:
    return Cgroup(label, memory_bytes)
