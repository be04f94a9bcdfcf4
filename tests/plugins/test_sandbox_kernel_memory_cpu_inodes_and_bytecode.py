"""Issue 30, round 18: an outside attack on the plugin sandbox and the trust pin.

Each test here FAILS on the code it was written against: it is the proof of a way past
the containment or the pin (the docstring gives the severity, the route and the gain).
Nothing is fixed here.  Every test runs the codeprobe plugin (``tests/plugins/probe_site``)
in its real sandbox and observes from the host side.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.django_db

#: A call that keeps ``{kib}`` KiB more resident in its process (touched), on top of what
#: earlier calls kept.
_KEEP = (
    "import sys\nblock = bytearray({kib} << 10)\n"
    "for i in range(0, len(block), 4096):\n    block[i] = 1\n"
    "sys.modules.setdefault('__kept__', []).append(block)\nresult = len(block)\n"
)

#: A call that puts, in place of each descriptor the process held when it got ready
#: besides the channel (its stdio; ``dup2`` closes the old one), one end of a new stream
#: socketpair whose other end first filled it to its default send buffer and then closed:
#: the bytes stay queued in the kept end, kernel memory of the process in no ``VmRSS``.
#: The process holds as many descriptors as when it got ready.
_SWAP = """\
import json, os, socket
queued = 0
for fd in (0, 1, 2):
    a, b = socket.socketpair()
    a.setblocking(False)
    try:
        while True:
            queued += a.send(b'x' * 65536)
    except BlockingIOError:
        pass
    os.dup2(b.fileno(), fd)
    a.close()
    b.close()
result = json.dumps({'queued': queued})
"""


def _pooled_worker() -> Any:
    """The one idle plugin process of this host's pool (``None`` when none is)."""
    from django_webfetch.plugins.runtime import host

    workers = [w for idle in host._pool._idle.values() for w in idle]
    assert len(workers) <= 1, workers
    return workers[0] if workers else None


def _growth(worker: Any) -> int:
    """What the host counts as the process's growth since it got ready (``grown``)."""
    from django_webfetch.plugins.runtime import host

    now = host._footprint(worker.pid)
    assert now is not None
    return int(now - worker.footprint)


def test_a_call_that_swaps_its_stdio_for_full_socketpairs_leaves_kernel_memory_in_a_pooled_process(  # noqa: E501
    probe, settings
):
    """Severity: Low.  Route: the pool's ``Worker.grown`` counts ``VmRSS``, ``VmSwap``
    and ``/tmp``, and, for kernel memory outside them (socket buffers: issue 30,
    ``test_shared_package_names.py``), refuses a process only when it holds *more* descriptors
    than when it got ready.  The count is compared, not which descriptors: a call
    ``dup2``s, over each of its stdio descriptors (``/dev/null``), one end of a stream
    socketpair whose other end filled it to the default send buffer (~230 KiB here) and
    closed.  The process holds 5 descriptors, as at ready, and is pooled with ~700 KiB
    of queued socket buffers (measured: 683 KiB; 16,715 KiB held in all) on top of the
    ``MAX_IDLE_GROWTH`` the host lets it keep resident.
    Gain: kernel memory past the idle bound, kept by every idle process of the pool (up
    to ``MAX_IDLE_PROCESSES``) for as long as no call comes; bounded by the descriptors
    at ready.  Expected: a pooled process holds at most ``MAX_IDLE_GROWTH`` more than
    when it got ready, whatever the memory's kind (compare the descriptors' identities,
    ``/proc/<pid>/fdinfo`` or each one's ``stat``, or count socket memory, not only how
    many there are)."""
    from django_webfetch.plugins.runtime.host import MAX_IDLE_GROWTH, shutdown

    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 256 << 20
    try:
        assert probe("result = 0").text == '{"result": "0"}'
        worker = _pooled_worker()
        assert worker is not None, "the pool keeps an idle process"
        # Resident memory up to just under the bound (the host's own count), in steps
        # that each keep the process pooled.
        while MAX_IDLE_GROWTH - _growth(worker) > 600 << 10:
            step = max(64, (MAX_IDLE_GROWTH - _growth(worker) - (400 << 10)) >> 10)
            assert probe(_KEEP.format(kib=step)).kind == "json"
            worker = _pooled_worker()
            assert worker is not None, "a call under the bound keeps its process"
        descriptors = worker.descriptors
        outcome = probe(_SWAP)
        queued = json.loads(json.loads(outcome.text)["result"])["queued"]
        assert queued > 512 << 10, outcome
        pooled = _pooled_worker()
        if pooled is not None:
            assert pooled.pid == worker.pid
            from django_webfetch.plugins.runtime import host

            assert host._descriptors(pooled.pid) == descriptors
            held = _growth(pooled) + queued
            assert held <= MAX_IDLE_GROWTH, (
                f"a pooled process holds {held >> 10} KiB more than when it got ready "
                f"({queued >> 10} KiB of it queued in socket buffers), over the "
                f"{MAX_IDLE_GROWTH >> 10} KiB bound"
            )
    finally:
        shutdown()


