"""Issue 30, round 20, finding 5: no pooled process holds data queued in kernel memory.

A descriptor that can queue data (a socket, a pipe, ...) holds its queued bytes in no
``VmRSS``: round 18 made the pool compare which descriptors a process holds with those
it held at ready, but a socketpair made at import, empty at ready, is the same descriptor
once a call has filled it.  The pool now keeps a process only when every descriptor it
holds besides its channel is of a kind that cannot queue data (``host._queueing``), and
its channel holds nothing unread (``host._queued``): ``plugin_queues_held`` otherwise
(decision 0059, amended).

Two halves: every kind of descriptor this kernel makes, classed in the host's own
process against what it measures of it (no sandbox needed); and every kind a plugin can
try to make at import, in its real sandbox: refused by the sandbox, or never pooled once
a call left data in it, or holding nothing the host does not count.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import logging
import os
import select
import signal
import socket
import stat
import struct
import tempfile
import termios
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import host

_libc = ctypes.CDLL(None, use_errno=True)


def _checked(fd: int) -> int:
    if fd < 0:
        raise OSError(ctypes.get_errno(), "refused")
    return fd


def _classed(fd: int) -> bool:
    """What the host says of descriptor ``fd`` of this process: can it queue data?"""
    link = os.readlink(f"/proc/self/fd/{fd}")
    info = os.stat(f"/proc/self/fd/{fd}")
    return host._queueing(link, info.st_mode, info.st_rdev)


def _inq(fd: int) -> int:
    (count,) = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))
    return int(count)


def _fill(fd: int) -> int:
    """Writes to ``fd`` (non-blocking) until the kernel takes no more: the bytes queued."""
    os.set_blocking(fd, False)
    queued = 0
    with contextlib.suppress(BlockingIOError):
        while queued < 64 << 20:
            queued += os.write(fd, b"x" * 4096)
    return queued


@contextlib.contextmanager
def _held(*fds: int) -> Iterator[None]:
    try:
        yield
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _socketpair(kind: int) -> Callable[[], int]:
    def measure() -> int:
        a, b = socket.socketpair(socket.AF_UNIX, kind)
        with a, b:
            assert _classed(a.fileno()) and _classed(b.fileno())
            a.setblocking(False)
            queued = 0
            with contextlib.suppress(BlockingIOError):
                while queued < 64 << 20:
                    queued += a.send(b"x" * 1024)
            return queued

    return measure


def _pipe() -> int:
    r, w = os.pipe()
    with _held(r, w):
        assert _classed(r) and _classed(w)
        return _fill(w)


def _fifo() -> int:
    with tempfile.TemporaryDirectory() as top:
        os.mkfifo(os.path.join(top, "fifo"))
        fd = os.open(os.path.join(top, "fifo"), os.O_RDWR | os.O_NONBLOCK)
        with _held(fd):
            assert _classed(fd)
            return _fill(fd)


def _memfd() -> int:
    fd = os.memfd_create("queued")
    with _held(fd):
        assert _classed(fd)
        os.write(fd, b"x" * (1 << 20))
        # Reopened read-only through /proc: still the memfd's pages.
        again = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
        with _held(again):
            assert _classed(again)
        return os.fstat(fd).st_size


def _inotify() -> int:
    fd = _checked(_libc.inotify_init1(os.O_NONBLOCK))
    with _held(fd), tempfile.TemporaryDirectory() as top:
        assert _classed(fd)
        _checked(_libc.inotify_add_watch(fd, top.encode(), 0x100))  # IN_CREATE
        for n in range(20):
            open(os.path.join(top, f"f{n}"), "w").close()  # noqa: SIM115
        return _inq(fd)


def _signalfd() -> int:
    mask = ctypes.c_uint64(1 << (signal.SIGUSR2 - 1))
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    try:
        fd = _checked(_libc.signalfd(-1, ctypes.byref(mask), 0))
        with _held(fd):
            assert _classed(fd)
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR2)
            return len(os.read(fd, 128))  # a siginfo: what it held
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _timerfd() -> int:
    fd = _checked(_libc.timerfd_create(1, 0))  # CLOCK_MONOTONIC
    with _held(fd):
        assert _classed(fd)
        return 8  # an expiry count: not a queue, but a kind the host does not know


def _procfs() -> int:
    fd = os.open("/proc/self/mountinfo", os.O_RDONLY)
    with _held(fd):
        assert _classed(fd)
        return len(os.read(fd, 1))  # its seq_file buffer is allocated now, kept open


def _namespace() -> int:
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    with _held(fd):
        assert _classed(fd)
        return 1  # it holds a whole network namespace alive


#: Kinds of descriptor that can hold kernel memory its process's footprint does not
#: count, each made here, checked classed as queueing by the host, and filled: what it
#: held (bytes, or a count of what it kept).
_QUEUEING = {
    "socketpair stream": _socketpair(socket.SOCK_STREAM),
    "socketpair datagram": _socketpair(socket.SOCK_DGRAM),
    "socketpair seqpacket": _socketpair(socket.SOCK_SEQPACKET),
    "pipe": _pipe,
    "fifo": _fifo,
    "memfd (and reopened read-only)": _memfd,
    "inotify": _inotify,
    "signalfd": _signalfd,
    "timerfd": _timerfd,
    "a /proc file": _procfs,
    "a namespace": _namespace,
}


@pytest.mark.parametrize("kind", sorted(_QUEUEING))
def test_every_kind_that_can_queue_data_is_classed_queueing(kind):
    """Each kind of descriptor this kernel makes that can keep data (or other kernel
    memory) outside a process's footprint is one the host does not pool a process with
    (``host._queueing``), shown here in the host's own process, where each can be made."""
    assert _QUEUEING[kind]() > 0


