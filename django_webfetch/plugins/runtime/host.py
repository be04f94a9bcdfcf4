"""The host side of the plugin runtime: spawns and pools plugin processes, speaks the RPC,
enforces the limits, and performs each request the plugin makes with the host-owned client
(``plugins.client.PluginHttp``: the instance's authority, read per request).

A call ends ``failed`` with a stable code when the process does not behave:

``plugin_crashed``                the process died or broke the protocol
``plugin_timeout``                no answer within ``WEBFETCH_PLUGIN_WALL_SECONDS``
``plugin_limit``                  CPU time, memory, output size or requests per call exceeded
``plugin_protocol_error``         the process sent a message the protocol does not allow
                                  (a field of the wrong type, an answer to no call)
``plugin_isolation_unavailable``  this host cannot build the plugin sandbox (the detail
                                  starts with a reason of ``bubblewrap.REASONS``)

and the process is killed; the host is untouched either way.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import ctypes
import fcntl
import hashlib
import itertools
import json
import logging
import math
import os
import queue
import re
import resource
import signal
import socket
import stat
import struct
import subprocess
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

from django_webfetch.net.errors import (
    EgressDenied,
    FetchError,
    FetchTimeout,
    ResolutionError,
    ResponseTooLarge,
    WebFetchError,
)
from django_webfetch.net.transport import Cancellation
from django_webfetch.plugins.manifest import MAX_MANIFEST_BYTES, MAX_TOOLS
from django_webfetch.plugins.provenance import WALK_DEPTH, WALK_ENTRIES, Memo, real_path

from . import bubblewrap, cgroups, identity
from .protocol import (
    MAX_REFUSED_CHARS,
    MAX_REFUSED_PATHS,
    SLICE,
    Channel,
    ChannelClosed,
    ChannelTimeout,
    MessageTooLarge,
    ProtocolError,
    UnencodableMessage,
    decode_bytes,
    encode,
    parse,
    readable,
)
from .protocol import encode_bytes as _encode

__all__ = [
    "CallOutcome",
    "IsolationUnavailable",
    "Limits",
    "Origin",
    "PATH_UNSAFE",
    "READY_BYTES",
    "ReadDeferred",
    "RuntimeFailure",
    "backoff",
    "capabilities",
    "describe",
    "execute",
    "idle_processes",
    "isolation_label",
    "manifest_bytes",
    "reason_of",
    "shutdown",
    "site_stamp",
    "stamp",
    "stamp_trees",
]

logger = logging.getLogger("django_webfetch.plugins")
_T = TypeVar("_T")

#: A process serves at most this many calls, then a fresh one takes over.
MAX_CALLS_PER_PROCESS = 100
#: Idle processes kept by one host process, all instances together.
MAX_IDLE_PROCESSES = 32
#: The sandbox's own start (interpreter, guest, limits: no plugin code yet) may take this
#: long; the plugin's import after it has the wall, CPU and thread bounds of a call.
STARTUP_SECONDS = _STARTUP_SECONDS = 30.0
#: Threads of a plugin process (the guest's ``RLIMIT_NPROC`` too): the host kills it above,
#: during a call and during its import (``Threads:`` of ``/proc/<pid>/status``).
MAX_THREADS = 64
#: Files and directories in a plugin process's private ``/tmp``: each holds kernel memory
#: (an inode, a dentry) however few bytes it has.  On a root host the kernel refuses the
#: inode past it (the tmpfs's ``nr_inodes``: ``launch``); elsewhere the host kills the
#: process above (``Worker.bounds``, watched for the whole call: ``_Watch``).
MAX_TMP_FILES = bubblewrap.TMP_FILES
#: What a call may leave in a process the pool keeps: bytes resident or swapped (``VmRSS``,
#: ``VmSwap``) and in its private ``/tmp`` beyond what the process held when it got ready.
#: A call that leaves more ends its process instead of idling with it (a call may use up to
#: ``WEBFETCH_PLUGIN_MEMORY_BYTES``; an idle process keeps at most this much of it).
MAX_IDLE_GROWTH = 16 * 1024 * 1024
#: Manifest reads that failed, remembered per package files (``describe``): at most this
#: many (the least recently used forgotten first; each key is a few hundred bytes: the
#: stamp is a digest), each answered without a plugin process for ``_REMEMBER_SECONDS``
#: after its first failure, twice as long after each further failure of the same files,
#: at most ``_REMEMBER_MAX_SECONDS`` (a failure of a busy moment, a timeout, is not kept
#: for the process's life; a package that keeps failing is read ever more rarely), from
#: the first again when its files change (another stamp): decision 0055.
_MAX_REMEMBERED = 4096
_REMEMBER_SECONDS = 600.0
_REMEMBER_MAX_SECONDS = 4 * 3600.0
#: The most bytes of a guest's ``ready`` (the answer to ``import``) the host reads: a
#: manifest of ``MAX_MANIFEST_BYTES`` (as ``manifest._size`` counts it; its handlers are
#: ``true``/``false`` on the wire, at most one more byte each for ``MAX_TOOLS`` tools), 100
#: violations cut as the guest cuts them (355 characters, at most 4 bytes each, with their
#: port and punctuation) and the envelope.  A longer ``ready`` is refused from its length
#: (``manifest_too_large``) before its body is read: what a manifest read costs the host
#: is bounded by the manifest's own limit, not by the channel's (``2 x
#: WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES + 1 MiB``):
#: tests/plugins/test_release_during_a_call_and_registry_load_cost.py, finding 3.
READY_BYTES = MAX_MANIFEST_BYTES + MAX_TOOLS + 100 * (4 * 355 + 64) + 4096
#: Why a process was not pooled when, stopped, its kernel state (signals, filters,
#: capabilities, ids: ``_KERNEL_FIELDS``) was not what it was before its plugin was imported.
KERNEL_CHANGED = "plugin_kernel_state_changed"
#: How long a thread of a call is waited for to leave before its process is called busy and
#: recycled: a far safety net (a joined thread leaves within its next time slices; a fixed
#: number of looks over 50 ms made pooling depend on the machine's load).
_QUIET_WAIT = 2.0
#: Logged (once per host process) when the kernel refuses the host a plugin process's
#: per-call CPU limit (``Worker.limit_cpu``: ``prlimit`` needs the process's own uid, or
#: ``CAP_SYS_RESOURCE``): the host's checks (``recv``'s poll, ``_Watch``) hold it alone.
CPU_LIMIT_UNAVAILABLE = "plugin_cpu_limit_unavailable"
_cpu_limit_refused = False
#: Why a process was not pooled when it held other descriptors than when it got ready
#: (``Worker.descriptors_changed``: which ones, not how many).
DESCRIPTORS_CHANGED = "plugin_descriptors_changed"
#: Why a process was not pooled when it held a descriptor of a kind that can queue data
#: (a socket besides its channel, a pipe, a FIFO, any kind not known to hold none:
#: ``_queueing``), or its channel held bytes one end had not read: kernel memory in no
#: ``VmRSS``, which its call may have filled while every descriptor stayed the same one
#: (tests/plugins/test_sandbox_site_data_venv_and_pooled_queues.py, finding 5; decision 0059).
QUEUES_HELD = "plugin_queues_held"
#: Character devices (major, minor) that queue nothing: ``/dev/null``, ``/dev/zero``,
#: ``/dev/full``, ``/dev/random``, ``/dev/urandom`` (the sandbox's ``/dev`` has the first,
#: second and last only).  Any other device may (a terminal, a ``/dev/ptmx``).
_QUIET_DEVICES = frozenset({(1, 3), (1, 5), (1, 7), (1, 8), (1, 9)})
#: Anonymous inodes (their ``/proc/<pid>/fd`` link) that queue nothing: an eventfd holds
#: one counter, an epoll its watches, both shown in ``fdinfo`` (``_descriptors``: a call
#: that changes either changes the descriptor).  Any other (an inotify's event queue, a
#: signalfd, a timerfd, a kind a later kernel adds) counts as queueing.
_QUIET_ANONYMOUS = frozenset({"anon_inode:[eventfd]", "anon_inode:[eventpoll]"})
#: Why a process was not pooled when it held a file lock, or its locks could not be told
#: within the bounds (``Worker.holds_locks``): a lock the site needs, or the kernel memory
#: of many, would idle with it (decision 0060, amended for issue 30, round 21).
HOLDS_LOCKS = "plugin_holds_locks"
#: Why an idle process was ended, not handed a call: what decides the masks
#: (``bubblewrap.site_inputs``: a setting naming the site's data, the working directory;
#: ``bubblewrap.Reading``: a directory whose listing decided them, the files the host
#: writes) changed since it started (issue 30, round 24, finding 4; round 26, 2 and 7).
SITE_CHANGED = "plugin_site_changed"
#: Why a request the host performed for a call failed when the call ended before it did
#: (a ``net.failures`` sub-code: its hop is recorded with it; ``_Watch.end``).
CALL_ENDED = "plugin_call_ended"
#: How long past the call's deadline a request's own timeout runs: a backstop only (the
#: call's watch ends it at the deadline, within a ``SLICE``).
REQUEST_MARGIN = 1.0
_call_ids = itertools.count(1)
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class RuntimeFailure(Exception):
    """A plugin process misbehaved; ``code`` is the stable reason."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(detail or code)
        self.code = code
        self.detail = detail


class IsolationUnavailable(RuntimeFailure):
    def __init__(self, detail: str = "") -> None:
        super().__init__("plugin_isolation_unavailable", detail)


class ReadDeferred(RuntimeFailure):
    """A manifest read cut by the caller's ``deadline`` (a registry load's budget), not by
    the plugin's own limits: nothing is remembered of it, a later load reads it again."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("plugin_read_deferred", detail)


@dataclass(frozen=True)
class Origin:
    """Where a plugin's code is: the entry point (``module:attr``), the ``sys.path`` entry
    it was found on and its top-level package."""

    entry: str
    path: str
    top_level: str


@dataclass(frozen=True)
class Limits:
    cpu_seconds: float
    wall_seconds: float
    memory_bytes: int
    max_output_bytes: int
    max_requests: int
    pool_size: int
    #: Where a root host takes each plugin process's own uid and gid (first, how many).
    uid_range: tuple[int, int] = identity.DEFAULT_RANGE

    @classmethod
    def from_settings(cls) -> Limits:
        from django_webfetch.conf import conf

        return cls(
            cpu_seconds=conf.WEBFETCH_PLUGIN_CPU_SECONDS,
            wall_seconds=conf.WEBFETCH_PLUGIN_WALL_SECONDS,
            memory_bytes=conf.WEBFETCH_PLUGIN_MEMORY_BYTES,
            max_output_bytes=conf.WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES,
            max_requests=conf.WEBFETCH_PLUGIN_MAX_REQUESTS,
            pool_size=conf.WEBFETCH_PLUGIN_POOL_SIZE,
            uid_range=conf.WEBFETCH_PLUGIN_UID_RANGE,
        )


@dataclass
class CallOutcome:
    """What the plugin's tool ended with (``kind``), as the guest reported it."""

    kind: str
    text: str = ""
    ok: bool = True
    reason: str = ""
    code: str = ""
    error: str = ""
    violations: list[tuple[str, str, int | None]] = field(default_factory=list)
    #: A ``json`` result's value, read from ``text`` by ``protocol.parse`` (bounded as a
    #: message is): the host never parses a guest's text any other way.
    value: Any = None


# -- one process -------------------------------------------------------------------------


