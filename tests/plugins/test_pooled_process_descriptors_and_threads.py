"""Issue 30, the fourth attack (session 5), findings 8 and 9: what a pooled plugin process
may carry from one call into the next.

8. A call put socket pairs in flight (``SCM_RIGHTS`` over a socket of its own), closed them
   and ``dup2``-ed the receiving socket over a descriptor the process had at ready: the
   descriptor count the pool checks was unchanged, the queued bytes stayed in the kernel.
   Now no descriptor can be passed at all: ``sendmsg``, ``recvmsg``, ``sendmmsg`` and
   ``recvmmsg`` are out of the seccomp allow-list (the guest's ``socket.send``/``recv``
   are ``sendto``/``recvfrom``).
9. A call handed work to a thread its plugin's import started, which slept through the
   host's quiet samples and did that work inside the next call.  Now a process that has
   any thread beside the RPC thread when it gets ready serves one call and is ended; a
   plain plugin's process (one thread at ready) is pooled as before.

The fifth attack (session 5, round e), finding 5: without a thread, a call left its work to
a process-wide hook (a ``SIGCONT`` handler, run when the host continues the pooled process
for its next call; a profile function, run by the guest's own loop after the result was
sent).  Now the guest compares every such hook with what it was at ready after each call,
and a call that changed one ends its process.

Real plugin processes in their sandbox; nothing here weakens or bypasses it.
"""

from __future__ import annotations

import json
import logging
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.packages import call_tool
from tests.plugins.test_plugin_process_cannot_reach_the_site import descendants

pytestmark = pytest.mark.django_db

#: A call that leaves kernel memory with the descriptor count it found: socket pairs are
#: filled, sent in flight (SCM_RIGHTS) into one socket's queue and closed; that socket is
#: put over a descriptor the process had at ready (``dup2``), and the result is
#: the bytes queued, the descriptors at ready and after.
_IN_FLIGHT = r"""
import os, socket, stat, sys
def fds():
    found = {}
    for fd in range(64):
        try:
            found[fd] = os.fstat(fd).st_mode
        except OSError:
            pass
    return found
before = fds()
kept, held = sys.modules.setdefault('__kept_flight__', []), 0
block = bytearray(12 << 20)  # resident, counted: under the 16 MiB margin alone
for i in range(0, len(block), 4096):
    block[i] = 1
kept.append(block)
held += len(block)
def fill(sock):
    global held
    sock.setblocking(False)
    chunk = b'x' * 65536
    while True:
        try:
            held += sock.send(chunk)
        except OSError:
            return
carrier, queue = socket.socketpair()
sent = 0
while True:
    try:
        c, d = socket.socketpair()
    except OSError:
        break
    fill(c)
    fill(d)
    try:
        socket.send_fds(carrier, [b'.'], [c.fileno(), d.fileno()])
    except OSError:
        c.close(); d.close()
        break
    sent += 2
    c.close(); d.close()
carrier.close()
# stdin, or else a character device (/dev/null) the process had at ready
spare = [fd for fd, mode in sorted(before.items()) if fd == 0 or stat.S_ISCHR(mode)]
target = spare[0]
os.dup2(queue.fileno(), target)  # the queue now stands where a descriptor of ready was
queue.close()
after = fds()
result = f'{held} {sent} {len(before)} {len(after)}'
"""


def test_no_descriptor_can_be_parked_in_flight_in_a_pooled_process(probe, settings):
    """The attack (finding 8): sockets filled, sent in flight over a socket and closed, the
    receiving socket put over a descriptor of ready (``dup2``), 12 MiB left resident.  With
    ``sendmsg`` refused nothing is in flight, so the pooled process holds no more than
    ``MAX_IDLE_GROWTH`` beyond what it held at ready."""
    from django_webfetch.plugins.runtime.host import MAX_IDLE_GROWTH, idle_processes, shutdown

    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 256 << 20
    try:
        assert probe("result = 0").text == '{"result": "0"}'
        outcome = probe(_IN_FLIGHT)
        assert outcome.text.startswith('{"result": '), outcome
        held, sent, before, after = map(int, outcome.text.split('"')[3].split())
        pooled = idle_processes()
        report = {"MiB": held >> 20, "in_flight": sent, "fds": (before, after), "pooled": pooled}
        assert not (pooled == 1 and held > MAX_IDLE_GROWTH), report
    finally:
        shutdown()


