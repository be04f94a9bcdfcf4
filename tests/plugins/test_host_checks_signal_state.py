"""Issue 30, attack 8, finding 2: the decision to put a plugin process back in the pool was
the guest's (``guest._hooks``, ``_kernel_dispositions``, ``_same``: Python of the very
interpreter the plugin runs in, which a call may rebind).  The host now decides: it stops
the process (``SIGSTOP``), reads ``/proc/<pid>/status`` (the pending, blocked, ignored and
caught signal masks, seccomp, no-new-privileges, capabilities, ids: ``host._KERNEL_FIELDS``)
and pools it only when they read what they read before any plugin code ran (the guest waits
for ``import`` after ``contained`` while the host reads them).

Every call here first switches the guest's own check off (``guest._same`` always says
"the same"), so only the host's check can end the process.  Real plugin processes in their
sandbox; nothing here weakens or bypasses it.
"""

from __future__ import annotations

import json
import logging
import signal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.django_db

#: The guest's own check switched off, a module the process keeps, and ``before``: the
#: kernel's dispositions as the guest reads them (the premise: the change is the kernel's).
_PRELUDE = """
import ctypes, os, signal, sys, types
guest = next(m for m in list(sys.modules.values())
             if isinstance(getattr(m, "_KERNEL", None), dict) and hasattr(m, "_hooks"))
guest._same = lambda before, after: True
kept = sys.modules.setdefault("__sig30_kept__", types.ModuleType("__sig30_kept__"))
kept.log = getattr(kept, "log", [])
kept.calls = getattr(kept, "calls", 0) + 1
def on_signal(number, *rest):
    kept.log.append(f"call A's handler ran for {number}")
kept.handler = ctypes.CFUNCTYPE(None, ctypes.c_int)(on_signal)
libc = ctypes.CDLL(None, use_errno=True)
def c_sigaction(number, handler):
    # glibc's struct sigaction: handler, a 1024-bit mask, flags, restorer (152 bytes)
    action = ctypes.create_string_buffer(152)
    ctypes.c_void_p.from_buffer(action, 0).value = handler
    if libc.sigaction(number, action, None) != 0:
        raise OSError(ctypes.get_errno(), "sigaction")
def c_handler(number):
    c_sigaction(number, ctypes.cast(kept.handler, ctypes.c_void_p).value)
def py_setsig(number):
    setsig = ctypes.pythonapi.PyOS_setsig
    setsig.restype = ctypes.c_void_p
    setsig.argtypes = [ctypes.c_int, ctypes.c_void_p]
    setsig(number, ctypes.cast(kept.handler, ctypes.c_void_p))
before = guest._kernel_dispositions()
"""

_AFTER = """
result = ["kernel changed", guest._kernel_dispositions() != before, kept.calls]
"""

_READ = """
import sys
kept = sys.modules.get("__sig30_kept__")
result = ["fresh process"] if kept is None else ["kept", list(kept.log), kept.calls]
"""

#: One change of a signal's kernel state per case, each made below or through Python.
_CHANGES = {
    "PyOS_setsig SIGCONT (attack 6, finding 7)": "py_setsig(signal.SIGCONT)",
    "PyOS_setsig SIGINT": "py_setsig(signal.SIGINT)",
    "ctypes sigaction SIGUSR1": "c_handler(signal.SIGUSR1)",
    "ctypes sigaction SIGALRM": "c_handler(signal.SIGALRM)",
    "ctypes sigaction SIGXCPU": "c_handler(signal.SIGXCPU)",
    "ctypes sigaction SIGSEGV": "c_handler(signal.SIGSEGV)",
    "ctypes sigaction real-time 40": "c_handler(40)",
    "ctypes sigaction SIGCONT to SIG_IGN": "c_sigaction(signal.SIGCONT, 1)",
    "ctypes sigaction SIGPIPE to SIG_DFL": "c_sigaction(signal.SIGPIPE, 0)",
    "Python handler SIGUSR2": "signal.signal(signal.SIGUSR2, lambda *a: None)",
    "Python SIG_IGN SIGTERM": "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
    "blocked SIGUSR1": "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})",
    "blocked real-time 50": "signal.pthread_sigmask(signal.SIG_BLOCK, {50})",
    "pending SIGUSR1": (
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
        "os.kill(os.getpid(), signal.SIGUSR1)"
    ),
}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _recycled_for_kernel(probe: Any, code: str) -> tuple[Any, int, list[str]]:
    """Call A runs ``code`` (the guest's own check off); returns its outcome, the idle
    processes after it and what the pool logged."""
    from django_webfetch.plugins.runtime.host import idle_processes

    records = _Records()
    logger = logging.getLogger("django_webfetch.plugins")
    logger.addHandler(records)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        first = probe(_PRELUDE + code + "\n" + _AFTER)
        pooled = idle_processes()
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    return first, pooled, records.messages


