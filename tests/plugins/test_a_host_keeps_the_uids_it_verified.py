"""A root host keeps the outer uids it verified (docs/decisions/0063-a-host-keeps-the-uids-it-
verified.rst): a plugin process's uid goes back to its host process's stock, still locked,
up to ``identity.STOCK_SIZE``; the next start takes it without reading ``/proc``, and the
launcher ends whatever still runs with it (``kill(-1, SIGKILL)`` as the uid) first.

Every descriptor of the lock file a host process holds is in one registry, whatever its
identity's state (a plugin process's, idle or in a call; a stocked uid's; one being
acquired), and so is every descriptor it holds for a plugin process (its channel, a start's
pipes): a forked child closes its copies of them all, never unlocking, and holds no uid's
lock and no plugin process's channel.

History: issue 30, round 23, finding 1 (a cold start read the status of every process of
the machine: ``test_no_lock_route_and_the_cold_start_uid_scan.py``).
History: issue 30, round 24, finding 1 (a child forked while a call was in flight kept that
process's uid locked for its whole life: the process was in neither the pool's idle list
nor the stock, which alone were closed in the child).  Observed from the host: the lock
file's bytes from another descriptor, a process started under a kept uid, a forked child's
own descriptors (``/proc/self/fd``) and a second host process.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from django_webfetch.plugins.runtime import host, identity
from django_webfetch.plugins.runtime.host import capabilities

pytestmark = pytest.mark.django_db

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the lock file is root's")
as_root_with_sandbox = pytest.mark.skipif(
    os.geteuid() != 0 or not capabilities().get("isolated"),
    reason="a root site (CI) where the plugin sandbox can be built",
)

#: Uids of this process's own (the locks are the machine's: another run of the suite, or
#: the other worker, takes another corner).
_BASE = 7_000_000 + (os.getpid() % 10_000) * 100

_BENIGN = """
def ping(plugin, arguments):
    return "pong"
"""


def _drain() -> list[identity.OuterIdentity]:
    """Take every uid this process keeps, so that the test sees only its own."""
    return [identity.acquire(uid, 1) for uid in identity.stocked()]


def _free(uids: list[int]) -> list[int]:
    """Which of ``uids`` no one holds: their byte of the lock file taken (and given back)
    from a descriptor of its own, as another host process would."""
    fd = identity._open_lock()
    try:
        free = []
        for uid in uids:
            if identity._lock(fd, uid):
                identity._unlock(fd, uid)
                free.append(uid)
        return free
    finally:
        os.close(fd)


@as_root_with_sandbox
def test_a_leftover_process_of_a_kept_uid_is_killed_before_the_next_starts(tmp_path):
    """A process still running with a kept uid (here one the test starts under it, as a
    plugin process being torn down would be) is ended by the launcher before the next
    plugin process starts under that uid; the call works."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    origin = _plugin(tmp_path / "k", "webfetch_keptuid", "keptuid", _BENIGN, {"ping": "ping"})
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)
    key = ("keptuid", 1)
    message = {"tool": "ping", "arguments": {}, "config": {}, "plugin": "keptuid",
               "alias": "keptuid", "reference": "keptuid"}  # fmt: skip

    def call_and_uid() -> int:
        outcome = host.execute(origin, key, message, None, limits=limits)
        assert outcome.kind == "text" and outcome.text == "pong", outcome
        worker = host._pool._idle[key][0]
        assert worker.identity is not None
        return worker.identity.uid

    host.shutdown()  # first: the pool's idle processes' uids go to the stock, then drained
    drained = _drain()
    leftover: subprocess.Popen[bytes] | None = None
    try:
        uid = call_and_uid()
        host.shutdown()  # its process ends: the uid is kept, locked
        assert identity.stocked() == (uid,)
        assert _free([uid]) == []
        leftover = subprocess.Popen(
            ["sleep", "300"], user=uid, group=uid, extra_groups=[], start_new_session=True
        )
        assert call_and_uid() == uid  # the kept uid, handed out again
        assert leftover.wait(30) == -signal.SIGKILL  # ended by the launcher
    finally:
        if leftover is not None and leftover.poll() is None:
            leftover.kill()  # the process this test started
            leftover.wait()
        host.shutdown()
        for one in drained:
            one.release()