class _Spawner:
    """One long-lived thread per host process that starts every plugin sandbox.

    bwrap's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) fires when the *thread* that
    forked it ends, not the process: a sandbox started from a request's short-lived thread
    would die with that thread.  Started from this thread, which lives as long as the
    process, a sandbox dies exactly when the host process does (tests/plugins/
    test_plugin_process_cannot_reach_the_site.py::test_thread_death_a_call_from_a_short_lived_thread_leaves_its_process_usable).
    A forked host (Celery prefork) starts its own thread on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pid = -1

    def _serve(self) -> None:
        while True:
            argv, kwargs, done = self._queue.get()
            try:
                done.set_result(subprocess.Popen(argv, **kwargs))
            except BaseException as exc:
                done.set_exception(exc)

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._pid != os.getpid():
                self._queue = queue.SimpleQueue()
                threading.Thread(
                    target=self._serve, name="webfetch-plugin-spawner", daemon=True
                ).start()
                self._pid = os.getpid()
            work = self._queue
        done: concurrent.futures.Future[subprocess.Popen[bytes]] = concurrent.futures.Future()
        work.put((argv, kwargs, done))
        return done.result()


_spawner = _Spawner()


class _Descriptors:
    """Every descriptor this host process holds for its plugin processes: each one's channel
    (the host end of its socketpair) for as long as the process lives, idle in the pool or
    in a call, and while one starts, the guest's end, bwrap's info pipe and error file, the
    filter programs and the bind sources.  (Its outer uid's lock is ``identity``'s, in a
    registry of its own; a ``Popen`` holds no descriptor here: no pipe, no pidfd.)

    Each is opened and registered, and unregistered and closed, under one lock that a fork
    waits for (``os.register_at_fork``): a forked child finds every one it inherited here
    and closes its copies of them all, so that it holds no plugin process's channel (issue
    30, round 24, finding 1: the pool closed its idle processes' channels only; a child
    forked during a call kept that process's open, and a start's pipes and guest end) and
    the parent's close is the last one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fds: set[int] = set()
        self._objects: dict[int, Any] = {}

    def _add(self, made: Any) -> None:
        if isinstance(made, int):
            self._fds.add(made)
        else:
            self._objects[id(made)] = made

    def opened(self, opener: Callable[[], _T], parts: Callable[[_T], Iterable[Any]]) -> _T:
        """What ``opener`` returns, each of its ``parts`` (a descriptor, a socket, a file)
        registered before a fork can come between."""
        with self._lock:
            made = opener()
            for part in parts(made):
                self._add(part)
        return made

    def close(self, *held: Any) -> None:
        """Unregister and close each of ``held`` (a descriptor not registered here is left
        alone: in a forked child, its number may be another's by now)."""
        with self._lock:
            for one in held:
                if isinstance(one, int):
                    if one in self._fds:
                        self._fds.discard(one)
                        with contextlib.suppress(OSError):
                            os.close(one)
                else:
                    self._objects.pop(id(one), None)
                    with contextlib.suppress(OSError):
                        one.close()

    def held(self) -> tuple[int, ...]:
        """The numbers of the descriptors held here."""
        with self._lock:
            numbers = set(self._fds)
            for one in self._objects.values():
                with contextlib.suppress(ValueError):  # a closed file's
                    numbers.add(one.fileno())
        return tuple(sorted(number for number in numbers if number >= 0))

    def before_fork(self) -> None:
        self._lock.acquire()

    def after_fork_in_parent(self) -> None:
        self._lock.release()

    def after_fork_in_child(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        for one in self._objects.values():
            with contextlib.suppress(OSError):
                one.close()  # a socket or an unbuffered file: nothing to flush, no lock
        self._fds = set()
        self._objects = {}
        self._lock = threading.Lock()  # the forking thread held the parent's


_descriptors_held = _Descriptors()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_descriptors_held.before_fork,
        after_in_parent=_descriptors_held.after_fork_in_parent,
        after_in_child=_descriptors_held.after_fork_in_child,
    )


def held_descriptors() -> tuple[int, ...]:
    """The descriptors this host process holds for its plugin processes (their channels, and
    a start's pipes): none in a child just forked (the uid locks: ``identity.descriptors``)."""
    return _descriptors_held.held()


def _both(pair: tuple[Any, Any]) -> tuple[Any, Any]:
    return pair


def _alone(one: Any) -> tuple[Any]:
    return (one,)


def _read_info(fd: int, deadline: float) -> dict[str, Any]:
    """bwrap's ``--info-fd`` JSON (``child-pid``: the plugin process, as the host sees it)."""
    data = b""
    while time.monotonic() < deadline:
        if not readable(fd, max(0.0, deadline - time.monotonic())):
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        with contextlib.suppress(ValueError):
            found = json.loads(data)
            if isinstance(found, dict):
                return found
    return {}


def _thread_ids(pid: int) -> set[int]:
    """The ids of the threads of ``pid`` (``/proc/<pid>/task``; none when it is gone)."""
    try:
        return {int(tid) for tid in os.listdir(f"/proc/{pid}/task")}
    except (OSError, ValueError):
        return set()


