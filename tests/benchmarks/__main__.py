"""``python -m tests.benchmarks``: every benchmark, one after the other."""

from __future__ import annotations

import importlib
import pkgutil

import tests.benchmarks as package


def main() -> None:
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.name.startswith("bench_"):
            continue
        print(f"\n== {info.name} ==", flush=True)
        importlib.import_module(f"tests.benchmarks.{info.name}").main()


if __name__ == "__main__":
    main()
