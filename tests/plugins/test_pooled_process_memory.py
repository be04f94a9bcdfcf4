"""Issue 30, second attack (s4b), finding 3: what a call leaves in memory idled with its
pooled process (248 MiB idle against 48 MiB after an empty call), for as long as no call
came, per process, instance and host process.

After each call the host compares what the plugin process holds (``VmRSS`` and ``VmSwap``
of its ``/proc/<pid>/status``, the bytes of its private ``/tmp``) with what it held when it
got ready, and ends it rather than pooling it when that grew by more than
``host.MAX_IDLE_GROWTH``.  Everything is observed on the host side; each test runs a few
calls of the codeprobe plugin (``tests/plugins/probe_site``).
"""

from __future__ import annotations

import pytest

from tests.plugins.test_plugin_process_cannot_reach_the_site import descendants

pytestmark = pytest.mark.django_db

#: A call that counts, in its process, the calls that process served.
COUNT = "import sys\nsys.calls = getattr(sys, 'calls', 0) + 1\nresult = sys.calls\n"


def _keep(mib: int) -> str:
    """A call that leaves ``mib`` MiB touched (resident) in its process."""
    return (
        f"import sys\nblock = bytearray({mib} << 20)\n"
        "for i in range(0, len(block), 4096):\n    block[i] = 1\n"
        "sys.modules.setdefault('__kept__', []).append(block)\n" + COUNT
    )


def _plugin_rss() -> int:
    """Resident memory of this test's plugin processes (not bwrap's), host-side."""
    total = 0
    for pid in descendants():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            if argv[0].endswith(b"bwrap") or b"runtime.guest import main" not in b" ".join(argv):
                continue
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def test_an_idle_pooled_process_does_not_keep_what_its_call_allocated(probe, settings):
    """The attack's case (smaller): a call leaves 48 MiB resident under a 256 MiB bound; the
    host ends that process instead of pooling it, and the next call gets a fresh one."""
    from django_webfetch.plugins.runtime.host import MAX_IDLE_GROWTH, idle_processes, shutdown

    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 256 << 20
    try:
        assert probe(COUNT).text == '{"result": "1"}'
        ready = _plugin_rss()
        assert idle_processes() == 1
        outcome = probe(_keep(48))
        assert outcome.text == '{"result": "2"}', outcome  # the call itself succeeded
        idle = _plugin_rss()
        assert idle_processes() == 0
        assert idle - ready <= MAX_IDLE_GROWTH, (ready >> 20, idle >> 20)
        assert probe(COUNT).text == '{"result": "1"}'  # a fresh process
    finally:
        shutdown()


def test_a_call_that_frees_what_it_used_or_keeps_a_little_keeps_its_process(probe, settings):
    """The pool still works: 64 MiB allocated and freed by a call, then 6 MiB kept (under the
    16 MiB margin), and the same process serves the third call."""
    from django_webfetch.plugins.runtime.host import idle_processes, shutdown

    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 256 << 20
    try:
        freed = (
            "block = bytearray(64 << 20)\n"
            "for i in range(0, len(block), 4096):\n    block[i] = 1\n"
            "del block\n" + COUNT
        )
        assert probe(freed).text == '{"result": "1"}'
        assert probe(_keep(6)).text == '{"result": "2"}'
        assert idle_processes() == 1
        assert probe(COUNT).text == '{"result": "3"}'
    finally:
        shutdown()


def test_bytes_a_call_leaves_in_its_tmp_count_too(probe, settings):
    """The private ``/tmp`` is a tmpfs: its pages are in no ``VmRSS``.  6 MiB kept resident
    (pooled, above) plus 14 MiB left in ``/tmp`` (under the 16 MiB ``/tmp``) is more than
    the margin: the process is ended, not pooled."""
    from django_webfetch.plugins.runtime.host import idle_processes, shutdown

    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 256 << 20
    try:
        # Into its working directory, its scratch directory under /tmp.
        leave = "with open('kept', 'wb') as fh:\n    fh.write(b'x' * (14 << 20))\n"
        outcome = probe(leave + _keep(6))
        assert outcome.text == '{"result": "1"}', outcome
        assert idle_processes() == 0
        assert probe(COUNT).text == '{"result": "1"}'
    finally:
        shutdown()
