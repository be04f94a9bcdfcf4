"""Benchmark what checking a trusted plugin's imports as they are read costs (decision 0053).

Run: ``.venv/bin/python -m tests.benchmarks.bench_pinned_import [modules]`` (default 200).

A package of N small modules in a temporary ``sys.path`` directory, imported (every module,
fresh each round) by the import system as it is (baseline: ``SourceFileLoader``, its
bytecode cache warm), and with the package claimed by ``loader.PinnedFinder`` (each file
read once, hashed, compared with its pinned digest and compiled from source); and the cost
of an unclaimed import with the finder first on ``sys.meta_path``.  Reported as ratios to
the baseline of the same process.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

from django_webfetch.plugins import loader

_SOURCE = "VALUE = {n}\n\n\ndef f(x):\n    return [x * i for i in range(10)]\n" * 5


def _import_all(name: str, count: int) -> float:
    for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
        del sys.modules[key]
    began = time.perf_counter()
    importlib.import_module(name)
    for i in range(count):
        importlib.import_module(f"{name}.m{i}")
    return time.perf_counter() - began


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(os.path.realpath(tmp))
        digests = {}
        for package in ("wfbench_plain", "wfbench_pinned"):
            (site / package).mkdir()
            (site / package / "__init__.py").write_text("")
            for i in range(count):
                (site / package / f"m{i}.py").write_text(_SOURCE.format(n=i))
        for path in (site / "wfbench_pinned").iterdir():
            digests[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        sys.path.insert(0, str(site))
        importlib.invalidate_caches()
        _import_all("wfbench_plain", count)  # writes the bytecode cache
        loader.claim("bench", {"wfbench_pinned": [str(site)]}, digests)
        rounds = 5
        plain = min(_import_all("wfbench_plain", count) for _ in range(rounds))
        pinned = min(_import_all("wfbench_pinned", count) for _ in range(rounds))
        print(
            f"{count} modules: plain {plain * 1e3:.1f} ms, pinned {pinned * 1e3:.1f} ms "
            f"({pinned / plain:.2f}x); per module {(pinned - plain) / count * 1e6:.0f} us more"
        )
        probe = [loader.PinnedFinder().find_spec("wfbench_unclaimed_x") for _ in range(1)]
        assert probe == [None]
        finder = loader.PinnedFinder()
        began = time.perf_counter()
        for _ in range(100_000):
            finder.find_spec("json.decoder")
        each = (time.perf_counter() - began) / 100_000
        print(f"an unclaimed name: {each * 1e9:.0f} ns per find_spec")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