def _threads(pid: int) -> int:
    """``Threads:`` of ``/proc/<pid>/status`` (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return 0


def _tmp_files(pid: int) -> int:
    """Inodes in use on the private ``/tmp`` of process ``pid`` (a tmpfs of its own), as
    the host sees it through ``/proc/<pid>/root``; 0 when it is gone.  Where the tmpfs has
    no inode count (``nr_inodes=0``) its entries are counted, stopping past the bound."""
    root = f"/proc/{pid}/root/tmp"
    try:
        found = os.statvfs(root)
    except OSError:
        return 0
    if found.f_files:
        return int(found.f_files - found.f_ffree)
    counted, todo = 0, [root]
    while todo and counted <= MAX_TMP_FILES:
        with contextlib.suppress(OSError), os.scandir(todo.pop()) as entries:
            for entry in entries:
                counted += 1
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                if counted > MAX_TMP_FILES:
                    break
    return counted


#: A descriptor's identity as the host reads it: its number, what its link names
#: (``socket:[inode]``, ``pipe:[inode]``, a path), the device and inode it leads to, and its
#: ``fdinfo`` but the offset (flags, mount, and what the kernel says of its kind: an
#: eventfd's id and count, an epoll's watches).
Descriptor = tuple[int, str, int, int, bytes]


def _descriptors(pid: int) -> tuple[Descriptor, ...] | None:
    """Which file descriptors plugin process ``pid`` holds (``/proc/<pid>/fd``, each as
    ``Descriptor``), or ``None`` when any cannot be read.  A call that swaps one for
    another (``dup2`` of a socket whose buffers hold kernel memory over ``/dev/null``)
    changes it, however many it holds:
    tests/plugins/test_sandbox_kernel_memory_cpu_inodes_and_bytecode.py."""
    found: list[Descriptor] = []
    try:
        numbers = sorted(int(name) for name in os.listdir(f"/proc/{pid}/fd"))
        for fd in numbers:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            info = os.stat(f"/proc/{pid}/fd/{fd}")
            with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as fh:
                kept = b"\n".join(
                    line for line in fh.read(1 << 16).splitlines() if not line.startswith(b"pos:")
                )
            found.append((fd, link, info.st_dev, info.st_ino, kept))
    except (OSError, ValueError):
        return None
    return tuple(found)


def _queueing(link: str, mode: int, rdev: int) -> bool:
    """Whether a descriptor whose ``/proc/<pid>/fd`` link is ``link``, and whose inode
    has ``mode`` and ``rdev`` (``os.stat`` of that link), is of a kind that can hold data
    queued in kernel memory outside the process's footprint (``_footprint``).  Known not to
    are: a regular file or a directory of a mounted file system but ``/proc`` (a regular
    file's bytes are on a disk, or in the private ``/tmp``, which the footprint counts), a
    device of ``_QUIET_DEVICES``, an anonymous inode of ``_QUIET_ANONYMOUS``.  Every other
    kind can (a socket, a pipe, a FIFO, a ``memfd``'s pages, a ``/proc`` file's buffers,
    a namespace, an inotify), however empty it is now."""
    if link.startswith("/"):
        if link.startswith(("/memfd:", "/proc/")) or link == "/proc":
            return True
        if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
            return False
        return not (stat.S_ISCHR(mode) and (os.major(rdev), os.minor(rdev)) in _QUIET_DEVICES)
    return link not in _QUIET_ANONYMOUS


def _queues(
    pid: int, channel: int, own: frozenset[tuple[int, str, int, int]] = frozenset()
) -> list[str] | None:
    """The links of the descriptors plugin process ``pid`` holds that can queue data
    (``_queueing``), its channel (the socket of inode ``channel``) aside, and the regular
    files of ``own`` (number, link, device, inode: the guest's own, opened before any
    plugin code ran, as its ``/proc/self/status``, whose buffer holds one status text);
    ``None`` when any cannot be read."""
    found: list[str] = []
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            link = os.readlink(f"/proc/{pid}/fd/{name}")
            if link == f"socket:[{channel}]":
                continue
            info = os.stat(f"/proc/{pid}/fd/{name}")
            if stat.S_ISREG(info.st_mode) and ((int(name), link, info.st_dev, info.st_ino) in own):
                continue
            if _queueing(link, info.st_mode, info.st_rdev):
                found.append(link)
    except (OSError, ValueError):
        return None
    return found


def _queued(sock: socket.socket) -> int:
    """Bytes in either direction of the connected ``sock`` (the host's end of a channel)
    that their reader has not read: ``SIOCINQ``, what it has to read, and ``SIOCOUTQ``,
    what it sent that its peer has not read (for ``AF_UNIX``, the buffers still charged to
    it); ``-1`` when either cannot be read."""
    total = 0
    try:
        for request in (termios.FIONREAD, termios.TIOCOUTQ):  # SIOCINQ, SIOCOUTQ
            (count,) = struct.unpack("i", fcntl.ioctl(sock.fileno(), request, b"\0" * 4))
            total += count
    except (OSError, ValueError):
        return -1
    return total


def _locks(pid: int) -> list[bytes] | None:
    """The file locks plugin process ``pid`` holds on its descriptors, as the kernel shows
    them (the ``lock:`` lines of each descriptor's ``fdinfo``; ``None``: it cannot be
    told).  The sandbox refuses every call that takes a lock (``flock`` and the
    ``LOCK_COMMANDS`` of ``fcntl`` fail with ``ENOSYS``: ``bubblewrap``), so a plugin
    process holds none, on a descriptor or kept by a mapping; this reads what the kernel
    says of the process itself, a second line behind the filter, never the machine's lock
    table (``/proc/locks``: every lock of every process, which another process can make as
    long as it likes; issue 30, round 22; decision 0062)."""
    found: list[bytes] = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fdinfo"):
            with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as fh:
                found += [
                    line.partition(b":")[2] for line in fh.read(1 << 16).splitlines()
                    if line.startswith(b"lock:")
                ]  # fmt: skip
    except (OSError, ValueError):
        return None
    return found


def _status(pid: int) -> bytes | None:
    """``/proc/<pid>/status`` as the host reads it (``None``: gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            return fh.read(1 << 16)
    except OSError:
        return None


def _footprint(pid: int, status: bytes | None = None) -> int | None:
    """Bytes plugin process ``pid`` holds that a call can leave behind, as the host sees
    them: resident and swapped memory (``VmRSS``, ``VmSwap`` of ``/proc/<pid>/status``,
    or of ``status`` read from it) and the bytes of its private ``/tmp`` (a tmpfs: its
    pages are in neither); ``None`` when its status cannot be read (it is gone)."""
    total = 0
    try:
        status = _status(pid) if status is None else status
        if status is None:
            return None
        fields = dict(line.split(b":", 1) for line in status.split(b"\n") if b":" in line)
        for name in (b"VmRSS", b"VmSwap"):
            total += int(fields[name].split()[0]) * 1024  # kB
    except (OSError, KeyError, IndexError, ValueError):
        return None
    with contextlib.suppress(OSError):  # as ``_tmp_files``: gone with its process
        tmp = os.statvfs(f"/proc/{pid}/root/tmp")
        total += (tmp.f_blocks - tmp.f_bfree) * tmp.f_frsize
    return total


#: What of ``/proc/<pid>/status`` no call may change in a process the pool keeps, read by
#: the host (where no plugin code can write, unlike the guest's own snapshot): every
#: signal's state (pending, blocked, ignored, caught: a handler a call sets runs when the
#: host continues the process for the next call, or when the kernel sends it a signal
#: then), its seccomp filters and no-new-privileges flag, its capabilities and ids.
_KERNEL_FIELDS = (
    b"SigPnd",
    b"ShdPnd",
    b"SigBlk",
    b"SigIgn",
    b"SigCgt",
    b"NoNewPrivs",
    b"Seccomp",
    b"Seccomp_filters",
    b"CapInh",
    b"CapPrm",
    b"CapEff",
    b"CapBnd",
    b"CapAmb",
    b"Uid",
    b"Gid",
    b"Groups",
)
#: How long the host looks for a process it stopped to be stopped before it is not pooled
#: (``Worker.stopped_status``): a far safety net (a stopped process is seen stopped at its
#: next time slice, a few milliseconds even on a busy machine; a fixed number of looks
#: made pooling depend on the machine's load).  The first looks only yield the CPU, then
#: up to 1 ms apart.
_STOP_WAIT = 5.0
_STOP_YIELDS = 10


def _kernel_state(
    pid: int, *, stopped: bool = False, status: bytes | None = None
) -> tuple[bytes, ...] | None:
    """``_KERNEL_FIELDS`` of ``/proc/<pid>/status`` (or of ``status`` read from it), read
    by the host; ``None`` when it cannot be read, lacks a field, or (``stopped``) the
    process is not stopped."""
    data = _status(pid) if status is None else status
    if data is None:
        return None
    found: dict[bytes, bytes] = {}
    state = b""
    for line in data.split(b"\n"):
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        if name == b"State":
            state = value.strip()[:1]
        elif name in _KERNEL_FIELDS:
            found[name] = b" ".join(value.split())
    found.setdefault(b"Seccomp_filters", b"")  # Linux 5.9 and later only
    if len(found) != len(_KERNEL_FIELDS) or (stopped and state != b"T"):
        return None
    return tuple(found[name] for name in _KERNEL_FIELDS)


def _filters_in_force(state: tuple[bytes, ...] | None) -> bool:
    """The host's own proof that the plugin process is filtered as the guest says, before
    any plugin code runs: no new privileges, seccomp in filter mode, and at least two
    filters more than this process has (bwrap's allow-list, the guest's ``no_exec``; where
    the kernel counts them, ``Seccomp_filters``: Linux 5.9 and later)."""
    mine = _kernel_state(os.getpid())
    if state is None or mine is None:
        return False
    found = dict(zip(_KERNEL_FIELDS, state, strict=True))
    own = dict(zip(_KERNEL_FIELDS, mine, strict=True))
    if found[b"NoNewPrivs"] != b"1" or found[b"Seccomp"] != b"2":
        return False
    if found[b"Seccomp_filters"] == own[b"Seccomp_filters"] == b"":
        return True  # a kernel before 5.9 does not count them: the mode is what it says
    try:
        return int(found[b"Seccomp_filters"]) - int(own[b"Seccomp_filters"]) >= 2
    except ValueError:
        return False


def _host_landlock_abi() -> int:
    """The Landlock ABI of this kernel, asked by the host (the guest applies it)."""
    from . import guest

    libc = guest._libc()
    libc.syscall.restype = ctypes.c_long
    return guest._landlock_abi(libc)


class ProtocolViolation(RuntimeFailure):
    """The guest sent a message this protocol does not allow (``plugin_protocol_error``)."""

    def __init__(self, detail: str) -> None:
        super().__init__("plugin_protocol_error", detail)


def _op_shown(message: Mapping[str, Any]) -> str:
    """A message's ``op`` as a detail may quote it: cut, printable and quoted (the process
    chose it; nothing else of the message is quoted)."""
    return repr(_printable(str(message.get("op", ""))[:40]))


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def _checked_contained(message: dict[str, Any], host_abi: int) -> dict[str, Any]:
    """What the guest's Landlock enforced, as its ``contained`` said it (``guest._enforced``,
    ``guest._unenforced``): said before any plugin code ran, so the guest's own word (the
    host cannot read a Landlock domain from ``/proc``), each field of its type and within
    its bounds; an ABI above this kernel's (``host_abi``) is no report of this kernel."""
    raw = message.get("isolation")
    if not isinstance(raw, dict):
        raise ProtocolViolation("contained: isolation is not an object")
    abi = raw.get("landlock")
    if not _is_int(abi) or not 0 <= abi <= host_abi:
        raise ProtocolViolation("contained: landlock is not an ABI of this kernel")
    if raw.get("landlock_network") is not (abi >= 4) or raw.get("landlock_scoped") is not (
        abi >= 6
    ):
        raise ProtocolViolation("contained: landlock_network or landlock_scoped is not its ABI's")
    refused = raw.get("landlock_refused")
    count = raw.get("landlock_refused_count")
    if (
        not isinstance(refused, list)
        or len(refused) > MAX_REFUSED_PATHS
        or not all(isinstance(p, str) and len(p) <= MAX_REFUSED_CHARS for p in refused)
    ):
        raise ProtocolViolation("contained: landlock_refused is not a short list of paths")
    if (
        not _is_int(count)
        or count < len(refused)
        or (count > len(refused) and len(refused) < MAX_REFUSED_PATHS)
    ):
        raise ProtocolViolation("contained: landlock_refused_count is not its list's")
    error = raw.get("landlock_error")
    if not isinstance(error, str) or len(error) > MAX_REFUSED_CHARS or bool(error) != (abi == 0):
        raise ProtocolViolation("contained: landlock_error is not a reason of no Landlock")
    if abi == 0 and count:
        raise ProtocolViolation("contained: paths refused by no Landlock")
    return {
        "landlock": abi,
        "landlock_network": abi >= 4,
        "landlock_scoped": abi >= 6,
        "landlock_refused": [_printable(p) for p in refused],
        "landlock_refused_count": count,
        "landlock_error": _printable(error),
    }


def _checked_ready(message: dict[str, Any]) -> dict[str, Any]:
    """The guest's ``ready``, each field of the type it must have (what it says of its
    sandbox is never read: it comes after the plugin's import; the host keeps what the
    guest said in ``contained``, ``Worker.isolation``)."""
    manifest = message.get("manifest")
    if manifest is not None and not isinstance(manifest, dict):
        raise ProtocolViolation("ready: manifest is not an object")
    size = manifest_bytes(manifest) if manifest is not None else 0
    if size > MAX_MANIFEST_BYTES:
        # Measured as the registry's ``parse_manifest`` measures it, and dropped here: no
        # one keeps a manifest over the limit, not even until it is refused.
        manifest = None
    if not isinstance(message.get("problem", ""), str):
        raise ProtocolViolation("ready: problem is not a string")
    if not isinstance(message.get("violations", []), list):
        raise ProtocolViolation("ready: violations is not a list")
    return {
        "op": "ready",
        "too_large": size if manifest is None and size else 0,
        "manifest": manifest,
        "problem": message.get("problem", ""),
        "violations": message.get("violations", []),
    }


def manifest_bytes(manifest: Mapping[str, Any]) -> int:
    """The size ``manifest.parse_manifest`` gives the manifest the registry makes of a
    guest's ``manifest`` (JSON as ``manifest._size`` writes it; each tool's handler
    ``true`` with a name becomes a handler, counted ``"<object>"``, any other ``null``), so
    that the host's cap and the manifest's limit agree to the byte."""
    tools = manifest.get("tools")
    served: Any = manifest
    if isinstance(tools, list):
        served = {
            **manifest,
            "tools": [
                {
                    **tool,
                    "handler": "<object>"
                    if tool.get("handler") is True and isinstance(tool.get("name"), str)
                    else None,
                }
                if isinstance(tool, dict)
                else tool
                for tool in tools
            ],
        }
    return len(json.dumps(served, allow_nan=False).encode("utf-8"))


def _wait_gone(pid: int, deadline: float) -> bool:
    """Until process ``pid`` (not our child: bwrap's) is reaped, or the deadline; whether
    it is gone."""
    while pid and os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.01)
    return not pid or not os.path.exists(f"/proc/{pid}")


def _open_sources(spec: bubblewrap.SandboxSpec) -> dict[str, int]:
    """A file descriptor (``O_PATH``) for each path bound into the sandbox, opened by the
    host: bwrap mounts the inode the host opened, wherever the path leads by then."""
    fds: dict[str, int] = {}
    try:
        for path in bubblewrap.sources(spec):
            fds[path] = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        for fd in fds.values():
            os.close(fd)
        raise
    return fds


def _program_fds(program: bytes, no_exec: bytes) -> tuple[int, int]:
    """The two filter programs' descriptors (``bubblewrap.program_fd``)."""
    first = bubblewrap.program_fd(program)
    try:
        return first, bubblewrap.program_fd(no_exec)
    except BaseException:
        os.close(first)
        raise


def _values(fds: dict[str, int]) -> Iterable[int]:
    return fds.values()


def _as_unprivileged(
    spec: bubblewrap.SandboxSpec, fds: dict[str, int], outer: identity.OuterIdentity
) -> list[str]:
    """A root host's command line: ``launch`` gives up root for ``outer``'s uid and gid
    (making the bind sources under a directory that uid may not search reachable), then
    executes bwrap, which maps the sandbox's uid 65534 to that uid."""
    from . import launch

    cover, keep = bubblewrap.covers(list(fds))
    plan: dict[str, Any] = {"uid": outer.uid, "gid": outer.gid, "cover": cover, "keep": keep}
    staging = bubblewrap.TMP_STAGING
    if os.path.isdir(staging) and not any(
        path == staging or path.startswith(staging + "/") for path in fds
    ):
        # Its /tmp bounded in inodes by the kernel (``launch`` mounts it: bwrap cannot).
        plan["tmp"] = {"at": staging, "bytes": bubblewrap.TMP_BYTES, "inodes": MAX_TMP_FILES}
        plan["argv"] = bubblewrap.command(spec, fds, tmp_from=staging)
    else:
        plan["argv"] = bubblewrap.command(spec, fds)
    return [
        bubblewrap.interpreter_path(),
        "-I",
        "-S",
        "-B",
        os.path.abspath(launch.__file__),
        json.dumps(plan),
    ]


def _ended_by_cpu(process: subprocess.Popen[bytes]) -> bool:
    """The plugin process ended of its ``RLIMIT_CPU`` (``SIGXCPU``): bwrap, whose child
    it is, reports ``128 + signal``."""
    try:
        code: int | None = process.wait(2)
    except subprocess.TimeoutExpired:
        return False
    return code in (-signal.SIGXCPU, 128 + signal.SIGXCPU)


class _Watch:
    """A thread that runs a process's ``bounds`` check every ``protocol.SLICE`` for as
    long as the host waits on anything but the plugin's next message (``recv`` polls it
    itself): a request it performs for the plugin (``_perform``), a message it sends (a
    plugin that does not read), the threads of a call or an import settling
    (``Worker.quiet``, ``_settled_threads``).  Over a bound: the failure is kept
    (``Worker.breach``) and the process killed at once; the host raises it when its wait
    ends (tests/plugins/test_call_bounds_wherever_the_host_waits.py).

    A call's watch (``cancellation``, ``deadline``) is also where the call's end always
    passes (``end``): a bound it finds crossed, the process gone (crashed or killed), the
    call's wall time out, or the host leaving the call for any reason (``__exit__``).
    There every request the host performs for the call is ended at once: its connection
    shut, its hop recorded ``plugin_call_ended``; no request outlives its call by more
    than a ``SLICE`` (tests/plugins/test_a_call_ends_its_requests.py)."""

    def __init__(
        self,
        worker: Worker,
        check: Any,
        cancellation: Cancellation | None = None,
        deadline: float = math.inf,
    ) -> None:
        self._worker = worker
        self._check = check
        self._cancellation = cancellation
        self._deadline = deadline
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="webfetch-plugin-watch", daemon=True)

    def _run(self) -> None:
        while not self._done.wait(SLICE):
            try:
                if self._worker.process.poll() in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
                    # Ended by the kernel's CPU limit (``limit_cpu``) while the host waited.
                    raise RuntimeFailure("plugin_limit", "CPU time")
                self._check()
            except RuntimeFailure as exc:
                self._worker.breach = exc
                if self._worker.process.poll() is None:
                    with contextlib.suppress(OSError):
                        os.kill(self._worker.pid, signal.SIGKILL)
                self.end()
                return
            if self._worker.process.poll() is not None or time.monotonic() >= self._deadline:
                # Its process ended (a crash, a kill) or its wall time ran out: the host's
                # thread learns it when its wait ends, which the request's end hastens.
                self.end()

    def end(self) -> None:
        """The call ended: every request the host performs for it ends now (once)."""
        if self._cancellation is not None:
            self._cancellation.cancel(CALL_ENDED)

    def __enter__(self) -> _Watch:
        if self._check is not None and self._worker.pid:
            self._thread.start()
        return self

    def stop(self) -> None:
        """No more checks (a check under way ends first)."""
        self._done.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.end()


class Worker:
    """One plugin process in its sandbox, bound to one instance (or to one manifest read)."""

    def __init__(
        self, origin: Origin, limits: Limits, label: str, *, deadline: float | None = None
    ) -> None:
        self.origin = origin
        self.limits = limits
        #: Until when (``time.monotonic()``) the caller waits for the process to get ready,
        #: whatever its own limits leave (``describe``: a registry load's budget).
        self.deadline = deadline
        self.calls = 0
        self.pid = 0  # the plugin process as the host sees it (PID 1 of its namespace)
        #: The ids of its threads once ready.  The guest has one thread (the RPC thread)
        #: then; threads its import started (a library's pool) would run on, unseen, in
        #: the next call: such a process serves one call (``Pool.release``).
        self.thread_ids: set[int] = set()
        #: Its last call changed a process-wide hook (a signal handler, a profile or trace
        #: function, an audit hook: the guest's ``_hooks``) through which work of that call
        #: could run in the next one: the guest serves no other call, nor is it pooled.
        self.hooks_changed = False
        #: Its memory and ``/tmp`` bytes once ready (``_footprint``): a call may leave at
        #: most ``MAX_IDLE_GROWTH`` more in a process the pool keeps (``grown``).
        self.footprint = 0
        #: Its open descriptors once ready (``_descriptors``: which, not how many): a call
        #: that leaves any other (a socket whose buffers hold kernel memory, in place of
        #: one or beside them) leaves a process the pool does not keep
        #: (``DESCRIPTORS_CHANGED``).
        self.descriptors: tuple[Descriptor, ...] | None = None
        #: The inode of its end of the channel (``socket:[inode]`` in its ``/proc/<pid>/fd``):
        #: the one socket a pooled process may hold, measured empty (``queues_held``).
        self.channel_inode = 0
        #: Its descriptors when the sandbox held and no plugin code had run yet (number,
        #: link, device, inode): the guest's own (``_queues``).
        self.own_descriptors: frozenset[tuple[int, str, int, int]] = frozenset()
        #: Its kernel state (``_kernel_state``) as the host read it when the sandbox held
        #: and no plugin code had run yet (the guest waits for ``import`` until then):
        #: after each call, stopped, it must read the same, or the process is not kept
        #: (``Pool.release``; ``None``, unreadable: never kept).
        self.kernel: tuple[bytes, ...] | None = None
        self.stopped = False
        #: Its whole life's CPU seconds (the guest's own ``RLIMIT_CPU``, set at ``setup``).
        self.lifetime = int(limits.cpu_seconds * MAX_CALLS_PER_PROCESS + _STARTUP_SECONDS)
        #: The bound a ``_Watch`` found crossed (the process killed then): what the call,
        #: or the import, fails with, wherever the host was waiting.
        self.breach: RuntimeFailure | None = None
        #: What ``bounds`` checks while its import runs (``_start``): watched until its
        #: threads settle (``_settled_threads``: the process runs meanwhile).
        self.import_bounds: Any = None
        #: What its Landlock enforced, as its guest said in ``contained``, before any plugin
        #: code ran (``_checked_contained``): ``isolation`` reports it.
        self.enforced: dict[str, Any] = {}
        safe = f"{re.sub(r'[^A-Za-z0-9_-]', '_', label)[:40]}-{os.urandom(4).hex()}"
        self.scratch = f"/tmp/webfetch-plugin-{safe}"
        self.cgroup: cgroups.Cgroup | None = None
        #: Its uid and gid outside its namespace, where the site runs as root (``identity``).
        self.identity: identity.OuterIdentity | None = None
        if not os.access(bubblewrap.bwrap_path(), os.X_OK):
            raise IsolationUnavailable("bwrap_missing")
        try:
            programs = (bubblewrap.seccomp_program(), bubblewrap.no_exec_program())
            program, no_exec = _descriptors_held.opened(lambda: _program_fds(*programs), _both)
        except OSError as exc:
            raise IsolationUnavailable(str(exc.strerror or "libseccomp_unavailable")) from exc
        self.no_exec_fd = no_exec
        #: The site's code masked in the sandbox, left out of the guest's Landlock rules.
        self.hidden: list[str] = []
        #: What decided them (``bubblewrap.site_inputs``), read before they are computed
        #: (a change meanwhile makes it differ later, never match): under other inputs the
        #: pool hands it no call (``Pool.acquire``; issue 30, round 24, finding 4).
        self.site_inputs = bubblewrap.site_inputs()
        #: What else decided them (``bubblewrap.Reading``: the fingerprints of the
        #: directories whose listings did, the files the host writes); checked likewise
        #: (issue 30, round 26, findings 2 and 7).
        self.reading = bubblewrap.Reading({}, (), ())
        held = _descriptors_held
        host_end, guest_end = held.opened(
            lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM), _both
        )
        self.channel_inode = os.fstat(guest_end.fileno()).st_ino
        info_read, info_write = held.opened(os.pipe, _both)
        # Unbuffered (a ``FileIO``): a forked child closes it with no lock to take.  Kept
        # open for the process's start.
        errors = held.opened(lambda: tempfile.TemporaryFile(buffering=0), _alone)  # noqa: SIM115
        spec = bubblewrap.SandboxSpec(
            plugin_path=origin.path,
            top_level=origin.top_level,
            rpc_fd=guest_end.fileno(),
            info_fd=info_write,
            seccomp_fd=program,
            scratch=self.scratch,
        )
        sources: dict[str, int] = {}
        try:
            argv, self.hidden, self.reading = bubblewrap.prepared(spec)
            if os.geteuid() == 0:
                # Never root outside: a uid of its own, or no process (fail closed).
                try:
                    self.identity = identity.acquire(*limits.uid_range)
                except identity.IdentityUnavailable as exc:
                    raise IsolationUnavailable(f"uid_unavailable: {exc.strerror}") from exc
                sources = held.opened(lambda: _open_sources(spec), _values)
                argv = _as_unprivileged(spec, sources, self.identity)
            self.process = _spawner.popen(
                argv,
                pass_fds=(guest_end.fileno(), info_write, program, no_exec, *sources.values()),
                env={},
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                start_new_session=True,
                close_fds=True,
            )
        except BaseException as exc:
            held.close(host_end, errors, info_read)
            if self.identity is not None:
                self.identity.release()  # no process was started under it
            if isinstance(exc, bubblewrap.SiteCodeUnmaskable):
                raise IsolationUnavailable(f"site_code_unmaskable: {exc.filename}") from exc
            if isinstance(exc, bubblewrap.PluginEntryLinked):
                # The package's doing, not this host's: refused as its path is.
                raise RuntimeFailure(
                    PATH_UNSAFE,
                    f"{str(exc.filename)[:300]!r} is a symbolic link: a plugin process binds "
                    "the plugin's own package or module only",
                ) from exc
            if isinstance(exc, OSError):
                raise IsolationUnavailable(f"sandbox_failed: {exc}") from exc
            raise
        finally:
            held.close(*sources.values(), guest_end, info_write, program, no_exec)
        self.channel = Channel(host_end, max_message=2 * limits.max_output_bytes + (1 << 20))
        try:
            # Whatever goes wrong from here (a hostile ``ready``, a bug), the process never
            # outlives this constructor's failure.
            try:
                info = _read_info(info_read, self._until(_STARTUP_SECONDS))
            finally:
                held.close(info_read)
            child = info.get("child-pid")
            self.pid = child if isinstance(child, int) and not isinstance(child, bool) else 0
            try:
                if self.pid <= 0:
                    self.pid = 0
                    self._deferred()
                    raise IsolationUnavailable(self._why(errors))
                self._enter_cgroup(safe)
                self.ready = _checked_ready(self._start(errors))
            finally:
                held.close(errors)
            # The process runs while its threads settle (up to ``_QUIET_WAIT``): a thread
            # its import started is watched, and bounded by the kernel, as a call is.
            with _Watch(self, self.import_bounds):
                self.thread_ids = self._settled_threads()
            if self.breach is not None:
                raise self.breach
            self.footprint = _footprint(self.pid) or 0
            self.descriptors = _descriptors(self.pid)
        except BaseException:
            self.kill()
            raise

    @classmethod
    def started(
        cls, origin: Origin, limits: Limits, label: str, *, deadline: float | None = None
    ) -> Worker:
        """A new process (``Worker(...)``), built a second time from a new reading of the
        site when a path its masks cover went away while bwrap built the first
        (``mount_point_gone``: a log rotated meanwhile).  Twice in a row is a failure of
        that reason, never a sandbox with that path left unmasked."""
        try:
            return cls(origin, limits, label, deadline=deadline)
        except IsolationUnavailable as exc:
            if reason_of(exc.detail) != "mount_point_gone":
                raise
        return cls(origin, limits, label, deadline=deadline)

    def _enter_cgroup(self, label: str) -> None:
        """Before ``setup`` (nothing of the plugin has run yet): into its own cgroups, where
        the host can make them (``cgroups``)."""
        cgroup = cgroups.make(label, self.limits.memory_bytes)
        try:
            cgroup.enter(self.pid)
        except OSError:
            logger.warning("plugin process not moved into its cgroup; limits without it")
            cgroup.remove()
            return
        self.cgroup = cgroup if cgroup.directories else None

    def _why(self, errors: Any) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        errors.seek(0)
        said = errors.read(2000).decode("utf-8", "replace")
        self.kill()
        return f"{bubblewrap.reason_of(said)}: {' '.join(said.split())[:200]}"

    def _start(self, errors: Any) -> dict[str, Any]:
        lifetime = self.lifetime
        contained = False
        try:
            self.channel.send(
                {
                    "op": "setup",
                    "entry": self.origin.entry,
                    "plugin_path": self.origin.path,
                    "top_level": self.origin.top_level,
                    "scratch": self.scratch,
                    "memory_bytes": self.limits.memory_bytes,
                    "lifetime_cpu_seconds": lifetime,
                    "file_bytes": bubblewrap.TMP_BYTES,
                    "max_output_bytes": self.limits.max_output_bytes,
                    "no_exec_fd": self.no_exec_fd,
                    "hidden": self.hidden,
                }
            )
            # The guest sets its own limits now (``RLIMIT_CPU`` its whole life's): the
            # host's per-call CPU limit (``bounds``' ``kernel``) waits for ``contained``.
            message = self.channel.recv(
                self._until(_STARTUP_SECONDS),
                poll=self.bounds(_STARTUP_SECONDS, files=False, kernel=False),
            )
            if message["op"] == "unavailable":
                # The answer to ``setup`` only: no plugin code has run in the process yet,
                # so this is the guest's own word of a sandbox step that failed.
                self.kill()
                raise IsolationUnavailable(str(message.get("why", ""))[:300])
            if message["op"] != "contained":
                raise ProtocolViolation(
                    f"the plugin process answered setup with {_op_shown(message)}, not contained"
                )
            # The sandbox holds and the guest waits: what the kernel says of it now is
            # what no plugin code has touched yet.  Then the plugin's import, with a
            # call's bounds.
            contained = True
            host_abi = _host_landlock_abi()
            self.enforced = _checked_contained(message, host_abi)
            self._say_landlock(host_abi)
            self.kernel = _kernel_state(self.pid)
            self.own_descriptors = frozenset(held[:4] for held in _descriptors(self.pid) or ())
            if not _filters_in_force(self.kernel):
                raise IsolationUnavailable(
                    "seccomp_unavailable: the host does not read both filters in /proc"
                )
            self.import_bounds = self.bounds(self.limits.cpu_seconds)
            self.channel.send({"op": "import"}, self._until(_STARTUP_SECONDS))
            message = self.channel.recv(
                self._until(self.limits.wall_seconds),
                max_message=READY_BYTES,
                poll=self.import_bounds,
            )
        except ChannelTimeout as exc:
            self.kill()
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise ReadDeferred("the caller's time for this read ran out") from exc
            what = "wall time while importing" if contained else "the sandbox did not start"
            raise RuntimeFailure("plugin_timeout", what) from exc
        except MessageTooLarge as exc:
            self.kill()
            raise RuntimeFailure(
                "manifest_too_large",
                f"the plugin process answered its import with {exc.length} bytes; at most "
                f"{READY_BYTES} are read (a manifest of at most {MAX_MANIFEST_BYTES})",
            ) from exc
        except ChannelClosed as exc:
            if not contained:
                self._deferred()
                raise IsolationUnavailable(self._why(errors)) from exc
            if _ended_by_cpu(self.process):
                self.kill()
                raise RuntimeFailure("plugin_limit", "CPU time") from exc
            self.kill()
            raise RuntimeFailure(
                "plugin_crashed", f"the plugin process ended while importing: {exc}"
            ) from exc
        except ProtocolError as exc:
            self.kill()
            raise RuntimeFailure(
                "plugin_crashed", f"the plugin process did not start: {exc}"
            ) from exc
        if message["op"] != "ready":
            # After ``import`` the plugin's code has run in the process and can write on the
            # channel: only ``ready`` answers it.  An ``unavailable`` or ``contained`` now is
            # no word of the guest's (it says them before the import, never after): a
            # protocol violation of the package's, remembered like any failed read, and
            # nothing it said is taken as this host's (tests/plugins/
            # test_protocol_states_and_problem_reasons.py).
            self.kill()
            raise ProtocolViolation(
                f"the plugin process answered its import with {_op_shown(message)}, not ready"
            )
        return message

    def _deferred(self) -> None:
        """``ReadDeferred`` (the process killed) when the caller's deadline has passed: a
        sandbox whose start it cut is the caller's time, not this host's isolation."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.kill()
            raise ReadDeferred("the caller's time for this read ran out while it started")

    def _until(self, seconds: float) -> float:
        """``seconds`` from now, or the caller's ``deadline`` when that comes first."""
        until = time.monotonic() + seconds
        return until if self.deadline is None else min(until, self.deadline)

    def _say_landlock(self, host_abi: int) -> None:
        """A process that enforced less Landlock than it asked for, or none where this
        host's kernel has it, is logged (the operator sees it in ``webfetch plugin list``
        too: ``isolation_label``)."""
        enforced = self.enforced
        if enforced["landlock_refused_count"]:
            logger.warning(
                "plugin process of %s: Landlock path rules refused by the kernel: %d, "
                "each path left out (not readable there; the rest holds): %r",
                self.origin.entry,
                enforced["landlock_refused_count"],
                enforced["landlock_refused"],
            )
        elif host_abi and not enforced["landlock"]:
            logger.warning(
                "plugin process of %s runs without Landlock (%s); the namespaces, the "
                "mount view and the filters hold",
                self.origin.entry,
                enforced["landlock_error"],
            )

    @property
    def isolation(self) -> dict[str, Any]:
        """What this process runs in: what the host built (it made the bwrap command,
        started it and got ``contained`` back) and what its guest said in ``contained``,
        before any plugin code ran, of its Landlock (``enforced``: the ABI in force, or 0
        and the reason, and the paths whose rule the kernel refused), never this host's
        kernel's ABI in its place; nothing the guest says after the import is taken."""
        return {
            "isolated": True,
            "seccomp": "allow-list",
            "namespaces": "user,pid,net,ipc,uts,mount,cgroup",
            # Who the process is outside its namespace: a uid of its own (a root site), or
            # the site's (never root: a root site starts no process any other way).
            "outer_uid": "own" if self.identity is not None else "site",
            **self.enforced,
            "cgroup": dict(self.cgroup.kinds) if self.cgroup is not None else {},
        }

    def alive(self) -> bool:
        return self.process.poll() is None

    def bounds(self, cpu_seconds: float, *, files: bool = True, kernel: bool = True) -> Any:
        """What the host checks while it waits (every ``protocol.SLICE``, in ``recv``'s
        poll and in a ``_Watch`` wherever else it waits) and after each call: CPU time
        from now on, threads and (``files``: once the sandbox is built, which bwrap
        reports before it is) the files of the private ``/tmp``; over a bound,
        ``plugin_limit`` (and the process is killed by whoever catches it).  ``kernel``
        (once the guest has set its own limits): the kernel ends the process past its CPU
        time too, whoever looks (``limit_cpu``)."""
        cpu_start = self.cpu_seconds()
        if kernel:
            self.limit_cpu(cpu_start + cpu_seconds)

        def check() -> None:
            if self.cpu_seconds() - cpu_start > cpu_seconds:
                raise RuntimeFailure("plugin_limit", "CPU time")
            if _threads(self.pid) > MAX_THREADS:
                raise RuntimeFailure("plugin_limit", "threads")
            if files and _tmp_files(self.pid) > MAX_TMP_FILES:
                raise RuntimeFailure("plugin_limit", "files in /tmp")

        return check

    def limit_cpu(self, until: float) -> None:
        """The process's ``RLIMIT_CPU``, set by the host (``prlimit``) so that the kernel
        ends it at ``until`` seconds of CPU (its whole life's: the limit is per process),
        rounded up to the next whole second (the limit's unit): ``SIGXCPU`` there (the
        call fails ``plugin_limit``), and, where the host may raise the hard limit again
        for the next call (a root host: ``CAP_SYS_RESOURCE``), ``SIGKILL`` one second
        later (a plugin that ignores ``SIGXCPU``); never past its whole life's bound.
        What the host checks itself (``bounds``) is finer: this holds wherever it does not
        look (tests/plugins/test_call_bounds_wherever_the_host_waits.py)."""
        global _cpu_limit_refused
        if _cpu_limit_refused:
            return
        soft = max(1, math.ceil(until))
        try:
            if self.identity is not None:
                hard = min(soft + 1, self.lifetime)
            else:  # lowered, the hard limit could not be raised for the next call
                hard = resource.prlimit(self.pid, resource.RLIMIT_CPU)[1]
            resource.prlimit(self.pid, resource.RLIMIT_CPU, (min(soft, hard), hard))
        except PermissionError as exc:
            # A root host without ``CAP_SYS_RESOURCE`` (a container's default): the
            # process is another uid's.  The host's own checks hold the bound alone.
            _cpu_limit_refused = True
            logger.warning(
                "plugin processes run without a per-call CPU limit (%s: %s): this root "
                "process lacks CAP_SYS_RESOURCE, as in most containers; the host's own "
                "checks hold the CPU bound (docs/plugins.rst, 'Containment')",
                CPU_LIMIT_UNAVAILABLE,
                exc.strerror,
            )
        except (OSError, ValueError):
            pass  # gone: the call fails as it ends

    def cpu_seconds(self) -> float:
        """CPU time of the plugin process, all its threads, as the kernel counts it."""
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK

    def threaded_at_ready(self) -> bool:
        """Its import left threads beside the RPC thread (or it had none to read): work a
        call hands to one of them may run in the next call, however it looks between the
        two, so the process serves one call."""
        return self.thread_ids != {self.pid}

    def _settled_threads(self) -> set[int]:
        """Its thread ids once the RPC thread (the main one, whose id is the process's) is
        the only one, or after ``_QUIET_WAIT`` seconds: a thread the call joined may still
        be on its way out (its C library unwinds, frees its stack, may wait on a lock or
        the disk in any state), so no state tells a leaving thread from one left behind;
        one left behind costs its call the wait, and its process is not kept."""
        deadline = time.monotonic() + _QUIET_WAIT
        while True:
            found = _thread_ids(self.pid)
            if found == {self.pid} or time.monotonic() >= deadline:
                return found
            time.sleep(0.001)

    def quiet(self) -> bool:
        """No thread of the last call is left: the RPC thread is its only thread, as it
        was at ready (``threaded_at_ready``).  A thread the call joined may have been
        stopped on its way out (the host stops the process as the result comes, and on a
        busy machine the result can come first): it is let go on, then the process is
        stopped again."""
        if _thread_ids(self.pid) == {self.pid}:
            return True
        stopped = self.stopped
        if stopped:
            self.resume()
        try:
            return self._settled_threads() == {self.pid}
        finally:
            if stopped:
                with contextlib.suppress(OSError):
                    self.pause()

    def grown(self, status: bytes | None = None) -> bool:
        """Its calls left more than ``MAX_IDLE_GROWTH`` in memory or ``/tmp`` since it got
        ready (or it cannot be read: it is not kept); ``status``: its ``/proc`` status
        read already (``stopped_status``)."""
        now = _footprint(self.pid, status)
        return now is None or now - self.footprint > MAX_IDLE_GROWTH

    def descriptors_changed(self) -> bool:
        """It holds other descriptors than when it got ready (``descriptors``), or they
        cannot be read: kernel memory a call can leave outside ``grown``'s count (the
        buffers of a socket it made, ``dup2``'d over one it held) is in a descriptor."""
        held = _descriptors(self.pid)
        return held is None or self.descriptors is None or held != self.descriptors

    def queues_held(self) -> list[str] | None:
        """What of it can hold queued kernel memory its footprint does not count: the links
        of its descriptors of a queueing kind (``_queues``: a socketpair or a pipe it made
        at import, empty at ready, may be full now), and ``"channel"`` when its channel
        holds bytes either end has not read; ``None`` when it cannot be read.  Empty: the
        process holds no such memory (``Pool.release`` keeps it)."""
        found = _queues(self.pid, self.channel_inode, self.own_descriptors)
        if found is not None and _queued(self.channel.sock) != 0:
            found.append("channel")
        return found

    def holds_locks(self) -> bool:
        """It holds a file lock (``_locks``), or its locks cannot be told within the
        bounds: a lock the site needs (a database's, a cache's), or the kernel memory of
        many locks, would be held for as long as it idles (decision 0060)."""
        held = _locks(self.pid)
        return held is None or bool(held)

    def stopped_status(self) -> bytes | None:
        """Its ``/proc`` status once it reads stopped (after ``pause``), or ``None`` when it
        does not within ``_STOP_WAIT`` seconds or cannot be read (it is not kept)."""
        deadline = time.monotonic() + _STOP_WAIT
        attempt = 0
        while True:
            status = _status(self.pid)
            if status is None:
                return None
            if _kernel_state(self.pid, stopped=True, status=status) is not None:
                return status
            if time.monotonic() >= deadline:
                return None
            if attempt < _STOP_YIELDS:
                os.sched_yield()
            else:  # 50 µs, doubled up to 1 ms
                time.sleep(min(0.001, 0.00005 * 2 ** min(attempt - _STOP_YIELDS, 5)))
            attempt += 1

    def kernel_changed(self, status: bytes | None) -> bool:
        """Its kernel state in ``status`` (``stopped_status``: read by the host in
        ``/proc``, where the plugin cannot write, while the process runs nothing) differs
        from what it was before any plugin code ran (``kernel``), or is missing: a signal
        handler, ignored, blocked or pending signal a call (or the import) left, or
        anything else of ``_KERNEL_FIELDS``."""
        if self.kernel is None or status is None:
            return True
        return _kernel_state(self.pid, stopped=True, status=status) != self.kernel

    def unread(self) -> bool:
        """The guest sent something no call asked for (a reply queued for the next call)."""
        try:
            return readable(self.channel, 0)
        except (OSError, ValueError):
            return True

    def pause(self) -> None:
        """Idle in the pool: stopped by the host, it runs nothing until the next call."""
        if self.stopped:
            return
        os.kill(self.pid, signal.SIGSTOP)
        self.stopped = True

    def resume(self) -> None:
        if self.stopped:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGCONT)
            self.stopped = False

    def kill(self) -> None:
        if self.pid and self.process.poll() is None:  # bwrap still waits for it: its pid
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        _descriptors_held.close(self.channel.sock)
        if self.cgroup is None and (self.identity is None or not self.identity.held):
            return
        # The plugin process leaves its cgroups only once reaped (bwrap reaps it): waited
        # for, so that the directories can go, and so that its uid is free only when no
        # process of it is left (a process that will not go keeps its uid).
        gone = _wait_gone(self.pid, time.monotonic() + 2)
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.identity is not None and self.identity.held:
            if gone:
                self.identity.release()
            else:
                logger.warning("plugin process %s not reaped: its uid stays taken", self.pid)

    def close(self) -> None:
        """End the process: by the kernel (``kill``), never by asking it.  An idle process
        holds nothing of a call (``Pool.release`` checked it), and its own loop is the
        plugin's to replace: asked to exit, it could hold the closing thread (a registry
        reset, a release into a full pool) for as long as the host waited (issue 30, round
        28, finding 2)."""
        self.kill()


