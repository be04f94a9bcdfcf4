"""Issue 30, reopened (s4): the host's bounds on a plugin process.

Threads (during a call and during the import that reads the manifest), the manifest read's
CPU and wall bounds (those of a call) and its failure remembered, the files of the private
/tmp, and a thread a call leaves behind.  Each test asserts on the host side; nothing here
weakens or bypasses the sandbox.  Bounds are proven by trying a little more than they allow.
"""

from __future__ import annotations

import json
import os
import resource
import textwrap
import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as settings_h
from hypothesis import strategies as st

from tests.plugins.packages import call_tool
from tests.plugins.test_plugin_process_cannot_reach_the_site import descendants

pytestmark = pytest.mark.django_db


def _plugin_threads() -> int:
    """Threads of every plugin process below this test, as the host sees them."""
    total = 0
    for pid in descendants():
        if not _is_plugin(pid):
            continue
        try:
            total += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return total


def _while_running(work: Any, sample: Any, every: float = 0.2) -> tuple[Any, list[Any]]:
    """Run ``work()`` in a thread; ``sample()`` on the host side until it ends."""
    done: dict[str, Any] = {}

    def go() -> None:
        try:
            done["result"] = work()
        except BaseException as exc:  # a refused call is an outcome here
            done["result"] = exc

    thread = threading.Thread(target=go)
    thread.start()
    seen = []
    while thread.is_alive():
        seen.append(sample())
        time.sleep(every)
    thread.join()
    return done.get("result"), seen


#: Small stacks and one malloc arena (~36 KiB of address space a thread): the address-space
#: limit alone would allow thousands.  200 tried, against a bound of 64.
THREAD_BOMB = r"""
import ctypes, threading, time, json
ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX = 1
threading.stack_size(32768)
gate = threading.Event()
started, error = 0, ""
try:
    while started < 200:
        threading.Thread(target=gate.wait, daemon=True).start()
        started += 1
except BaseException as exc:
    error = type(exc).__name__
time.sleep(1.0)
gate.set()
result = json.dumps({"started": started, "error": error})
"""


def _plugin(tmp_path: Any, name: str, body: str, tools: str = "[]") -> Any:
    """A plugin package ``name`` (its ``manifest`` after ``body`` ran at import) on a
    directory of its own; the runtime's Origin for it."""
    from django_webfetch.plugins.runtime.host import Origin

    site = tmp_path / "site"
    package = site / name
    package.mkdir(parents=True)
    manifest = textwrap.dedent(
        f"""
        def manifest():
            return {{"name": "{name}", "version": "1.0", "description": "x",
                     "egress": [], "tools": {tools}}}
        """
    )
    (package / "__init__.py").write_text(textwrap.dedent(body) + manifest)
    return Origin(f"{name}:manifest", str(site), name)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# -- threads ----------------------------------------------------------------------------


def test_thread_bomb_in_a_call_stays_within_64_threads(probe):
    """A root-run site: the plugin process runs under an unprivileged uid of its own
    (ADR 0047), so RLIMIT_NPROC holds; the host also kills it over 64 threads."""
    assert os.getuid() == 0, "the finding is about a root-run site"
    outcome, seen = _while_running(lambda: probe(THREAD_BOMB), _plugin_threads)
    assert 0 < max(seen) <= 64, (max(seen), outcome)


def test_thread_bomb_at_import_stays_within_64_threads(tmp_path):
    """The same bomb while the manifest is read (the import, no call yet): never more than
    64 threads host-side."""
    from django_webfetch.plugins.runtime.host import RuntimeFailure, describe

    bomb = "from django_webfetch.plugins.sandbox import host_io\nwith host_io():\n" + (
        textwrap.indent(THREAD_BOMB.replace("result = ", "_r = "), "    ")
    )
    origin = _plugin(tmp_path, "webfetch_i30_bomb", bomb)
    outcome, seen = _while_running(lambda: describe(origin), _plugin_threads, every=0.1)
    assert 0 < max(seen) <= 64, (max(seen), outcome)
    if isinstance(outcome, RuntimeFailure):  # the host's poll saw it over 64
        assert outcome.code == "plugin_limit", outcome
    else:  # RLIMIT_NPROC stopped it first: thread 64 was refused in the import
        assert outcome["manifest"]["name"] == "webfetch_i30_bomb", outcome