def _quiet(path: str, flags: int) -> Callable[[], bool]:
    def classed() -> bool:
        fd = os.open(path, flags)
        with _held(fd):
            return _classed(fd)

    return classed


def _eventfd() -> bool:
    fd = os.eventfd(0)
    with _held(fd):
        return _classed(fd)


def _epoll() -> bool:
    with select.epoll() as ep:
        return _classed(ep.fileno())


#: Kinds that hold no queue: a regular file (its bytes on a disk, or in the private
#: ``/tmp`` the footprint counts), a directory, /dev's null, zero and urandom, an
#: eventfd (one counter) and an epoll (its watches), both shown in ``fdinfo``.
_QUIET = {
    "a regular file, read-only": _quiet(__file__, os.O_RDONLY),
    "a regular file, written": _quiet(tempfile.gettempdir() + "/q20c-held", os.O_RDWR | os.O_CREAT),
    "a directory": _quiet("/", os.O_RDONLY | os.O_DIRECTORY),
    "/dev/null": _quiet("/dev/null", os.O_RDWR),
    "/dev/zero": _quiet("/dev/zero", os.O_RDONLY),
    "/dev/urandom": _quiet("/dev/urandom", os.O_RDONLY),
    "eventfd": _eventfd,
    "epoll": _epoll,
}


@pytest.mark.parametrize("kind", sorted(_QUIET))
def test_the_kinds_that_hold_no_queue_are_classed_quiet(kind):
    try:
        assert _QUIET[kind]() is False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tempfile.gettempdir() + "/q20c-held")


_KINDS = st.sampled_from([stat.S_IFREG, stat.S_IFDIR, stat.S_IFCHR, stat.S_IFBLK,
                          stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFLNK, 0])  # fmt: skip