# -- the pool ----------------------------------------------------------------------------


class Pool:
    """Idle processes per key (an instance and the manifest read it runs); one process
    serves one call at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[Any, list[Worker]] = {}
        self._pid = os.getpid()

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:  # a forked host (Celery prefork): not our children
            self.forget()

    def forget(self) -> None:
        """In a forked child: drop (never kill) the parent's processes.  The child's copies
        of their descriptors (their channels, their uids' locks) are closed already, as are
        those of the processes in a call then: ``_Descriptors``, ``identity._Registry``."""
        self._idle = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()  # another thread of the parent may have held it

    def acquire(self, key: Any, site_inputs: tuple[object, ...] | None = None) -> Worker | None:
        """An idle process of ``key``, resumed, or ``None``.  One started under other
        ``site_inputs`` than those given (``bubblewrap.site_inputs`` now: a setting naming
        the site's data changed since) is ended, never handed the call: its masks and
        Landlock rules may leave that data readable (issue 30, round 24, finding 4); so is
        one whose ``Worker.reading`` changed (a directory whose listing decided its masks,
        the files the host writes: round 26, findings 2 and 7)."""
        with self._lock:
            self._check_fork()
            idle = self._idle.get(key, [])
            while idle:
                worker = idle.pop()
                if site_inputs is not None and worker.site_inputs != site_inputs:
                    logger.info(
                        "plugin process %s recycled (%s): the site's data settings changed",
                        key,
                        SITE_CHANGED,
                    )
                elif site_inputs is not None and (changed := worker.reading.changed()):
                    logger.info("plugin process %s recycled (%s): %s", key, SITE_CHANGED, changed)
                elif worker.alive():
                    worker.resume()
                    return worker
                worker.kill()
        return None

    def release(self, key: Any, worker: Worker, size: int, watch: _Watch | None = None) -> None:
        """Keep ``worker`` idle for ``key`` if its call left it as it was at ready, or end
        it.  ``watch``: the call's, stopped before the process is pooled (it belongs to the
        next call then), and a bound it found crossed ends the process."""
        if worker.hooks_changed:
            # Checked first: the guest ends itself after such a call, so it may be gone.
            logger.info("plugin process %s recycled: its call changed the process's hooks", key)
            worker.kill()
            return
        if worker.calls >= MAX_CALLS_PER_PROCESS or not worker.alive():
            worker.close()
            return
        try:
            # Nothing of it runs from here (``_run`` stopped it as the result came): what
            # the host reads of it next holds when it is pooled.
            worker.pause()
        except OSError:
            worker.kill()
            return
        if worker.unread():
            logger.info("plugin process %s recycled: it sent what no call asked for", key)
            worker.kill()
            return
        if worker.threaded_at_ready():
            # A thread its import started may hold work of this call: one call only.
            logger.info("plugin process %s recycled: its import started threads", key)
            worker.kill()
            return
        if not worker.quiet():
            # A thread the call started still exists: never handed to the next call.
            logger.info("plugin process %s recycled: a thread of its call still runs", key)
            worker.kill()
            return
        status = worker.stopped_status()
        if worker.grown(status):
            # What the call allocated would idle with it, for as long as no call comes.
            logger.info("plugin process %s recycled: its call left memory or files", key)
            worker.kill()
            return
        if worker.kernel_changed(status):
            # A handler, an ignored, blocked or pending signal (or a filter, a capability,
            # an id) the plugin left: it could run work of this call in the next one.
            logger.info(
                "plugin process %s recycled (%s): its signals or privileges changed",
                key,
                KERNEL_CHANGED,
            )
            worker.kill()
            return
        if worker.descriptors_changed():
            # Another descriptor in place of one it held at ready (or beside them): a
            # socket's queued buffers would idle with it, in no ``VmRSS``.
            logger.info(
                "plugin process %s recycled (%s): its call left other descriptors",
                key,
                DESCRIPTORS_CHANGED,
            )
            worker.kill()
            return
        held = worker.queues_held()
        if held is None or held:
            # A socket or a pipe beside its channel (or its channel unread): whatever its
            # call queued there would idle with it, in no ``VmRSS``, however empty it was
            # at ready.  Such a process serves one call (pooling is an optimisation).
            logger.info(
                "plugin process %s recycled (%s): it holds what can queue data: %s",
                key,
                QUEUES_HELD,
                ", ".join(sorted(set(held or ["unreadable"])))[:200],
            )
            worker.kill()
            return
        if worker.holds_locks():
            # A lock on a file of the host's (the site's database): never idled with it.
            logger.info("plugin process %s recycled (%s): it holds a file lock", key, HOLDS_LOCKS)
            worker.kill()
            return
        if watch is not None:
            watch.stop()
        if worker.breach is not None:
            worker.kill()
            return
        with self._lock:
            self._check_fork()
            idle = self._idle.setdefault(key, [])
            total = sum(len(workers) for workers in self._idle.values())
            if len(idle) < size and total < MAX_IDLE_PROCESSES:
                idle.append(worker)
                return
        worker.close()

    def idle(self) -> int:
        with self._lock:
            self._check_fork()
            return sum(len(workers) for workers in self._idle.values())

    def clear(self) -> None:
        with self._lock:
            workers = [w for idle in self._idle.values() for w in idle]
            self._idle = {}
        for worker in workers:
            worker.close()


_pool = Pool()
atexit.register(_pool.clear)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.forget)


def idle_processes() -> int:
    """How many warm plugin processes this host process keeps."""
    return _pool.idle()


def shutdown() -> None:
    """End every idle plugin process of this host process."""
    _pool.clear()


# -- reading a manifest, and what this host can do ---------------------------------------

_capabilities: dict[str, Any] | None = None
_capabilities_lock = threading.Lock()
#: Why a package is refused before any read of it: more entries than the walk limit, or
#: nested deeper (the registry's checks, ``registry._PathCheck``, refuse it so too).
PATH_UNSAFE = "plugin_path_unsafe"


def stamp(origin: Origin) -> str:
    """What the package's files are now: a SHA-256 over the path, device, inode, mode,
    size, modification and change times (``lstat``) of every entry of the plugin's
    top-level name in ``origin.path`` (its package, module or extension) and of every
    entry below, walked as the registry's check walks them (``registry._PathCheck.tree``:
    sorted, depth first, a linked directory walked once), with the same limits
    (``WALK_ENTRIES``, ``WALK_DEPTH``): every package the registry accepts has one, and
    any file added, removed, renamed, replaced or written changes it (its change time
    at least, which no user can set).  Raises ``RuntimeFailure`` (``PATH_UNSAFE``, a
    stable reason) for a package past either limit or that cannot be listed: the
    registry refuses it anyway, and no plugin process is started for it (``describe``).
    Bounded in memory: a digest, not the entries (decision 0055)."""
    found = hashlib.sha256()
    if origin.path:
        _Walk(found, WALK_ENTRIES).top_names(origin.path, origin.top_level)
    return found.hexdigest()


def stamp_trees(tops: list[tuple[str, str]], paths: list[str], limit: int = WALK_ENTRIES) -> str:
    """``stamp`` of several packages and files together: each top-level name ``top`` in
    its directory (``tops``: (directory, top), as ``stamp`` takes one), then each path of
    ``paths`` (a file, or a directory walked whole), at most ``limit`` entries in all
    (``RuntimeFailure``, ``PATH_UNSAFE``, past it).  What a plugin's dependencies are now
    (``registry._inputs_stamp``)."""
    found = hashlib.sha256()
    walk = _Walk(found, limit)
    for directory, top in tops:
        found.update(f"top\0{directory}\0{top}\n".encode("utf-8", "surrogateescape"))
        walk.top_names(directory, top)
    for path in paths:
        found.update(f"path\0{path}\n".encode("utf-8", "surrogateescape"))
        walk.tree(path)
    return found.hexdigest()


def site_stamp() -> str:
    """What the site's package directories the guest imports from are now
    (``bubblewrap.site_dirs``: its ``sys.path`` after the standard library): each
    directory's own ``lstat`` (device, inode, modification and change times).  Installing,
    upgrading or removing a distribution there adds, removes or renames an entry of the
    directory (its ``dist-info`` at least), which changes both times."""
    found = hashlib.sha256()
    for directory in bubblewrap.site_dirs():
        try:
            info = os.lstat(directory)
        except OSError as exc:
            found.update(f"{directory}\0-{exc.errno}\n".encode("utf-8", "surrogateescape"))
            continue
        found.update(
            f"{directory}\0{info.st_dev}\0{info.st_ino}\0{info.st_mtime_ns}\0"
            f"{info.st_ctime_ns}\n".encode("utf-8", "surrogateescape")
        )
    return found.hexdigest()


class _Walk:
    """The walk ``stamp`` makes, into the digest ``found``, at most ``limit`` entries in all
    (every tree of one walk counted together), each real directory walked once."""

    def __init__(self, found: Any, limit: int) -> None:
        self.found = found
        self.limit = limit
        self.entries = 0
        self.walked: set[str] = set()

    def note(self, path: str, info: os.stat_result | None, error: int = 0) -> None:
        if info is None:
            self.found.update(f"{path}\0-{error}\n".encode("utf-8", "surrogateescape"))
            return
        self.found.update(
            f"{path}\0{info.st_dev}\0{info.st_ino}\0{info.st_mode}\0{info.st_size}\0"
            f"{info.st_mtime_ns}\0{info.st_ctime_ns}\n".encode("utf-8", "surrogateescape")
        )

    def top_names(self, directory: str, top_level: str) -> None:
        """Every entry of ``directory`` whose name is ``top_level`` (a package, a module,
        an extension: the name before its first dot), each with its tree."""
        try:
            names = sorted(os.listdir(directory))
        except OSError as exc:
            raise RuntimeFailure(
                PATH_UNSAFE, f"{directory[:300]!r} cannot be listed ({exc.strerror})"
            ) from None
        for name in names:
            if name.partition(".")[0] == top_level:
                self.tree(os.path.join(directory, name))

    def tree(self, top: str) -> None:
        """``top`` and, for a directory (or a link to one), every entry below it."""
        try:
            self.note(top, os.lstat(top))
        except OSError as exc:
            self.note(top, None, exc.errno or 1)
            return
        real = real_path(top)
        if not os.path.isdir(real) or real in self.walked:
            return
        self.walked.add(real)
        todo = [(top, 0)]
        while todo:
            directory, depth = todo.pop()
            if depth > WALK_DEPTH:
                raise RuntimeFailure(
                    PATH_UNSAFE,
                    f"{directory[:300]!r}... is nested deeper than {WALK_DEPTH} directories",
                )
            try:
                with os.scandir(directory) as listing:
                    found_here = sorted(listing, key=lambda e: e.name)
            except OSError as exc:
                raise RuntimeFailure(
                    PATH_UNSAFE, f"{directory[:300]!r} cannot be listed ({exc.strerror})"
                ) from None
            below: list[str] = []
            for entry in found_here:
                self.entries += 1
                if self.entries > self.limit:
                    raise RuntimeFailure(
                        PATH_UNSAFE, f"{top!r} holds more than {self.limit} files to check"
                    )
                path = os.path.join(directory, entry.name)
                try:
                    self.note(path, entry.stat(follow_symlinks=False))
                    linked = entry.is_symlink() and entry.is_dir()
                    plain = not linked and entry.is_dir(follow_symlinks=False)
                except OSError as exc:
                    self.note(path, None, exc.errno or 1)  # gone since the listing
                    continue
                if linked:
                    real = real_path(path)
                    self.found.update(f"-> {real}\n".encode("utf-8", "surrogateescape"))
                    if real not in self.walked and os.path.isdir(real):
                        self.walked.add(real)
                        below.append(real)
                elif plain:
                    below.append(path)
            todo.extend((path, depth + 1) for path in reversed(below))


class _Failures:
    """Manifest reads that failed (a limit, a timeout, a crash), by what was read: the
    origin, the limits and the ``stamp`` of the package's files.  The same files fail the
    same way: a registry reset pays for a hostile import once, not at every load; each
    further failure of the same files keeps it twice as long (``backoff``).  Decided from
    ``now`` (``time.monotonic()``) as given: the schedule is tested without waiting."""

    def __init__(self, size: int) -> None:
        self._memo: Memo[tuple[Any, ...], tuple[int, float, RuntimeFailure]] = Memo(size)
        self._lock = threading.Lock()

    def remembered(self, key: tuple[Any, ...], now: float) -> RuntimeFailure | None:
        """The failure to answer for ``key`` without a process, or None (none, or its
        time is over: read again)."""
        with self._lock:
            failures, until, failed = self._memo.get(key) or (0, 0.0, None)
        return failed if failed is not None and now < until else None

    def failed(self, key: tuple[Any, ...], failure: RuntimeFailure, now: float) -> float:
        """Note that a read of ``key`` failed at ``now``: how long it is answered so."""
        with self._lock:
            failures = (self._memo.get(key) or (0, 0.0, None))[0] + 1
            window = backoff(failures)
            # Its code and detail only: the exception's traceback holds the worker.
            kept = RuntimeFailure(failure.code, failure.detail)
            self._memo.put(key, (failures, now + window, kept))
        return window

    def succeeded(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self._memo.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._memo.clear()

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        """The keys remembered now (a copy)."""
        with self._lock:
            return iter(list(self._memo))


def backoff(failures: int) -> float:
    """How long a read that failed ``failures`` times in a row (the same files) is answered
    without a plugin process: ``_REMEMBER_SECONDS``, doubled at each further failure, at
    most ``_REMEMBER_MAX_SECONDS``."""
    doubled: float = _REMEMBER_SECONDS * 2.0 ** min(max(failures, 1) - 1, 32)
    return min(doubled, _REMEMBER_MAX_SECONDS)


_failed_reads = _Failures(_MAX_REMEMBERED)


#: Plugin processes ``describe`` started in this host process (each a sandbox, an
#: interpreter and the plugin's import): what a registry load's budget counts.
reads_started = 0


def remembered_failure(origin: Origin, stamped: str | None = None) -> bool:
    """A read of ``origin`` is answered by ``describe`` without a plugin process (the
    registry's budget does not count it): it failed recently, or the package is refused
    before any read (``stamp``).  ``stamped``: its ``stamp``, when the caller took it."""
    try:
        key = (origin, Limits.from_settings(), stamp(origin) if stamped is None else stamped)
    except RuntimeFailure:
        return True
    return _failed_reads.remembered(key, time.monotonic()) is not None


def describe(
    origin: Origin, deadline: float | None = None, stamped: str | None = None
) -> dict[str, Any]:
    """Import the plugin in a plugin process and return what it found: ``manifest`` (JSON,
    each tool's handler replaced by ``True``/``False``; ``None`` with ``too_large``, its
    size, when over ``MAX_MANIFEST_BYTES``), ``problem`` (the exception type the import or
    the manifest callable raised), ``violations`` and ``isolation``.  ``deadline``
    (``time.monotonic()``): the read is cut there, ``ReadDeferred``, whatever the plugin's
    own limits leave.  ``stamped``: the package's ``stamp``, when the caller took it
    before (the outcome is remembered by what the caller decided from).

    Raises ``RuntimeFailure`` (``PATH_UNSAFE``) for a package past the walk limits, before
    any process; a failure remembered (``_Failures``) without one; ``IsolationUnavailable``
    where plugin code cannot be isolated here."""
    global _capabilities, reads_started
    limits = Limits.from_settings()
    remembered = (origin, limits, stamp(origin) if stamped is None else stamped)
    failed = _failed_reads.remembered(remembered, time.monotonic())
    if failed is not None:
        raise RuntimeFailure(failed.code, failed.detail)
    reads_started += 1
    try:
        worker = Worker.started(origin, limits, "manifest", deadline=deadline)
    except (IsolationUnavailable, ReadDeferred):
        raise  # this host, or the caller's time, not the package: asked again next time
    except RuntimeFailure as exc:
        _failed_reads.failed(remembered, exc, time.monotonic())
        raise
    _failed_reads.succeeded(remembered)
    try:
        with _capabilities_lock:
            _capabilities = _host_view(worker.isolation)
        return {
            "manifest": worker.ready.get("manifest"),
            "too_large": worker.ready.get("too_large", 0),
            "problem": _name(worker.ready.get("problem")),
            "violations": _violation_list(worker.ready.get("violations")),
            "isolation": worker.isolation,
        }
    finally:
        worker.close()


def capabilities() -> dict[str, Any]:
    """What this host gives plugin processes: ``{"isolated": bool, "seccomp": bool,
    "landlock": ABI or 0, ...}`` (found out once per process by starting one)."""
    global _capabilities
    with _capabilities_lock:
        if _capabilities is not None:
            return dict(_capabilities)
    probe = Origin("json:dumps", os.path.dirname(os.__file__), "json")
    try:
        worker = Worker.started(probe, Limits.from_settings(), "probe")
    except RuntimeFailure as exc:
        found: dict[str, Any] = {
            "isolated": False,
            "reason": reason_of(exc.detail),
            "why": exc.detail or exc.code,
        }
    else:
        found = _host_view(worker.isolation)
        worker.close()
    with _capabilities_lock:
        _capabilities = found
    return dict(found)


def _host_view(isolation: Mapping[str, Any]) -> dict[str, Any]:
    """A plugin process's ``isolation`` as what this host gives plugin processes: the paths
    whose Landlock rule the kernel refused are that plugin's (its package, its directory),
    not the host's."""
    return {
        **isolation,
        "landlock_refused": [],
        "landlock_refused_count": 0,
    }


def isolation_label(trusted: bool, enforced: Mapping[str, Any] | None = None) -> str:
    """How an instance's tools run on this host, in words (``webfetch plugin list``):
    ``enforced``, what the plugin's own process enforced (``registry.isolation``), where
    one was started; otherwise what this host gives plugin processes (``capabilities``)."""
    if trusted:
        return "trusted: in this process, audit hook only (check W032)"
    found = dict(enforced) if enforced else capabilities()
    if not found.get("isolated"):
        return (
            f"none: untrusted plugins do not run here ({found.get('reason')}: "
            f"{bubblewrap.REASONS.get(str(found.get('reason')), '')})"
        )
    landlock = found.get("landlock")
    refused = found.get("landlock_refused_count") or 0
    if landlock and refused:
        files = (
            f"Landlock ABI {landlock}, {refused} path rule{'s' if refused != 1 else ''} "
            "refused by the kernel (left out, not readable)"
        )
    elif landlock:
        files = f"Landlock ABI {landlock}"
    else:
        why = found.get("landlock_error")
        files = f"no Landlock ({why})" if why else "no Landlock"
    cgroup = ", ".join(sorted(found.get("cgroup") or {}))
    limits = f"; cgroup: {cgroup}" if cgroup else ""
    return (
        "sandboxed process (bubblewrap: user, pid, net, ipc, uts, mount namespaces; "
        f"seccomp allow-list; {files}{limits})"
    )


def reason_of(detail: str) -> str:
    """The stable reason (``bubblewrap.REASONS``) in an ``IsolationUnavailable`` detail."""
    head = detail.split(":", 1)[0].strip()
    return head if head in bubblewrap.REASONS else "sandbox_failed"


def _name(raw: Any) -> str:
    """An exception's type name as the plugin process reported it: a plugin chooses it, so
    only name characters are kept (it reaches logs and check messages)."""
    return re.sub(r"[^\w.]", "?", str(raw or ""))[:100]


def _violation_list(raw: Any) -> list[tuple[str, str, int | None]]:
    found: list[tuple[str, str, int | None]] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, list) and len(item) == 3:
            port = item[2] if isinstance(item[2], int) and not isinstance(item[2], bool) else None
            found.append((str(item[0])[:100], str(item[1])[:255], port))
    return found[:100]