# -- the manifest read: the bounds of a call, failures remembered ----------------------------

#: 12 s of CPU time (not of wall time: a loaded machine gives it less CPU, never a pass).
SPIN = """
import time
_end = time.process_time() + 12
while time.process_time() < _end:
    pass
"""

SLEEP = """
import time
time.sleep(600)
"""


def test_manifest_read_is_killed_over_the_cpu_bound_and_remembered(tmp_path, settings):
    """An import that spins is killed over WEBFETCH_PLUGIN_CPU_SECONDS (a cold start on
    top); a second read of the unchanged package costs no process, a changed one does.
    The wall bound is wide, so that the CPU bound is what ends it on a loaded machine."""
    from django_webfetch.plugins.runtime.host import RuntimeFailure, describe

    settings.WEBFETCH_PLUGIN_CPU_SECONDS = 1
    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 20
    origin = _plugin(tmp_path, "webfetch_i30_spin", SPIN)
    cpu_before, started = _children_cpu(), time.monotonic()
    with pytest.raises(RuntimeFailure) as first:
        describe(origin)
    elapsed, cpu = time.monotonic() - started, _children_cpu() - cpu_before
    assert first.value.code == "plugin_limit", first.value
    assert cpu <= 1 + 2, (cpu, elapsed)
    assert elapsed <= 20, (cpu, elapsed)

    # Remembered: no process is started for the same files.
    cpu_before = _children_cpu()
    with pytest.raises(RuntimeFailure) as again:
        describe(origin)
    assert again.value.code == "plugin_limit"
    assert _children_cpu() - cpu_before < 0.05  # a plugin process costs ~0.15 CPU-s

    # A changed package is read again (and this time it imports).
    init = tmp_path / "site" / "webfetch_i30_spin" / "__init__.py"
    init.write_text(init.read_text().replace("+ 12", "+ 0"))
    assert describe(origin)["manifest"]["name"] == "webfetch_i30_spin"


def test_manifest_read_is_ended_at_the_wall_bound(tmp_path, settings):
    """An import that sleeps uses no CPU: it ends at WEBFETCH_PLUGIN_WALL_SECONDS."""
    from django_webfetch.plugins.runtime.host import RuntimeFailure, describe

    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 2
    origin = _plugin(tmp_path, "webfetch_i30_sleep", SLEEP)
    started = time.monotonic()
    with pytest.raises(RuntimeFailure) as failed:
        describe(origin)
    assert failed.value.code == "plugin_timeout", failed.value
    # Ended at its wall bound, not at the end of its sleep (600 s): a far bound, which a
    # busy machine does not reach.
    assert time.monotonic() - started < 60


# -- the private /tmp: bounded in files as well as bytes --------------------------------------

#: Spread over 100 directories: the count is of the whole tmpfs, not of one directory.
FILES = r"""
import os
made = 0
for i in range(20_000):
    try:
        os.makedirs(f"d{i % 100}", exist_ok=True)
        os.close(os.open(f"d{i % 100}/f{i}", os.O_CREAT | os.O_WRONLY, 0o600))
    except OSError:
        break
    made += 1
result = made
"""

FEW_FILES = r"""
import os
for i in range(50):
    os.close(os.open(f"few{i}", os.O_CREAT | os.O_WRONLY, 0o600))
result = "ok"
"""


def test_files_in_the_private_tmp_are_bounded_in_count(probe):
    """Empty files cost no bytes but kernel memory each: on a root host the kernel refuses
    the file past the bound (the tmpfs's ``nr_inodes``, decision 0059); elsewhere the host
    counts the inodes of the sandbox's /tmp while it waits and after the call, and over
    the bound the process is killed, never kept in the pool.  A few files are fine."""
    from django_webfetch.plugins.runtime.host import (
        MAX_TMP_FILES,
        RuntimeFailure,
        _tmp_files,
        idle_processes,
        shutdown,
    )
    from tests.plugins.test_sandbox_kernel_memory_cpu_inodes_and_bytecode import _pooled_worker

    shutdown()
    assert probe(FEW_FILES).text == json.dumps({"result": "ok"})
    assert idle_processes() == 1
    pid = _pooled_worker().pid
    try:
        outcome = probe(FILES)
    except RuntimeFailure as failed:  # the host's count: no inode bound in the kernel
        assert failed.code == "plugin_limit", failed
        assert "files" in failed.detail
        assert idle_processes() == 0
    else:  # the kernel's: the file past the bound was refused
        made = int(json.loads(outcome.text)["result"])
        assert 0 < made < MAX_TMP_FILES, made
        assert _tmp_files(pid) <= MAX_TMP_FILES
    assert MAX_TMP_FILES < 20_000


