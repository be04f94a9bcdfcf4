"""Issue 30, round 18: an outside attack on the plugin sandbox and the trust pin.

Each test here FAILS on the code it was written against: it is the proof of a way past
the containment or the pin (the docstring gives the severity, the route and the gain).
Nothing is fixed here.  Every test runs the codeprobe plugin (``tests/plugins/probe_site``)
in its real sandbox and observes from the host side.
"""

from __future__ import annotations

import json
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
    ``test_issue30_shared.py``), refuses a process only when it holds *more* descriptors
    than when it got ready.  The count is compared, not which descriptors: a call
    ``dup2``s, over each of its stdio descriptors (``/dev/null``), one end of a stream
    socketpair whose other end filled it to the default send buffer (~230 KiB here) and
    closed.  The process holds 5 descriptors, as at ready, and is pooled with ~700 KiB
    (with its ``/proc/1/status`` descriptor, the fourth it may swap, ~930 KiB) of queued
    socket buffers on top of the ``MAX_IDLE_GROWTH`` the host lets it keep resident.
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