@as_root
def test_a_forked_child_and_another_host_never_take_a_kept_uid():
    """A forked child drops its parent's stock without unlocking it (the parent keeps the
    uid: the child cannot take it, nor can another host process), and the parent hands it
    out again."""
    uid = _BASE + 50
    script = (
        "import json, os, sys\n"
        "from django_webfetch.plugins.runtime import identity\n"
        "uid = int(sys.argv[1])\n"
        "identity.acquire(uid, 1).release()\n"
        "got = {'kept': list(identity.stocked())}\n"
        "read, write = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        child = {'stock': list(identity.stocked())}\n"
        "        try:\n"
        "            identity.acquire(uid, 1)\n"
        "            child['took'] = True\n"
        "        except identity.IdentityUnavailable:\n"
        "            child['took'] = False\n"
        "        os.write(write, json.dumps(child).encode())\n"
        "    finally:\n"
        "        os._exit(0)\n"
        "os.close(write)\n"
        "got['child'] = json.loads(os.read(read, 4096))\n"
        "os.waitpid(pid, 0)\n"
        "got['kept_after'] = list(identity.stocked())\n"
        "print(json.dumps(got), flush=True)\n"
        "sys.stdin.readline()\n"
        "print(json.dumps({'again': identity.acquire(uid, 1).uid}), flush=True)\n"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", script, str(uid)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None and other.stdin is not None
        got = json.loads(other.stdout.readline())
        assert got == {"kept": [uid], "child": {"stock": [], "took": False}, "kept_after": [uid]}
        assert _free([uid]) == []  # the parent's lock outlived the child's copy
        with pytest.raises(identity.IdentityUnavailable):
            identity.acquire(uid, 1)  # this process: another host
        other.stdin.write("\n")
        other.stdin.flush()
        assert json.loads(other.stdout.readline()) == {"again": uid}
        assert other.wait(60) == 0
    finally:
        if other.poll() is None:
            other.kill()  # the process this test started
            other.wait()
        for stream in (other.stdin, other.stdout):
            if stream is not None:
                stream.close()
    assert _free([uid]) == [uid]  # its holder gone, the lock with it


@as_root
def test_past_its_bound_the_stock_unlocks():
    """More processes end than the stock holds: the last ``STOCK_SIZE`` uids are kept
    locked, the oldest unlocked to make room (another descriptor takes their byte: a uid
    of a range no longer asked for holds no slot); a kept uid is handed out again, oldest
    first."""
    drained = _drain()
    count = identity.STOCK_SIZE + 2
    try:
        held = [identity.acquire(_BASE, count) for _ in range(count)]
        order = [one.uid for one in held]
        assert sorted(order) == list(range(_BASE, _BASE + count))
        for one in held:
            one.release()
        assert identity.stocked() == tuple(order[-identity.STOCK_SIZE :])
        assert _free(order) == order[: -identity.STOCK_SIZE]
        again = identity.acquire(_BASE, count)
        assert again.uid == order[-identity.STOCK_SIZE]
        again.release()
    finally:
        for one in drained:
            one.release()


def _child_holds(fork_reader: int) -> dict[str, object]:
    """What the descriptors of the child that wrote to ``fork_reader`` are (its report)."""
    data = b""
    while chunk := os.read(fork_reader, 65536):
        data += chunk
        if data.endswith(b"\n"):
            break
    return json.loads(data)


def _fork_and_report(channels: set[int]) -> tuple[int, int, int, dict[str, object]]:
    """Fork a child that runs on without ``exec`` (as a Celery prefork child or a
    ``multiprocessing`` fork does) and reports what it holds: each descriptor of the lock
    file, each socket that is a plugin process's channel (its inode among ``channels``),
    and the registries.  The child lives until its ``go`` pipe is closed; returns its pid,
    that pipe's write end, the report pipe's read end and the report."""
    report_read, report_write = os.pipe()
    go_read, go_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child reports through its pipe)
        try:
            os.close(report_read)
            os.close(go_write)
            lock = os.stat(identity.lock_path())
            found: dict[str, object] = {"locks": [], "channels": []}
            for name in os.listdir("/proc/self/fd"):
                try:
                    info = os.stat(f"/proc/self/fd/{name}")
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) == (lock.st_dev, lock.st_ino):
                    found["locks"].append(int(name))  # type: ignore[attr-defined]
                elif stat.S_ISSOCK(info.st_mode) and info.st_ino in channels:
                    found["channels"].append(int(name))  # type: ignore[attr-defined]
            found["registered"] = [*identity.descriptors(), *host.held_descriptors()]
            os.write(report_write, json.dumps(found).encode() + b"\n")
            os.read(go_read, 1)
        finally:
            os._exit(0)
    os.close(report_write)
    os.close(go_read)
    return pid, go_write, report_read, _child_holds(report_read)


@as_root
def test_a_child_forked_during_a_call_holds_no_lock_of_its_uid():
    """A uid held for a process whose call is in flight (another thread's: in neither the
    pool's idle list nor the stock) is not held by a child forked then: the child closed
    its copy of the descriptor (never unlocking: the parent keeps the lock), so once the
    host lets the uid go (released to a full stock, its oldest unlocked: decision 0063)
    another host process takes it, while the child still runs."""
    base = _BASE + 70
    drained = _drain()
    in_flight = identity.acquire(base, 1)  # a plugin process's, its call in flight
    others: list[identity.OuterIdentity] = []
    pid, go, report, found = _fork_and_report(set())
    try:
        assert found == {"locks": [], "channels": [], "registered": []}, found
        assert _free([base]) == []  # the parent's lock outlived the child's close
        in_flight.release()  # the call ended, its process gone: into the stock
        others = [
            identity.acquire(base + 1, identity.STOCK_SIZE) for _ in range(identity.STOCK_SIZE)
        ]
        for one in others:
            one.release()  # the stock is full: its oldest (``base``) is unlocked
        assert base not in identity.stocked()
        assert _free([base]) == [base], "the forked child holds the uid's lock"
    finally:
        os.close(go)
        os.close(report)
        os.waitpid(pid, 0)
        for one in [*drained, *others]:
            one.release()