@given(
    link=st.one_of(
        st.text(max_size=40),
        st.builds(
            lambda k, n: f"{k}:[{n}]",
            st.sampled_from(["socket", "pipe", "net", "mnt", "anon_inode", "anon_inode:"]),
            st.integers(0),
        ),
        st.builds(lambda n: f"anon_inode:{n}", st.text(max_size=20)),
        st.builds(lambda n: f"/memfd:{n}", st.text(max_size=20)),
        st.builds(lambda n: f"/proc/{n}", st.text(max_size=20)),
    ),  # fmt: skip
    kind=_KINDS,
    major=st.integers(0, 300),
    minor=st.integers(0, 300),
)
def test_only_the_known_quiet_kinds_are_classed_quiet(link, kind, major, minor):
    """Whatever link, type and device a descriptor shows, the host calls it quiet only
    when it is one of the known kinds: a path (not a memfd's, not under ``/proc``) to a
    regular file, a directory or a memory device of ``_QUIET_DEVICES``, or an anonymous
    inode of ``_QUIET_ANONYMOUS``; anything else, a kind a later kernel adds, queues."""
    quiet = not host._queueing(link, kind | 0o600, os.makedev(major, minor))
    if not quiet:
        return
    if link.startswith("/"):
        assert not link.startswith(("/memfd:", "/proc/")) and link != "/proc"
        assert kind in (stat.S_IFREG, stat.S_IFDIR) or (
            kind == stat.S_IFCHR and (major, minor) in host._QUIET_DEVICES
        )
    else:
        assert link in ("anon_inode:[eventfd]", "anon_inode:[eventpoll]")


def test_the_channels_unread_bytes_are_measured_from_the_hosts_end():
    """The one socket a pooled process holds, its channel, is measured from the host's
    end (``host._queued``): what the host sent that the guest has not read (``SIOCOUTQ``)
    and what the guest sent that the host has not (``SIOCINQ``); nothing once read."""
    a, b = socket.socketpair()
    with a, b:
        assert host._queued(a) == host._queued(b) == 0
        a.sendall(b"x" * 1000)
        assert host._queued(a) > 0 and host._queued(b) > 0
        assert len(b.recv(4096)) == 1000
        assert host._queued(a) == host._queued(b) == 0
    assert host._queued(a) == -1  # closed: unreadable, never "empty"


# -- in the sandbox: what a plugin makes at import --------------------------------------

#: A plugin whose import makes descriptors of one kind (``make``, in ``_HELD``); ``made``
#: says what its import got (the errno that refused it, or how many it holds), ``fill``
#: leaves data in them (``queued``: how much), ``idle`` does nothing.
_BODY = """
import ctypes, errno, json, os, select, socket, sys

_HELD = []
_ERRNO = None


def _make():
{make}


try:
    _make()
except Exception as exc:  # OSError, or the audit hook's refusal of ctypes
    _ERRNO = getattr(exc, "errno", None) or -1


def made(plugin, arguments):
    return json.dumps({{"errno": _ERRNO, "held": len(_HELD)}})


def idle(plugin, arguments):
    return "idle"


def fill(plugin, arguments):
    queued = 0
{fill}
    return json.dumps({{"queued": queued}})
"""

_LIBC = "libc = ctypes.CDLL(None, use_errno=True)\n"


def _refused_by(call: str) -> str:
    return _LIBC + f"if {call} < 0:\n    raise OSError(ctypes.get_errno(), 'refused')\n"


_FILL_SOCKETS = """\
for s in _HELD:
    s.setblocking(False)
    try:
        while True:
            queued += s.send(b"x" * 65536)
    except BlockingIOError:
        pass
"""
_FILL_FDS = """\
os.set_blocking(_HELD[-1], False)
try:
    while True:
        queued += os.write(_HELD[-1], b"x" * 65536)
except BlockingIOError:
    pass
"""

