"""Benchmark the cost of the plugin sandbox's audit hook on the rest of the process.

Run: ``.venv/bin/python -m tests.benchmarks.bench_plugins [count]`` (default 200,000).

``sys.addaudithook`` hooks cannot be removed, so once a plugin tool has run, every audited
operation of the process (``open``, ``compile``, ``exec``, imports, sockets...) calls the
hook.  Each measurement runs in a fresh interpreter (``-c``) so the baseline has no hook:
the same loop of audited operations is timed with no hook, with the hook outside any plugin
scope (the host's normal work), and inside a plugin scope for events the hook does not
refuse.  Reported as ratios against the baseline of the same machine and run.
"""

from __future__ import annotations

import subprocess
import sys

_LOOP = """
import os, sys, time
count = {count}
def events():
    start = time.perf_counter_ns()
    for _ in range(count):
        sys.audit("django_webfetch.bench", 1)  # an event nobody watches
    return (time.perf_counter_ns() - start) / count
def files():
    start = time.perf_counter_ns()
    for _ in range(count // 10):
        open(os.devnull, "rb").close()  # 'open' is audited by CPython
    return (time.perf_counter_ns() - start) / (count // 10)
{setup}
events(); files()  # warm up
print(min(events() for _ in range(5)), min(files() for _ in range(5)))
"""

_SETUPS = {
    "no hook (baseline)": "",
    "hook installed, outside a plugin scope": (
        "from django_webfetch.plugins import sandbox\nsandbox.install()"
    ),
    "hook installed, inside a plugin scope": (
        "from django_webfetch.plugins import sandbox\n"
        "scope = sandbox.plugin_scope('bench')\nscope.__enter__()"
    ),
}


def _measure(setup: str, count: int) -> tuple[float, float]:
    code = _LOOP.format(count=count, setup=setup)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    events, files = out.strip().splitlines()[-1].split()
    return float(events), float(files)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    count = int(args[0]) if args else 200_000
    results = {name: _measure(setup, count) for name, setup in _SETUPS.items()}
    base_events, base_files = results["no hook (baseline)"]
    print("per bare audit event / per open(os.devnull).close(), ratio to the baseline:")
    for name, (events, files) in results.items():
        print(
            f"  {name:<42} {events:7.0f} ns ({events / base_events:5.2f}x)"
            f"   {files:7.0f} ns ({files / base_files:5.2f}x)"
        )


if __name__ == "__main__":
    main()