# -- a thread a call leaves behind --------------------------------------------------------------

_SWAP = """
import threading

_gate = threading.Event()
_baseline = threading.Thread(target=_gate.wait, daemon=True)
_baseline.start()  # an import-time thread (a library's pool): allowed to stay


def swap(plugin, arguments):
    left = threading.Event()
    # The call ends the import-time thread and leaves one of its own, asleep: the count
    # of threads is unchanged, their ids are not.
    threading.Thread(target=left.wait, daemon=True, name="left-by-call").start()
    _gate.set()
    _baseline.join()
    return "swapped"


def alive(plugin, arguments):
    return ",".join(t.name for t in threading.enumerate())
"""

_TOOLS = (
    '[{"name": "swap", "description": "x", "handler": swap}, '
    '{"name": "alive", "description": "x", "handler": alive}]'
)


def _is_plugin(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return False
    return not argv[0].endswith(b"bwrap") and b"runtime.guest import main" in b" ".join(argv)


def test_a_thread_left_by_a_call_is_never_handed_to_the_next_call(tmp_path):
    """A call that swaps an import-time thread for one of its own (the count unchanged,
    the ids not) never hands it to the next call: a process whose import left a thread
    serves one call (tests/plugins/test_pooled_process_descriptors_and_threads.py), and after any
    call a thread beside the RPC thread recycles the process."""
    from django_webfetch.plugins.runtime.host import Limits, idle_processes, shutdown

    origin = _plugin(tmp_path, "webfetch_i30_swap", _SWAP, _TOOLS)
    limits = Limits(5, 20, 1 << 30, 1 << 16, 5, 2)
    key = ("i30-swap", 1)

    def call(tool: str) -> str:
        return call_tool(origin, key, "i30swap", tool, limits)

    try:
        assert "MainThread" in call("alive")
        assert idle_processes() == 0
        assert call("swap") == "swapped"
        assert idle_processes() == 0
        names = call("alive")
        assert "left-by-call" not in names, names
    finally:
        shutdown()


# -- the stamp a failed manifest read is remembered by ------------------------------------------


@settings_h(max_examples=40, deadline=None)
@given(
    files=st.lists(
        st.tuples(st.sampled_from(["", "sub/", "sub/deeper/"]), st.integers(0, 30)),
        min_size=1,
        max_size=8,
        unique=True,
    ),
    pick=st.integers(0, 7),
    change=st.sampled_from(["grow", "add", "remove", "replace"]),
)
def test_any_change_to_a_package_changes_its_stamp(tmp_path_factory, files, pick, change):
    """A remembered failure is never served for files other than those that failed: any
    file of the package added, removed, grown or replaced (a new inode) changes the stamp."""
    from django_webfetch.plugins.runtime.host import Origin
    from django_webfetch.plugins.runtime.host import stamp as _stamp

    site = tmp_path_factory.mktemp("stamp")
    package = site / "pkg"
    paths = []
    for folder, number in files:
        path = package / folder / f"m{number}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")
        paths.append(path)
    origin = Origin("pkg:manifest", str(site), "pkg")
    before = _stamp(origin)
    assert _stamp(origin) == before
    target = paths[pick % len(paths)]
    if change == "grow":
        target.write_text("x = 1\ny = 2\n")
    elif change == "add":
        (target.parent / "new_module.py").write_text("")
    elif change == "remove":
        target.unlink()
    else:
        fresh = target.with_suffix(".tmp")
        fresh.write_text("x = 1\n")
        kept = fresh.stat().st_ino
        os.replace(fresh, target)
        assert target.stat().st_ino == kept
    assert _stamp(origin) != before