#: kind -> (what its import does, what ``fill`` does, what is expected): ``refused``, the
#: sandbox refuses to make it; ``queues``, made, and a process holding it is never pooled;
#: ``changed``, made, and a call that leaves data in it changes its ``fdinfo`` (never
#: pooled: ``plugin_descriptors_changed``); ``counted``, what a call leaves in it is in the
#: footprint; ``quiet``, it holds nothing (the process is pooled).
_SANDBOX_KINDS: dict[str, tuple[str, str, str]] = {
    "socketpair stream": (
        "a, b = socket.socketpair()\n_HELD.extend([a, b])\n",
        _FILL_SOCKETS,
        "queues",
    ),
    "socketpair datagram": (
        "_HELD.extend(socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))\n",
        _FILL_SOCKETS,
        "refused",
    ),
    "socketpair seqpacket": (
        "_HELD.extend(socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET))\n",
        _FILL_SOCKETS,
        "refused",
    ),
    "pipe": ("_HELD.append(None)\n_HELD.extend(os.pipe())\n", _FILL_FDS, "queues"),
    "fifo": (
        "os.mkfifo('/tmp/fifo')\n"
        "_HELD.extend([None, os.open('/tmp/fifo', os.O_RDWR | os.O_NONBLOCK)])\n",
        _FILL_FDS,
        "refused",
    ),
    "memfd": ("_HELD.extend([None, os.memfd_create('held')])\n", _FILL_FDS, "refused"),
    "inotify": (_refused_by("libc.inotify_init1(0)"), "", "refused"),
    "timerfd": (_refused_by("libc.timerfd_create(1, 0)"), "", "refused"),
    "signalfd": (
        "mask = ctypes.c_uint64(1 << 11)\n"
        + _refused_by("libc.signalfd(-1, ctypes.byref(mask), 0)"),
        "",
        "refused",
    ),
    "a /proc file": (
        "_HELD.append(os.open('/proc/self/status', os.O_RDONLY))\n",
        "queued = len(os.pread(_HELD[0], 4096, 0))\n",
        "refused or queues",  # Landlock refuses /proc to the plugin, where it is
    ),
    "/dev/ptmx": ("_HELD.append(os.open('/dev/ptmx', os.O_RDWR))\n", "", "refused"),
    "eventfd": (
        "_HELD.append(os.eventfd(0, os.EFD_NONBLOCK))\n",
        "os.eventfd_write(_HELD[0], 5)\nqueued = 8\n",
        "changed",
    ),
    "epoll": (
        "_HELD.extend([select.epoll(), os.eventfd(0, os.EFD_NONBLOCK)])\n",
        "_HELD[0].register(_HELD[1], select.EPOLLIN)\nqueued = 1\n",
        "changed",
    ),
    "a file in /tmp, deleted": (
        "_HELD.append(os.open('held', os.O_RDWR | os.O_CREAT, 0o600))\nos.unlink('held')\n",
        "queued = os.write(_HELD[0], b'x' * (1 << 20))\n",
        "counted",
    ),
    "/dev/null, /dev/urandom, a directory, a read-only file": (
        "_HELD.extend([os.open(p, os.O_RDONLY) for p in\n"
        "              ('/dev/null', '/dev/urandom', '.', __file__)])\n",
        "queued = len(os.read(_HELD[1], 4096)) + len(os.pread(_HELD[3], 4096, 0))\n"
        "queued += len(os.read(_HELD[0], 64)) + len(os.listdir(_HELD[2]))\n",
        "quiet",
    ),
}