#: Every way a plugin could pass a descriptor or use the message calls, and the plain
#: socket calls the guest and asyncio use, each with what it got.
_MESSAGE_CALLS = r"""
import array, asyncio, errno, json, socket
got = {}
def attempt(name, fn):
    try:
        fn()
        got[name] = "ok"
    except OSError as exc:
        got[name] = errno.errorcode.get(exc.errno, str(exc.errno))
a, b = socket.socketpair()
c, d = socket.socketpair()
attempt("send_fds", lambda: socket.send_fds(a, [b"x"], [c.fileno()]))
attempt("sendmsg", lambda: a.sendmsg([b"x"]))
attempt("sendmsg_rights", lambda: a.sendmsg(
    [b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [d.fileno()]))]))
a.send(b"y")
attempt("recvmsg", lambda: b.recvmsg(1, 64))
attempt("recv_fds", lambda: socket.recv_fds(b, 1, 1))
attempt("send", lambda: a.sendall(b"z" * 1000))
got["recv"] = len(b.recv(4096))
got["asyncio"] = asyncio.run(asyncio.sleep(0, "ran"))
result = json.dumps(got, sort_keys=True)
"""


def test_no_descriptor_can_be_sent_or_received_over_a_socket(probe):
    """By construction: every message call fails with EPERM (with or without ``SCM_RIGHTS``
    data), while the calls the guest and asyncio's self-pipe use still work."""
    from django_webfetch.plugins.runtime.host import shutdown

    try:
        outcome = probe(_MESSAGE_CALLS)
        got = json.loads(json.loads(outcome.text)["result"])
        assert got == {
            "send_fds": "EPERM",
            "sendmsg": "EPERM",
            "sendmsg_rights": "EPERM",
            "recvmsg": "EPERM",
            "recv_fds": "EPERM",
            "send": "ok",
            "recv": 1001,  # the b"y" before the recvmsg and the 1000 bytes after
            "asyncio": "ran",
        }, got
    finally:
        shutdown()


def test_the_allow_list_has_no_message_call():
    from django_webfetch.plugins.runtime import bubblewrap

    allowed = {name for _why, names in bubblewrap.ALLOWED for name in names}
    calls = {"sendmsg", "recvmsg", "sendmmsg", "recvmmsg"}
    assert not allowed & calls
    assert not set(bubblewrap.CONDITIONAL) & calls
    # send and receive are allowed with their flags checked only (MSG_OOB refused: issue
    # 30, sixth attack, finding 4; tests/plugins/test_uid_hand_out_and_hidden_paths.py runs the
    # filter).
    assert not {"sendto", "recvfrom"} & allowed
    assert "MSG_OOB" in bubblewrap.CONDITIONAL["sendto"]
    assert "MSG_OOB" in bubblewrap.CONDITIONAL["recvfrom"]


# -- finding 9: threads an import started -------------------------------------------------

_DEFERRED = """
import threading, time

_job = []
_wake = threading.Event()
_done = []
_state = {"call": ""}


def _worker():  # an import-time thread (a library's pool): allowed to stay
    while True:
        _wake.wait()
        _wake.clear()
        time.sleep(0.4)  # asleep (state S, no CPU) through the host's quiet samples
        _done.append((_job.pop(), "ran during call " + _state["call"]))


threading.Thread(target=_worker, daemon=True).start()


def a(plugin, arguments):
    _state["call"] = "a"
    _job.append("work of call a")
    _wake.set()
    time.sleep(0.05)  # the worker has taken the job and sleeps
    return "a done"


def b(plugin, arguments):
    _state["call"] = "b"
    time.sleep(1.0)
    return repr(_done)
"""


