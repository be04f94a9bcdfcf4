"""Benchmark the host's pool check (issue 30, attack 8, finding 2) against a warm call.

Run: ``.venv/bin/python -m tests.benchmarks.bench_pool_check [calls]`` (default 300).

After each call the host stops the plugin process and reads its signal masks, filters,
capabilities and ids in ``/proc/<pid>/status`` (``host._kernel_state``) before it pools
it (``Worker.kernel_changed``: the read, after waiting for the process to be stopped).
In one interpreter, with one plugin process of the probe plugin (tests/plugins/
probe_site): the read of a stopped process alone, the stop and the check together (the
process continued first, as for a call), and a whole warm call of a tool that does
nothing (``host.execute``, pool included): medians in µs and the check's share of the call.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE_SITE = ROOT / "tests" / "plugins" / "probe_site"


def _median_us(run: object, times: int) -> float:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    calls = int(args[0]) if args else 300
    from django_webfetch.plugins.runtime import host

    origin = host.Origin("webfetch_code_probe:manifest", str(PROBE_SITE), "webfetch_code_probe")
    limits = host.Limits(5, 20, 1 << 30, 1 << 16, 5, 2)
    key = ("bench-pool-check", 1)
    message = {"tool": "codeprobe_run", "arguments": {"code": "result = 1"}, "config": {},
               "plugin": "codeprobe", "alias": "x", "reference": "x"}  # fmt: skip

    def call() -> None:
        outcome = host.execute(origin, key, message, None, limits=limits)
        assert outcome.kind == "json", outcome

    call()
    assert host.idle_processes() == 1, "the probe's process is not pooled"
    whole = _median_us(call, calls)
    worker = host._pool.acquire(key)
    assert worker is not None
    try:
        worker.pause()
        assert not worker.kernel_changed(worker.stopped_status())
        read = _median_us(lambda: host._status(worker.pid), calls * 10)

        def stop_and_check() -> None:
            worker.resume()
            worker.pause()
            assert not worker.kernel_changed(worker.stopped_status())

        stop = _median_us(stop_and_check, calls)
    finally:
        worker.close()
        host.shutdown()
    print(f"  read of /proc/<pid>/status (stopped)  {read:9.1f} µs")
    print(f"  continue, stop and check             {stop:9.1f} µs")
    print(f"  warm call (execute, pool included)   {whole:9.1f} µs")
    print(f"  check / warm call                    {stop / whole:9.3f}")


if __name__ == "__main__":
    main()