class _Sampler:
    """While a call runs: the most that ``measure(pid)`` gave for the warm plugin process
    ``pid``, sampled from the host side every 20 ms by a thread of the test."""

    def __init__(self, pid: int, measure: Any) -> None:
        import threading

        self.most = 0
        self._pid, self._measure = pid, measure
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._done.wait(0.02):
            self.most = max(self.most, int(self._measure(self._pid) or 0))

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def _warm_pid(probe: Any) -> int:
    """The pid of a warm plugin process, the one the next call is given."""
    assert probe("result = 0").text == '{"result": "0"}'
    worker = _pooled_worker()
    assert worker is not None, "the pool keeps an idle process"
    return int(worker.pid)


def _during_a_slow_request(work: str, seconds: int) -> str:
    """A call whose thread runs ``work`` while its main thread waits on one request the
    host performs for it: a granted page that answers after ``seconds`` seconds (the
    plugin's own slow API server; the lab's ``/late``)."""
    return (
        "import os, threading, time\n"
        f"until = time.monotonic() + {seconds} - 0.5\n"
        f"def work():\n{work}\n"
        "threading.Thread(target=work, daemon=True).start()\n"
        "try:\n"
        f"    plugin.http.get('http://granted.lab.example/late?seconds={seconds}')\n"
        "except Exception as exc:\n"
        "    pass\n"
        "result = 'answered'\n"
    )


def test_a_call_burns_cpu_past_its_bound_while_the_host_performs_its_request(probe, settings):
    """Severity: Medium (CPU of the site's machine: the documented per-call bound does not
    hold).  Route: the host measures a call's CPU time (``Worker.bounds``: ``/proc/<pid>/
    stat``, killed over ``WEBFETCH_PLUGIN_CPU_SECONDS``) only in ``Channel.recv``'s poll,
    while it waits for the plugin's next message; while it performs a request for the
    plugin (``_perform``: up to the call's wall time, 30 s by default, per request) nothing
    polls, and the process's only other CPU bound is ``RLIMIT_CPU``, its whole life
    (``cpu_seconds x 100 + 30``, 1,030 s by default).  A call starts threads that spin,
    then asks for a slow granted page (its own API server, answering late, or trickling);
    the threads run on every core until the request ends; the call then fails
    ``plugin_limit``, after the fact.  Here: bound 0.2 s, eight threads hashing (the
    interpreter's lock released) while a granted page answers late (the lab's ``/late``;
    the request ends at its ~5 s timeout): 1.3 s of CPU measured from the host side on a
    machine at load 15 on 2 cores (~10 s on a quiet one).  Gain: a plugin's call takes
    wall time x cores of CPU instead of its bound
    (60 s of CPU against 10 s on two cores at the defaults; each of the host's concurrent
    calls the same), starving the site; repeated at every call.  Expected: the plugin
    process never runs more than about its bound (poll while a request runs, or a
    per-call ``RLIMIT_CPU``/cgroup ``cpu.max``)."""
    from django_webfetch.plugins.runtime.host import RuntimeFailure, shutdown
    from tests.plugins.test_plugin_process_cannot_reach_the_site import _CLK_TCK, cpu_ticks

    settings.WEBFETCH_PLUGIN_CPU_SECONDS = 0.2
    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 20
    settings.WEBFETCH_TIMEOUT = 15
    # Hashing releases the interpreter's lock: the threads run on every core at once.
    spin = (
        "    import hashlib\n    block = bytes(1 << 20)\n"
        "    while time.monotonic() < until:\n        hashlib.sha256(block)\n"
    )
    code = _during_a_slow_request(spin, 10).replace(
        "threading.Thread(target=work, daemon=True).start()\n",
        "for _ in range(8):\n    threading.Thread(target=work, daemon=True).start()\n",
    )
    try:
        pid = _warm_pid(probe)
        before = cpu_ticks([pid])
        with _Sampler(pid, lambda p: cpu_ticks([p])) as sampled:
            try:
                probe(code)
            except RuntimeFailure as exc:
                assert exc.code == "plugin_limit", exc
    finally:
        shutdown()
    used = (sampled.most - before) / _CLK_TCK
    assert used <= 0.2 + 0.5, f"a call with a 0.2 s CPU bound ran {used:.1f} s of CPU"