def test_a_process_whose_import_started_threads_serves_one_call(tmp_path):
    """The attack (finding 9): call ``a`` hands its work to a thread the import started,
    which sleeps 0.4 s (asleep at any sample the host could take) before doing it.  The
    process had two threads at ready, so it serves ``a`` only; ``b`` gets a fresh process
    and ``a``'s work never runs during ``b``."""
    import os
    import textwrap

    from django_webfetch.plugins.runtime.host import Limits, Origin, shutdown

    site = tmp_path / "site"
    package = site / "webfetch_s5_deferred"
    package.mkdir(parents=True)
    tools = (
        '[{"name": "a", "description": "x", "handler": a}, '
        '{"name": "b", "description": "x", "handler": b}]'
    )
    manifest = textwrap.dedent(
        f"""
        def manifest():
            return {{"name": "s5deferred", "version": "1.0", "description": "x",
                     "egress": [], "tools": {tools}}}
        """
    )
    (package / "__init__.py").write_text(textwrap.dedent(_DEFERRED) + manifest)
    os.chmod(site, 0o755)
    origin = Origin("webfetch_s5_deferred:manifest", str(site), "webfetch_s5_deferred")
    limits = Limits(5, 20, 1 << 30, 1 << 16, 5, 2)
    key = ("s5-deferred", 1)

    def call(tool: str) -> str:
        return call_tool(origin, key, "s5deferred", tool, limits)

    try:
        assert "a done" in call("a")
        seen = call("b")
        assert "ran during call b" not in seen, seen
    finally:
        shutdown()


