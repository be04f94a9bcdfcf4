"""``python -m tests.benchmarks [NAME [ARGS...]]``: every benchmark one after the other, or
only ``NAME`` (``bench_text``, ``fuzz_text``, ...) with its own arguments."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import tests.benchmarks as package


def main() -> None:
    if len(sys.argv) > 1:
        name, args = sys.argv[1], sys.argv[2:]
        module = importlib.import_module(f"tests.benchmarks.{name}")
        if args:
            module.main(args)
        else:
            module.main()
        return
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.name.startswith("bench_"):
            continue
        print(f"\n== {info.name} ==", flush=True)
        importlib.import_module(f"tests.benchmarks.{info.name}").main()


if __name__ == "__main__":
    main()