# -- one call ----------------------------------------------------------------------------

_ERROR_CLASSES = (FetchTimeout, ResponseTooLarge, FetchError, ResolutionError)


def _perform(
    message: Mapping[str, Any], http: Any, deadline: float, ending: Cancellation
) -> dict[str, Any]:
    """One request of the plugin, decided and sent by the host-owned client, ended with
    the call (``ending``: the call's watch cancels it at its ``deadline``, a
    ``time.monotonic()``, too) whatever its own timeout: a request the call's time ran
    out in fails the call ``plugin_timeout`` (issue 30 attack 6, finding 6: a request was
    read until ``WEBFETCH_TIMEOUT``, past the wall bound).  Its own timeout stops at the
    deadline and ``REQUEST_MARGIN``: a backstop, should the watch not run."""
    if time.monotonic() >= deadline:
        raise RuntimeFailure("plugin_timeout", "wall time")
    reply = _request(message, http, deadline + REQUEST_MARGIN, ending)
    if time.monotonic() >= deadline:
        raise RuntimeFailure("plugin_timeout", "wall time during a request")
    return reply


def _request(
    message: Mapping[str, Any], http: Any, deadline: float, ending: Cancellation
) -> dict[str, Any]:
    try:
        content: Any = message.get("content")
        if "content_b64" in message:
            content = decode_bytes(message["content_b64"])
        response = http.request(
            message.get("method"),
            message.get("url"),
            params=message.get("params"),
            headers=message.get("headers"),
            content=content,
            json=message.get("json"),
            data=message.get("data"),
            timeout=message.get("timeout"),
            deadline=deadline,
            cancellation=ending,
        )
    except EgressDenied as exc:  # already redacted by the client
        return {"error": {"class": "EgressDenied", "reason": exc.reason}}
    except WebFetchError as exc:
        kind = next((k.__name__ for k in _ERROR_CLASSES if isinstance(exc, k)), "WebFetchError")
        return {"error": {"class": kind}}
    except (TypeError, ValueError) as exc:
        # What the error says may quote the plugin's own text (a lone surrogate included):
        # the reply is sent as UTF-8, so what it cannot carry is replaced.
        said = str(exc)[:200].encode("utf-8", "replace").decode("utf-8")
        return {"error": {"class": type(exc).__name__, "message": said}}
    except ProtocolError:
        return {"error": {"class": "TypeError", "message": "invalid request body"}}
    except Exception as exc:  # a foreign error the client did not map: nothing of it leaks
        logger.warning("plugin request failed in the host: %s", type(exc).__name__)
        return {"error": {"class": "WebFetchError"}}
    return {
        "response": {
            "status": response.status_code,
            "headers": [list(pair) for pair in response.headers.multi_items()],
            "content_b64": _encode(response.content),
            "url": str(response.request.url),
        }
    }


