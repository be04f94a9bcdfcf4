"""A root host keeps the outer uids it verified (docs/decisions/0063-a-host-keeps-the-uids-it-
verified.rst): a plugin process's uid goes back to its host process's stock, still locked,
up to ``identity.STOCK_SIZE``; the next start takes it without reading ``/proc``, and the
launcher ends whatever still runs with it (``kill(-1, SIGKILL)`` as the uid) first.

History: issue 30, round 23, finding 1 (a cold start read the status of every process of
the machine: ``test_no_lock_route_and_the_cold_start_uid_scan.py``).  Observed from the
host: the lock file's bytes from another descriptor, a process started under a kept uid, a
forked child and a second host process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

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