def _is_plugin(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return False
    return not argv[0].endswith(b"bwrap") and b"runtime.guest import main" in b" ".join(argv)


def _plugin_threads() -> dict[int, int]:
    """Threads of each plugin process below this test, as the host sees them."""
    found = {}
    for pid in descendants():
        if _is_plugin(pid):
            try:
                found[pid] = len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue
    return found


#: A call that counts, in its process, the calls that process served; asyncio and a
#: thread of the call's own, both ended before it returns.
_COUNT = (
    "import asyncio, sys, threading\n"
    "asyncio.run(asyncio.sleep(0))\n"
    "t = threading.Thread(target=sum, args=([1],)); t.start(); t.join()\n"
    "sys.calls = getattr(sys, 'calls', 0) + 1\nresult = sys.calls\n"
)


def test_a_plain_plugins_process_has_one_thread_at_ready_and_serves_several_calls(probe):
    """The guest starts no thread: a plain plugin's process has one thread at ready and
    after each call (its own threads ended), and one process serves every call."""
    from django_webfetch.plugins.runtime.host import idle_processes, shutdown

    try:
        for number in range(1, 6):
            assert probe(_COUNT).text == f'{{"result": "{number}"}}'
            assert idle_processes() == 1
            threads = _plugin_threads()
            assert list(threads.values()) == [1], threads
    finally:
        shutdown()


@pytest.mark.parametrize(
    ("import_body", "pooled"),
    [
        ("", True),
        # started and joined at import: gone by ready, nothing left to hand work to
        ("import threading\n_t = threading.Thread(target=sum, args=([1],))\n"
         "_t.start(); _t.join()\n", True),
        ("import threading, time\nthreading.Thread(target=time.sleep, args=(60,), "
         "daemon=True).start()\n", False),
        ("import concurrent.futures\n_pool = concurrent.futures.ThreadPoolExecutor(2)\n"
         "_pool.submit(sum, [1]).result()\n", False),
    ],
    ids=["no-thread", "thread-ended-at-import", "sleeping-thread", "executor"],
)  # fmt: skip
def test_a_process_is_pooled_only_when_its_import_left_no_thread(
    tmp_path: Path, caplog: Any, import_body: str, pooled: bool
):
    """Each call of a plugin whose import left a thread running gets a fresh process (its
    module's counter starts again), and the host logs why; a plugin whose import left none
    keeps one process."""
    from django_webfetch.plugins.runtime.host import (
        Limits,
        Origin,
        execute,
        idle_processes,
        shutdown,
    )

    site = tmp_path / "site"
    package = site / "webfetch_i30_pool"
    package.mkdir(parents=True)
    body = import_body + textwrap.dedent(
        """
        _calls = []


        def count(plugin, arguments):
            _calls.append(1)
            return str(len(_calls))


        def manifest():
            return {"name": "i30pool", "version": "1.0", "description": "x", "egress": [],
                    "tools": [{"name": "count", "description": "x", "handler": count}]}
        """
    )
    (package / "__init__.py").write_text(body)
    os.chmod(site, 0o755)
    origin = Origin("webfetch_i30_pool:manifest", str(site), "webfetch_i30_pool")
    limits = Limits(5, 20, 1 << 30, 1 << 16, 5, 2)
    message = {"tool": "count", "arguments": {}, "config": {}, "plugin": "i30pool",
               "alias": "i30pool", "reference": "i30pool"}  # fmt: skip
    shutdown()  # idle processes of earlier tests in this worker are not this test's
    try:
        with caplog.at_level(logging.INFO, logger="django_webfetch.plugins"):
            counts = [execute(origin, ("i30-pool", 1), message, None, limits=limits).text
                      for _ in range(3)]  # fmt: skip
        recycled = [r.getMessage() for r in caplog.records if "its import started" in r.message]
        if pooled:
            assert counts == ["1", "2", "3"], counts
            assert idle_processes() == 1
            assert recycled == []
        else:
            assert counts == ["1", "1", "1"], counts
            assert idle_processes() == 0
            assert len(recycled) == 3, recycled
    finally:
        shutdown()


_CARRIED = """
import gc, os, signal, sys, threading

_job, _done = [], []
_ME = os.urandom(8).hex()  # which process (each is PID 1 of its own namespace)


def _run_job(*_args):
    while _job:
        _done.append(_job.pop() + " ran outside it")


def _trace(frame, event, arg):
    _run_job()
    return None


def _audit(event, args):
    _run_job()


LEAVE = {
    "sigcont": lambda: signal.signal(signal.SIGCONT, _run_job),  # the host's resume
    "profile": lambda: sys.setprofile(_trace),  # the guest's loop, after the result
    "trace": lambda: sys.settrace(_trace),
    "threading_profile": lambda: threading.setprofile(_trace),
    "audit_hook": lambda: sys.addaudithook(_audit),  # every later audit event
    "gc_callback": lambda: gc.callbacks.append(_run_job),  # every later collection
    "unraisablehook": lambda: setattr(sys, "unraisablehook", _run_job),
}


def leave(plugin, arguments):
    LEAVE[arguments["hook"]]()
    _job.append("work of call leave")
    return "left %s" % _ME


def b(plugin, arguments):
    garbage = [[] for _ in range(200000)]  # a collection or two: gc callbacks run
    del garbage
    open(os.devnull).close()  # an audit event
    return "b %s %r" % (_ME, _done)


def manifest():
    return {"name": "carried", "version": "1.0", "description": "x", "egress": [],
            "tools": [{"name": n, "description": "x", "handler": f}
                      for n, f in (("leave", leave), ("b", b))]}
"""


@pytest.mark.parametrize(
    "hook",
    ["sigcont", "profile", "trace", "threading_profile", "audit_hook", "gc_callback",
     "unraisablehook"],
)  # fmt: skip
def test_a_call_that_leaves_a_hook_behind_never_has_its_process_reused(tmp_path, caplog, hook):
    """A call sets a process-wide hook that would run its work after it returned: at the
    host's ``SIGCONT`` for the next call, in the guest's own loop, at any later audit event
    or collection.  Its process serves no other call (the host logs why), so the next
    call runs in a fresh process where none of that work is done; a call that leaves no
    hook keeps its pooled process."""
    from django_webfetch.plugins.runtime.host import Limits, Origin, execute, shutdown

    site = tmp_path / "site"
    package = site / "webfetch_carried"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(_CARRIED)
    os.chmod(site, 0o755)
    origin = Origin("webfetch_carried:manifest", str(site), "webfetch_carried")
    limits = Limits(5, 20, 1 << 30, 1 << 16, 5, 2)
    key = ("carried", hook)

    def call(tool: str) -> list[str]:
        message = {"tool": tool, "arguments": {"hook": hook}, "config": {},
                   "plugin": "carried", "alias": "carried", "reference": "carried"}  # fmt: skip
        return execute(origin, key, message, None, limits=limits).text.split(" ", 2)

    try:
        plain, again = call("b"), call("b")
        assert plain[1] == again[1], (plain, again)  # no hook left: the process is pooled
        with caplog.at_level(logging.INFO, logger="django_webfetch.plugins"):
            left = call("leave")
        after = call("b")
        report = {"left": left, "after": after, "log": caplog.messages}
        assert left[1] == plain[1], report  # the pooled process served the call
        assert after[1] != left[1], report  # and no other
        assert after[2] == "[]", report  # none of its work ran in the next call
        assert any("changed the process's hooks" in m for m in caplog.messages), report
    finally:
        shutdown()
