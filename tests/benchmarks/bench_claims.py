"""Benchmark what releasing stale claims of the pinned loader costs (issue 30, attack 16,
finding 4; decision 0053 as amended).

Run: ``.venv/bin/python -m tests.benchmarks.bench_claims [files ...]`` (default 100 1000).

In one interpreter (``tests.settings``: SQLite in memory, migrated): ``loader.claim`` of a
plugin's N files while K other plugins' live claims hold the same files (a shared
dependency: each claim compares its digests with theirs, then the index is rebuilt), and
``tools.release_stale_claims`` (one query of the trusted instances, made before every
trusted call while the process holds a claim) with K trusted instances recorded.
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial
from typing import Any


def _per_call(run: Any, rounds: int) -> float:
    """The best of 5 averages over ``rounds`` calls, in ns."""
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter_ns()
        for _ in range(rounds):
            run()
        best = min(best, (time.perf_counter_ns() - began) / rounds)
    return best


def main(argv: list[str] | None = None) -> None:
    sizes = [int(a) for a in (sys.argv[1:] if argv is None else argv)] or [100, 1000]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django_webfetch.plugins import loader, tools
    from django_webfetch.plugins.models import PluginInstance

    for files in sizes:
        for others in (1, 10):
            PluginInstance.objects.all().delete()
            rows = [("bench", "pin"), *((f"other{k}", f"pin{k}") for k in range(others))]
            PluginInstance.objects.bulk_create(
                [
                    PluginInstance(plugin=p, alias=p, trusted=True, trusted_record=pin)
                    for p, pin in rows
                ]  # fmt: skip
            )
            with loader._lock:
                loader._claims.clear()
                loader._released.clear()
            paths = {f"/bench/site/dep/m{i}.py": f"{i:064x}" for i in range(files)}
            tops = {"dep": ["/bench/site"]}
            for k in range(others):
                loader.claim(f"other{k}", tops, paths, pin=f"pin{k}")
            took = _per_call(partial(loader.claim, "bench", tops, paths, pin="pin"), 20)

            def rebuild() -> None:
                with loader._lock:
                    loader._rebuild()

            index = _per_call(rebuild, 20)  # what a claim did before (the index rebuilt)
            query = _per_call(tools.release_stale_claims, 200)
            assert len(loader.held()[1]) == others + 1
            print(
                f"{files:5d} files, {others + 1:2d} live claims: claim {took / 1e3:8.1f} us "
                f"(of which the index {index / 1e3:8.1f} us), "
                f"release_stale_claims {query / 1e3:6.1f} us"
            )
    with loader._lock:
        loader._claims.clear()
        loader._released.clear()


if __name__ == "__main__":
    main()