_WAITS = """
import signal

def wait(plugin, arguments):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    signal.sigwait({signal.SIGUSR1})
    return "woke"
"""


def _waiting(uids: range) -> list[int]:
    """The plugin processes (as this host sees them: a guest, not its bwrap) running under
    one of ``uids`` that wait in ``sigwait`` (their ``wchan``): each inside its call
    (``_WAITS``, ``SIGUSR1`` blocked: the signal ends the wait, it cannot kill)."""
    from tests.plugins.test_plugin_process_cannot_reach_the_site import descendants

    pids = []
    for pid in descendants():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            if argv[0].endswith(b"bwrap") or b"runtime.guest import main" not in b" ".join(argv):
                continue
            with open(f"/proc/{pid}/status", "rb") as fh:
                uid = next(int(line.split()[1]) for line in fh if line.startswith(b"Uid:"))
            with open(f"/proc/{pid}/wchan", "rb") as fh:
                waits = b"sigtimedwait" in fh.read()
            if uid in uids and waits:
                pids.append(pid)
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return pids


@as_root_with_sandbox
def test_a_fork_while_calls_are_in_flight_leaves_the_child_no_lock_and_no_channel(tmp_path):
    """Three calls in flight in other threads (real plugin processes, each waiting inside
    its call), and a fork: the child holds no descriptor of the lock file and no plugin
    process's channel (each socket the parent holds for them, told by its inode), and its
    registries are empty; the calls then end as they would have, and the uids their
    processes held, once the host lets them go, are free while the child still runs."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    origin = _plugin(tmp_path / "w", "webfetch_forkwait", "forkwait", _WAITS, {"wait": "wait"})
    uids = range(_BASE + 60, _BASE + 70)
    limits = host.Limits(30, 120, 256 << 20, 1 << 16, 5, 1, uid_range=(uids.start, len(uids)))
    message = {"tool": "wait", "arguments": {}, "config": {}, "plugin": "forkwait",
               "alias": "forkwait", "reference": "forkwait"}  # fmt: skip
    outcomes: list[object] = []

    def call(index: int) -> None:
        try:
            outcomes.append(host.execute(origin, ("forkwait", index), message, None, limits=limits))
        except BaseException as exc:  # reported by the assertion below
            outcomes.append(exc)

    host.shutdown()
    drained = _drain()
    threads = [threading.Thread(target=call, args=(index,)) for index in range(3)]
    waiting: list[int] = []
    others: list[identity.OuterIdentity] = []
    pid = go = report = -1
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 180  # a bound on the wait, not an assertion
        while len(waiting := _waiting(uids)) < 3 and time.monotonic() < deadline:
            assert not outcomes, outcomes  # no call ended before all three were in flight
            time.sleep(0.05)
        assert len(waiting) == 3, waiting
        in_flight = [uid for uid in uids if _free([uid]) == []]
        assert len(in_flight) == 3, in_flight  # three uids locked, none of the stock
        channels = {
            os.fstat(fd).st_ino
            for fd in host.held_descriptors()
            if stat.S_ISSOCK(os.fstat(fd).st_mode)
        }
        assert len(channels) == 3, channels  # the parent holds each process's channel
        assert len(identity.descriptors()) >= 3
        pid, go, report, found = _fork_and_report(channels)
        assert found == {"locks": [], "channels": [], "registered": []}, found
        for plugin in waiting:
            os.kill(plugin, signal.SIGUSR1)  # each call ends
        for thread in threads:
            thread.join(180)
        assert all(getattr(outcome, "text", None) == "woke" for outcome in outcomes), outcomes
        assert len(outcomes) == 3
        host.shutdown()  # whatever was pooled ends: each uid into the stock
        others = [
            identity.acquire(_BASE + 80, identity.STOCK_SIZE) for _ in range(identity.STOCK_SIZE)
        ]
        for one in others:
            one.release()  # the stock full of others: the three are unlocked
        assert _free(in_flight) == in_flight, "the forked child holds a uid's lock"
    finally:
        for thread in threads:
            thread.join(180)
        if pid > 0:
            os.close(go)
            os.close(report)
            os.waitpid(pid, 0)
        host.shutdown()
        for one in [*drained, *others]:
            one.release()