def test_a_call_fills_its_tmp_with_inodes_past_the_bound_while_the_host_performs_its_request(
    probe, settings
):
    """Severity: Medium where no cgroup is made (kernel memory of the site's machine
    outside every limit: ``cgroups`` is optional, docs/plugins.rst "Containment"); Low
    where one is (bounded by the cgroup's memory limit, ``WEBFETCH_PLUGIN_MEMORY_BYTES``).
    Route: the private ``/tmp`` is a tmpfs bounded in bytes (``TMP_BYTES``), not in
    inodes; each empty file or directory costs kernel memory (an inode, a dentry: about
    1 KiB) that ``RLIMIT_AS`` does not count.  ``MAX_TMP_FILES`` (4,096) is enforced by
    the host's poll in ``Channel.recv`` only, and nothing polls while the host performs a
    request for the plugin (up to the call's wall time).  A call's thread creates empty
    files in its scratch directory for as long as its slow granted request lasts (the
    lab's ``/late``, ~5 s here): 50,000 held, where the test stops it (12 times the bound;
    unstopped, one per ``openat`` for the whole wall time, 30 s by default).  Gain:
    hundreds of MB of kernel memory per concurrent call, until the call ends.  Expected:
    the plugin process never holds much more than ``MAX_TMP_FILES`` inodes in its
    ``/tmp`` (poll while a request runs, or mount the tmpfs with ``nr_inodes``)."""
    from django_webfetch.plugins.runtime.host import (
        MAX_TMP_FILES,
        RuntimeFailure,
        _tmp_files,
        shutdown,
    )

    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 20
    settings.WEBFETCH_TIMEOUT = 15
    fill = (
        "    n = 0\n"
        "    while time.monotonic() < until and n < 50000:\n"
        "        os.close(os.open(f'f{n}', os.O_CREAT | os.O_WRONLY, 0o600))\n"
        "        n += 1\n"
    )
    try:
        pid = _warm_pid(probe)
        with _Sampler(pid, _tmp_files) as sampled:
            try:
                probe(_during_a_slow_request(fill, 10))
            except RuntimeFailure as exc:
                assert exc.code == "plugin_limit", exc
    finally:
        shutdown()
    assert sampled.most <= 2 * MAX_TMP_FILES, (
        f"the plugin process held {sampled.most} inodes in its /tmp (bound {MAX_TMP_FILES})"
    )


_SITE_SECRET = "a18-the-sites-secret-key"

#: Reads the site's module and its bytecode from inside the sandbox.
_READ_SITE = """\
import json
seen = {}
for name, path in (('source', %r), ('bytecode', %r)):
    try:
        with open(path, 'rb') as fh:
            seen[name] = fh.read().decode('latin-1')
    except OSError as exc:
        seen[name] = type(exc).__name__
result = json.dumps(seen)
"""


@pytest.mark.parametrize("named_by", ["DJANGO_SETTINGS_MODULE", "WEBFETCH_PLUGIN_HIDDEN_PATHS"])
def test_the_bytecode_of_a_masked_site_module_is_readable_in_the_sandbox(
    probe, tmp_path, monkeypatch, settings, named_by
):
    """Severity: High (the site's secrets: ``SECRET_KEY``, database and API credentials).
    Route: the sandbox masks the site's own code where it lies in a package directory
    the sandbox binds (``bubblewrap.hidden_paths``: a project installed with ``pip
    install .``, as a container image does): the top-level package of
    ``DJANGO_SETTINGS_MODULE``/``ROOT_URLCONF`` as a whole, but a top-level *module*
    (``settings.py`` installed as a module, ``py_modules``) and a file named in
    ``WEBFETCH_PLUGIN_HIDDEN_PATHS`` only as that one file (``/dev/null`` bound over it).
    Its bytecode beside it, ``__pycache__/<name>.cpython-311.pyc`` (pip compiles every
    module it installs; the interpreter writes it at the first import where it may), is
    not masked and stays readable under the Landlock rule of the package directory: every
    string constant of the module is in it.  Gain: any untrusted plugin reads the site's
    secret key and credentials (and, with a grant, sends them out through its own API).
    Expected: what the site's code holds is unreadable in the sandbox, its bytecode too
    (mask the module's ``__pycache__`` entries, or its whole directory's cache)."""
    import importlib.util
    import py_compile

    packages = tmp_path / "lib" / "site-packages"
    packages.mkdir(parents=True)
    module = packages / "a18_site_settings.py"
    module.write_text(f"SECRET_KEY = {_SITE_SECRET!r}\n")
    compiled = importlib.util.cache_from_source(str(module))
    py_compile.compile(str(module), cfile=compiled, doraise=True)
    for path in (tmp_path, tmp_path / "lib", packages, Path(compiled).parent):
        os.chmod(path, 0o755)
    for path in (module, Path(compiled)):
        os.chmod(path, 0o644)
    # A package directory of the site's ``sys.path``: bound into every sandbox.
    monkeypatch.syspath_prepend(str(packages))
    if named_by == "DJANGO_SETTINGS_MODULE":
        monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "a18_site_settings")
    else:
        settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [str(module)]
    from django_webfetch.plugins.runtime import bubblewrap
    from django_webfetch.plugins.runtime.host import shutdown

    assert os.path.realpath(packages) in bubblewrap.site_dirs()
    try:
        outcome = probe(_READ_SITE % (str(module), compiled))
    finally:
        shutdown()
    assert outcome.kind == "json", outcome
    seen = json.loads(json.loads(outcome.text)["result"])
    assert _SITE_SECRET not in seen["source"], "the module itself is not masked"  # control
    assert _SITE_SECRET not in seen["bytecode"], (
        f"the plugin read the site's secret from {compiled} ({named_by} masks the module)"
    )