@pytest.mark.parametrize("case", sorted(_CHANGES))
def test_a_signal_state_a_call_leaves_ends_its_process_whatever_the_guest_says(probe, case):
    """Each change of a signal's kernel state (a handler set through ctypes ``sigaction``
    or ``PyOS_setsig`` or Python's ``signal``, ``SIG_IGN``, ``SIG_DFL`` where Python
    ignores, a blocked mask, a pending signal) ends the process, the guest's own check
    switched off: the host reads it (``plugin_kernel_state_changed``), and the next call
    gets a fresh process in which nothing of call A runs."""
    from django_webfetch.plugins.runtime.host import KERNEL_CHANGED, shutdown

    try:
        first, pooled, logged = _recycled_for_kernel(probe, _CHANGES[case])
        second = probe(_READ)
    finally:
        shutdown()
    assert first.kind == "json", first
    assert json.loads(first.text)["result"] == "['kernel changed', True, 1]", first
    seen = json.loads(second.text)["result"]
    assert pooled == 0 and seen == "['fresh process']", f"call A's process was pooled: {seen}"
    assert any(KERNEL_CHANGED in message for message in logged), logged


def test_a_call_that_changes_nothing_keeps_its_process_through_the_host_check(probe):
    """The control: the same calls (the guest's check off) that leave the kernel state as
    it was keep their pooled process, three calls in a row (stopped and continued between
    them: the host's read of a stopped process matches the one before the import)."""
    from django_webfetch.plugins.runtime.host import idle_processes, shutdown

    try:
        seen = []
        for _call in range(3):
            outcome = probe(_PRELUDE + _AFTER)
            seen.append((json.loads(outcome.text)["result"], idle_processes()))
    finally:
        shutdown()
    assert seen == [
        ("['kernel changed', False, 1]", 1),
        ("['kernel changed', False, 2]", 1),
        ("['kernel changed', False, 3]", 1),
    ], seen


#: Signals a process may catch or ignore (not ``SIGKILL``, ``SIGSTOP``, nor glibc's own 32
#: and 33); Python ignores ``SIGPIPE`` and ``SIGXFSZ`` from its start.
_CATCHABLE = [
    n for n in range(1, 65) if n not in (signal.SIGKILL, signal.SIGSTOP, 32, 33)
]  # fmt: skip
_IGNORED_AT_START = (signal.SIGPIPE, signal.SIGXFSZ)

_change = st.one_of(
    st.tuples(st.sampled_from(["c_handler", "py_setsig"]), st.sampled_from(_CATCHABLE)),
    st.tuples(
        st.just("ignore"), st.sampled_from([n for n in _CATCHABLE if n not in _IGNORED_AT_START])
    ),
    st.tuples(st.just("default"), st.sampled_from(_IGNORED_AT_START)),
    st.tuples(st.just("block"), st.sampled_from(_CATCHABLE)),
)


def _code(changes: list[tuple[str, int]]) -> str:
    lines = []
    for action, number in changes:
        if action in ("c_handler", "py_setsig"):
            lines.append(f"{action}({number})")
        elif action == "ignore":
            lines.append(f"c_sigaction({number}, 1)")
        elif action == "default":
            lines.append(f"c_sigaction({number}, 0)")
        else:
            lines.append(f"signal.pthread_sigmask(signal.SIG_BLOCK, {{{number}}})")
    return "\n".join(lines)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(changes=st.lists(_change, min_size=1, max_size=3))
def test_any_signal_disposition_or_mask_change_ends_the_process(probe, changes):
    """Property: any handler (through ctypes ``sigaction`` or ``PyOS_setsig``),
    ``SIG_IGN``, ``SIG_DFL`` or blocked signal, one to three at once, ends call A's process
    with ``plugin_kernel_state_changed``, the guest's own check switched off."""
    from django_webfetch.plugins.runtime.host import KERNEL_CHANGED, shutdown

    try:
        first, pooled, logged = _recycled_for_kernel(probe, _code(changes))
    finally:
        shutdown()
    assert first.kind == "json", first
    assert json.loads(first.text)["result"] == "['kernel changed', True, 1]", (changes, first)
    assert pooled == 0, changes
    assert any(KERNEL_CHANGED in message for message in logged), (changes, logged)