def execute(
    origin: Origin,
    key: Any,
    call: Mapping[str, Any],
    http: Any,
    *,
    limits: Limits | None = None,
) -> CallOutcome:
    """Run one tool call in a plugin process of ``key`` (warm from the pool, or new).

    ``call``: ``tool``, ``arguments``, ``config``, ``plugin``, ``alias``, ``reference``.
    ``http``: the host-owned client that performs the plugin's requests.
    Raises ``RuntimeFailure`` (with its stable code) when the process misbehaves, or,
    before any process is taken, when the call cannot be sent as UTF-8 JSON
    (``invalid_arguments`` for its arguments, ``plugin_call_unencodable`` for the rest:
    issue 30, attack 16, finding 3)."""
    try:
        encode(call)
    except UnencodableMessage as exc:
        try:
            encode({"arguments": call.get("arguments")})
        except UnencodableMessage:
            raise RuntimeFailure("invalid_arguments", "the arguments are not UTF-8 JSON") from exc
        raise RuntimeFailure("plugin_call_unencodable", str(exc)) from exc
    limits = limits or Limits.from_settings()
    worker = _pool.acquire(key, bubblewrap.site_inputs())
    if worker is None:
        worker = Worker.started(origin, limits, str(key[0]) if isinstance(key, tuple) else "call")
    # The call's bounds hold wherever the host waits: the kernel's CPU limit (``bounds``),
    # ``recv``'s poll, and a watch for the rest (a request, a send, its threads settling
    # in ``Pool.release``).
    poll = worker.bounds(limits.cpu_seconds)
    deadline = time.monotonic() + limits.wall_seconds
    # Every request the host performs for the call is tied to it: ended where the call's
    # end always passes (``_Watch.end``), whatever ends it.
    ending = Cancellation()
    with _Watch(worker, poll, ending, deadline) as watch:
        try:
            outcome = _run(worker, call, http, limits, poll, deadline, ending)
            if worker.calls == 0:  # what its import tried, on the record of its first call
                outcome.violations[:0] = _violation_list(worker.ready.get("violations"))
        except BaseException:
            worker.kill()
            raise
        worker.calls += 1
        _pool.release(key, worker, limits.pool_size, watch)
    if worker.breach is not None:
        # Past a bound while the host settled its threads: the process is killed (a pooled
        # one is found dead by ``Pool.acquire``), the call fails.
        worker.kill()
        raise worker.breach
    return outcome


