"""An idle plugin process is ended by the kernel, never by asking it, and no process keeps
where the site's hidden files lie (issue 30, round 28, findings 2 and 4).

* ``Worker.close`` sent ``exit`` and waited 2 s for the process's own end; the guest's loop
  is the plugin's code to replace, so a process sleeping on ``exit`` held the closing
  thread (a registry reset, a release into a full pool, after the call's result) 2 s per
  process.  It is SIGKILLed now (``Worker.kill``), as every other end of a process is.
* The host hands the guest every path it masks, for its Landlock rules; the guest kept
  them in its ``setup`` message for the process's life, where the plugin's code found
  them (``gc.get_objects()``): the names and places of the site's keys, database and
  logs.  They are dropped once the rules are made, before any plugin code runs.

Observed with the real sandbox through the codeprobe plugin (``tests/plugins/probe_site``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.packages import open_up

pytestmark = pytest.mark.django_db

_IGNORE_EXIT = """\
import time
from django_webfetch.plugins.runtime import protocol
if not getattr(protocol.Channel, "_ignores_exit", False):
    received = protocol.Channel.recv
    def recv(self, *args, **kwargs):
        message = received(self, *args, **kwargs)
        while message.get("op") == "exit":
            time.sleep(0.05)  # asleep: no CPU, no thread, no descriptor, no signal
        return message
    protocol.Channel.recv = recv
    protocol.Channel._ignores_exit = True
result = str(__import__("os").getpid())
"""


def test_an_idle_process_that_would_ignore_exit_is_ended_at_once(probe: Any) -> None:
    """History: issue 30, round 28, finding 2 (Low, availability).  The process replaced
    its own loop to sleep on ``exit`` and was pooled as usual; closing it (``shutdown``)
    ends it by the kernel: gone, its pool empty, and the closing thread was not held for
    the 2 s the old close waited at least (a far bound: a kill and a reap take
    milliseconds)."""
    from django_webfetch.plugins.runtime import host

    outcome = probe(_IGNORE_EXIT)
    assert outcome.kind == "json", outcome
    assert host.idle_processes() == 1  # pooled: nothing of the call is left that the host sees
    [worker] = [w for idle in host._pool._idle.values() for w in idle]
    pid = worker.process.pid
    started = time.monotonic()
    host.shutdown()
    took = time.monotonic() - started
    assert host.idle_processes() == 0
    assert worker.process.poll() is not None  # bwrap reaped it, and is gone itself
    assert not os.path.exists(f"/proc/{pid}") or _zombie_or_gone(pid)
    assert took < 2.0, f"closing one idle process held the host {took:.2f} s"


def _zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


_FIND_PATHS = """\
import gc, json
found = set()
for obj in gc.get_objects():
    held = isinstance(obj, (list, tuple, set, frozenset))
    values = obj.values() if isinstance(obj, dict) else obj if held else ()
    for value in values:
        # A path (the marker alone is in this code's own text).
        if isinstance(value, str) and value.startswith("/") and %r in value:
            found.add(value)
result = json.dumps(sorted(found))
"""


def test_no_plugin_code_finds_where_the_sites_hidden_files_lie(
    probe: Any, system_library_dir: Path, settings: Any
) -> None:
    """History: issue 30, round 28, finding 4 (Low, information).  A key file listed in
    ``WEBFETCH_PLUGIN_HIDDEN_PATHS`` is masked, and its path is nowhere among the objects
    of the plugin's process either (the guest dropped the host's list once its Landlock
    rules were made)."""
    from django_webfetch.plugins.runtime.host import shutdown

    marker = "s16-where-the-site-keeps-its-key"
    key = system_library_dir / "myapp" / f"{marker}.pem"
    key.parent.mkdir()
    key.write_text("-----BEGIN PRIVATE KEY-----\n")
    open_up(system_library_dir)
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [str(key)]
    try:
        outcome = probe(_FIND_PATHS % marker)
    finally:
        shutdown()
    assert outcome.kind == "json", outcome
    found = json.loads(json.loads(outcome.text)["result"])
    assert found == [], f"the plugin's code reads where the site's key is: {found}"