#: A plugin whose import sets a handler (below Python's ``signal``: the guest's table and
#: its own snapshot at ready never see it) that runs work the calls leave.
_IMPORT_HANDLER = """
import ctypes, signal
from django_webfetch.plugins.sandbox import host_io

_log = []
with host_io():
    _handler = ctypes.CFUNCTYPE(None, ctypes.c_int)(lambda number: _log.append("ran"))
    _setsig = ctypes.pythonapi.PyOS_setsig
    _setsig.restype = ctypes.c_void_p
    _setsig.argtypes = [ctypes.c_int, ctypes.c_void_p]
    _setsig(signal.SIGCONT, ctypes.cast(_handler, ctypes.c_void_p))
_calls = []


def count(plugin, arguments):
    _calls.append(1)
    return f"{len(_calls)} {len(_log)}"


def manifest():
    return {"name": "sig30imp", "version": "1.0", "description": "x", "egress": [],
            "tools": [{"name": "count", "description": "x", "handler": count}]}
"""


def test_a_handler_the_import_set_makes_every_call_end_its_process(tmp_path):
    """The host's reference is what it read before the import (the guest waits for
    ``import``), not at ready: a ``SIGCONT`` handler set by the plugin's import (work of
    each call could run at the next resume) gives each process one call, as an import
    that started threads does; the handler never runs."""
    import os

    from django_webfetch.plugins.runtime.host import (
        KERNEL_CHANGED,
        Limits,
        Origin,
        execute,
        idle_processes,
        shutdown,
    )

    site = tmp_path / "site"
    package = site / "webfetch_sig30_imp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(_IMPORT_HANDLER)
    os.chmod(site, 0o755)
    origin = Origin("webfetch_sig30_imp:manifest", str(site), "webfetch_sig30_imp")
    limits = Limits(5, 20, 1 << 30, 1 << 16, 5, 2)
    message = {"tool": "count", "arguments": {}, "config": {}, "plugin": "sig30imp",
               "alias": "sig30imp", "reference": "sig30imp"}  # fmt: skip
    records = _Records()
    logger = logging.getLogger("django_webfetch.plugins")
    logger.addHandler(records)
    level = logger.level
    logger.setLevel(logging.INFO)
    shutdown()
    try:
        counts = [execute(origin, ("sig30-imp", 1), message, None, limits=limits).text
                  for _ in range(3)]  # fmt: skip
        pooled = idle_processes()
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
        shutdown()
    assert counts == ["1 0", "1 0", "1 0"], counts
    assert pooled == 0
    assert sum(KERNEL_CHANGED in m for m in records.messages) == 3, records.messages


def test_the_host_reads_both_seccomp_filters_before_the_import():
    """What the guest proves of its filters (``guest._seccomp``) the host reads too, before
    any plugin code runs: no new privileges, seccomp in filter mode, two filters more than
    the host's own (bwrap's allow-list, the guest's ``no_exec``); a process with fewer is
    refused (``seccomp_unavailable``)."""
    import os

    from django_webfetch.plugins.runtime import host

    origin = host.Origin("json:dumps", os.path.dirname(os.__file__), "json")
    worker = host.Worker(origin, host.Limits(5, 20, 1 << 30, 1 << 16, 5, 2), "sig30")
    try:
        state = worker.kernel
        assert state is not None and host._filters_in_force(state), state
        fields = dict(zip(host._KERNEL_FIELDS, state, strict=True))
        own = dict(zip(host._KERNEL_FIELDS, host._kernel_state(os.getpid()), strict=True))
        assert int(fields[b"Seccomp_filters"]) == int(own[b"Seccomp_filters"]) + 2, fields
    finally:
        worker.close()

    def changed(name: bytes, value: bytes) -> tuple[bytes, ...]:
        return tuple(
            value if n == name else v for n, v in zip(host._KERNEL_FIELDS, state, strict=True)
        )

    one_fewer = str(int(fields[b"Seccomp_filters"]) - 1).encode()
    assert not host._filters_in_force(changed(b"Seccomp_filters", one_fewer))
    assert not host._filters_in_force(changed(b"Seccomp", b"0"))
    assert not host._filters_in_force(changed(b"NoNewPrivs", b"0"))
    assert not host._filters_in_force(changed(b"Seccomp_filters", b"x"))
    assert not host._filters_in_force(None)