#: How the sandbox refuses a kind: seccomp's ``EPERM``, Landlock's ``EACCES``, a device
#: that is not in its ``/dev``, or the audit hook's refusal of ``ctypes`` (``-1``).
_REFUSED = (errno.EPERM, errno.EACCES, errno.ENOENT, errno.ENOSYS, -1)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", sorted(_SANDBOX_KINDS))
def test_a_process_holding_data_in_any_kind_of_descriptor_is_never_pooled(kind, tmp_path, caplog):
    """Round 20, finding 5's class: whatever kind of descriptor a plugin makes at import
    (each kind its sandbox lets it try: socketpairs of each type, a pipe, a FIFO, a
    memfd, an eventfd, an epoll, a timerfd, a signalfd, an inotify, a ``/proc`` file, a
    terminal, files and devices), either the sandbox refuses to make it, or a process
    holding it is never pooled once a call can have left data in it (``plugin_queues_held``,
    or ``plugin_descriptors_changed`` where the data shows in ``fdinfo``), or what a call
    leaves in it is counted in the process's footprint, or it holds nothing."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    make, fill, expected = _SANDBOX_KINDS[kind]
    body = _BODY.format(
        make=textwrap.indent(make, "    ") + "    pass\n",
        fill=textwrap.indent(fill or "pass\n", "    "),
    )
    origin = _plugin(tmp_path / "site", "webfetch_q20c", "q20c", body,
                     {"made": "made", "idle": "idle", "fill": "fill"})  # fmt: skip
    limits = host.Limits(5, 20, 256 << 20, 1 << 16, 5, 1)
    key = ("q20c", kind)

    def call(tool: str) -> dict[str, Any]:
        message = {"tool": tool, "arguments": {}, "config": {}, "plugin": "q20c",
                   "alias": "q20c", "reference": "q20c"}  # fmt: skip
        outcome = host.execute(origin, key, message, None, limits=limits)
        assert outcome.kind in ("text", "json"), outcome
        return json.loads(outcome.text) if outcome.text != "idle" else {}

    def pooled() -> Any:
        workers = list(host._pool._idle.get(key, []))
        assert len(workers) <= 1, workers
        return workers[0] if workers else None

    caplog.set_level(logging.INFO, logger="django_webfetch.plugins")
    host.shutdown()
    try:
        made = call("made")
        if expected == "refused or queues":
            expected = "queues" if made["errno"] is None else "refused"
        if expected == "refused":
            assert made["errno"] in _REFUSED, made
            assert made["held"] == 0, made
            assert pooled() is not None, "a process holding nothing more is pooled"
            return
        assert made["errno"] is None, made
        if expected == "queues":
            # Never pooled, not even empty: whatever a call queued would idle with it.
            assert pooled() is None
            said = [r.getMessage() for r in caplog.records if host.QUEUES_HELD in r.getMessage()]
            assert len(said) == 1, said
            assert call("fill")["queued"] >= 64 << 10
            assert pooled() is None
            return
        worker = pooled()
        assert worker is not None, "a process holding only quiet descriptors is pooled"
        queued = call("fill")["queued"]
        assert queued > 0
        if expected == "changed":
            assert pooled() is None
            said = [m for m in caplog.messages if host.DESCRIPTORS_CHANGED in m]
            assert len(said) == 1, said
        elif expected == "counted":
            kept = pooled()
            assert kept is not None and kept.pid == worker.pid
            now = host._footprint(kept.pid)
            assert now is not None and now - kept.footprint >= queued, (now, kept.footprint)
        else:
            kept = pooled()
            assert kept is not None and kept.pid == worker.pid
            assert host._queues(kept.pid, kept.channel_inode, kept.own_descriptors) == []
    finally:
        host.shutdown()
    assert not [m for m in caplog.messages if "unreadable" in m], caplog.messages


_RAW_REQUEST = """\
import json, struct
body = json.dumps({"op": "http", "id": 1, "method": "GET",
                   "url": "http://granted.lab.example/"}).encode()
os.write(int(sys.argv[-1]), struct.pack("!I", len(body)) + body)
"""


@pytest.mark.django_db
def test_a_process_whose_channel_holds_an_unread_reply_is_not_pooled(tmp_path, caplog):
    """A call that writes a request on its channel itself and answers at once leaves the
    host's reply unread in the guest's end (``SIOCOUTQ`` of the host's end): the process
    is not pooled (``plugin_queues_held``: ``channel``), or its guest, reading the stray
    reply instead of a call, ends itself; never pooled with the reply queued."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    body = _BODY.format(make="    pass\n", fill=textwrap.indent(_RAW_REQUEST, "    "))
    origin = _plugin(tmp_path / "site", "webfetch_q20c", "q20c", body,
                     {"made": "made", "idle": "idle", "fill": "fill"})  # fmt: skip
    limits = host.Limits(5, 20, 256 << 20, 1 << 16, 5, 1)
    key = ("q20c", "channel")
    message = {"tool": "fill", "arguments": {}, "config": {}, "plugin": "q20c",
               "alias": "q20c", "reference": "q20c"}  # fmt: skip
    caplog.set_level(logging.INFO, logger="django_webfetch.plugins")
    host.shutdown()
    try:
        idle = host.execute(origin, key, {**message, "tool": "idle"}, None, limits=limits)
        assert idle.kind == "text", idle
        assert host._pool._idle.get(key), "a process whose channel is empty is pooled"
        host.execute(origin, key, message, None, limits=limits)
        assert not host._pool._idle.get(key)
    finally:
        host.shutdown()
    said = [m for m in caplog.messages if host.QUEUES_HELD in m]
    assert all(m.endswith("channel") for m in said), said