def _run(
    worker: Worker,
    call: Mapping[str, Any],
    http: Any,
    limits: Limits,
    poll: Any,
    deadline: float,
    ending: Cancellation,
) -> CallOutcome:
    """The call's exchange (``_exchange``); a bound the watch found crossed meanwhile is
    what the call fails with, whatever the wait it ended said (a closed channel, a
    timeout)."""
    try:
        return _exchange(worker, call, http, limits, poll, deadline, ending)
    except RuntimeFailure as exc:
        if worker.breach is not None and exc is not worker.breach:
            raise worker.breach from exc
        raise
    except (ProtocolError, OSError) as exc:
        if worker.breach is not None:
            raise worker.breach from exc
        raise


def _exchange(
    worker: Worker,
    call: Mapping[str, Any],
    http: Any,
    limits: Limits,
    poll: Any,
    deadline: float,
    ending: Cancellation,
) -> CallOutcome:
    requests = 0
    call_id = next(_call_ids)
    try:
        worker.channel.send({**call, "op": "call", "call_id": call_id}, deadline)
        while True:
            message = worker.channel.recv(deadline, poll=poll)
            if message["op"] == "http":
                request_id: Any = message.get("id")
                if not _is_int(request_id) or not 0 < request_id < 2**53:
                    raise ProtocolViolation("http: id is not a positive integer")
                requests += 1
                if requests > limits.max_requests:
                    raise RuntimeFailure("plugin_limit", "requests per call")
                reply = _perform(message, http, deadline, ending)
                if worker.breach is not None:  # past a bound while the request ran
                    raise worker.breach
                worker.channel.send({"op": "http_reply", "id": request_id, **reply}, deadline)
            elif message["op"] == "result":
                if message.get("call_id") != call_id or not _is_int(message.get("call_id")):
                    raise ProtocolViolation("result: an answer to another call")
                worker.hooks_changed = message.get("hooks_changed") is not None
                # Stopped at once (``Pool.release`` reads it stopped): it stops while the
                # host reads the result and looks at its threads and memory.
                with contextlib.suppress(OSError):
                    worker.pause()
                poll()  # what a call too short for a poll left: threads, files
                return _outcome(message, limits.max_output_bytes)
            else:
                raise RuntimeFailure("plugin_crashed", f"unexpected {message['op'][:40]!r}")
    except ChannelTimeout as exc:
        raise RuntimeFailure("plugin_timeout", "wall time") from exc
    except ChannelClosed as exc:
        if worker.breach is not None:  # killed by the watch, past a bound
            raise worker.breach from exc
        try:
            code: int | None = worker.process.wait(2)
        except subprocess.TimeoutExpired:
            code = None
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):  # bwrap reports 128 + signal
            raise RuntimeFailure("plugin_limit", "CPU time") from exc
        raise RuntimeFailure("plugin_crashed", f"the plugin process ended ({code})") from exc
    except UnencodableMessage as exc:  # this end's message: not the plugin's doing
        raise RuntimeFailure("plugin_call_unencodable", str(exc)) from exc
    except ProtocolError as exc:
        if "over the cap" in str(exc):
            raise RuntimeFailure("plugin_limit", f"protocol: {exc}") from exc
        raise ProtocolViolation(str(exc)[:200]) from exc


