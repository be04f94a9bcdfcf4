"""Issue 30, round 22: an outside attack on the plugin sandbox and its pool.

Each test failed on the code it was written against (d950f7b); its docstring keeps the
severity, the route and the gain.  The tests run a hostile plugin (or the probe) in its
real sandbox and observe from the host side.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_one_plugins_locks_make_every_other_plugins_processes_single_use(tmp_path, caplog):
    """Severity: Medium (availability of every plugin of the site, and of every other site
    on the machine running this code).  Route: round 21's fix made "cannot tell" fail
    closed: ``host._locks`` reads at most ``host.LOCKS_READ`` (256 KiB) of
    ``/proc/locks``, and past it ``Worker.holds_locks`` says the process holds locks, so
    it is not pooled (``plugin_holds_locks``).  But ``/proc/locks`` is the whole
    machine's table, not the process's: any process that holds some 5,000 byte-range
    locks (an untrusted plugin's call, on files of its own ``/tmp``: ``F_OFD_SETLK`` is
    allowed and nothing bounds how many a process takes; each line is ~50 bytes) makes
    the table longer than the bound, and then *no* plugin process of any plugin is pooled,
    however well it behaves: each of its calls pays a new sandbox (bwrap, namespaces,
    the interpreter, the plugin's import) in the site's worker.  The attacker holds its
    locks for the wall time of each of its calls (here 10,000 locks for a few seconds),
    and keeps them there by calling again.  Gain: one untrusted plugin turns the pool off
    for the whole site (every call cold: hundreds of ms of CPU each instead of a warm
    call), while its own process stays within every limit.  Expected: a process that
    holds no lock is pooled whatever other processes hold (``/proc/locks`` not consulted,
    or only for the process's own mapped inodes: e.g. ``F_OFD_GETLK`` through
    ``/proc/<pid>/map_files``, or any file-backed mapping the call added refusing the
    process)."""
    import json
    import logging
    import threading
    import time

    from django_webfetch.plugins.runtime import host
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin
    from tests.plugins.test_pool_refuses_locks_and_masks_linked_data_copies import (
        _BENIGN,
        _LOCKS_IN_MAPPINGS,
        _all_lock_lines,
    )

    attacker = _plugin(tmp_path / "a", "webfetch_a22locks", "a22locks", _LOCKS_IN_MAPPINGS,
                       {"idle": "idle", "wait": "hold_and_wait"})  # fmt: skip
    benign = _plugin(tmp_path / "b", "webfetch_a22benign", "a22benign", _BENIGN,
                     {"ping": "ping"})  # fmt: skip
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)
    key = ("a22benign", 1)

    def call(origin: Any, key: Any, name: str, tool: str, arguments: dict[str, Any]) -> Any:
        message = {"tool": tool, "arguments": arguments, "config": {}, "plugin": name,
                   "alias": name, "reference": name}  # fmt: skip
        outcome = host.execute(origin, key, message, None, limits=limits)
        assert outcome.kind in ("text", "json"), outcome
        return outcome.text

    caplog.set_level(logging.INFO, logger="django_webfetch.plugins")
    host.shutdown()
    baseline = _all_lock_lines()
    done: list[Any] = []
    attack = threading.Thread(
        target=lambda: done.append(
            call(
                attacker, ("a22locks", "wait"), "a22locks", "wait", {"count": 10_000, "seconds": 6}
            )
        ),  # fmt: skip
        daemon=True,
    )
    try:
        assert call(benign, key, "a22benign", "ping", {}) == "pong"
        assert len(host._pool._idle.get(key, [])) == 1, "the control: the benign one is pooled"
        attack.start()
        for _ in range(600):
            if _all_lock_lines() >= baseline + 10_000:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the attacker took no locks: {done}")
        caplog.clear()
        assert call(benign, key, "a22benign", "ping", {}) == "pong"
        recycled = [r.getMessage() for r in caplog.records if host.HOLDS_LOCKS in r.getMessage()]
        assert len(host._pool._idle.get(key, [])) == 1 and not recycled, (
            "a well-behaved plugin's process, holding no lock, was not pooled because "
            f"another plugin holds locks: {recycled}"
        )
    finally:
        attack.join(90)
        host.shutdown()
    assert json.loads(done[0])["taken"] == 10_000, done