_RESULT_TYPES: dict[str, tuple[type, ...]] = {
    "kind": (str,),
    "text": (str,),
    "ok": (bool,),
    "reason": (str,),
    "code": (str,),
    "what": (str,),
    "error": (str,),
    "violations": (list,),
    "hooks_changed": (bool,),
}


def _outcome(message: Mapping[str, Any], max_output_bytes: int) -> CallOutcome:
    for name, types in _RESULT_TYPES.items():
        if name in message and not isinstance(message[name], types):
            raise ProtocolViolation(f"result: {name} is not {types[0].__name__}")
    kind = str(message.get("kind", ""))
    outcome = CallOutcome(kind=kind, violations=_violation_list(message.get("violations")))
    if kind in ("text", "json", "tool_result"):
        outcome.text = str(message.get("text", ""))
        # The host's own bound: the guest's cap is the plugin's process, not a guarantee.
        encoded = outcome.text.encode("utf-8", "surrogatepass")
        if len(encoded) > max_output_bytes:
            raise RuntimeFailure("plugin_limit", "output size")
        outcome.ok = bool(message.get("ok", True))
        if kind == "json":
            # Read as a message is (size, depth, values; strict UTF-8 and JSON): a text the
            # guest would never send is a protocol violation, and its process is ended
            # (issue 30 attack 6, finding 3).
            try:
                outcome.value = parse(encoded, "a json result")
            except ProtocolError as exc:
                raise ProtocolViolation(f"result: {exc}") from exc
    elif kind == "egress_denied":
        outcome.reason = str(message.get("reason", ""))[:100]
    elif kind == "webfetch_error":
        outcome.code = str(message.get("code", ""))[:100]
    elif kind == "limit":
        raise RuntimeFailure("plugin_limit", str(message.get("what", ""))[:40])
    else:
        outcome.kind = "error" if kind != "not_text" else kind
        outcome.error = _name(message.get("error"))
    return outcome
