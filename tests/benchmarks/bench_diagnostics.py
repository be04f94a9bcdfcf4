"""Benchmark the error-analysis guards against unguarded baselines in the same process.

Run: ``.venv/bin/python -m tests.benchmarks.bench_diagnostics [files]`` (default 2,000).

* ``SourcePathGuard.resolve`` + ``open`` + read of a project file, against a plain
  ``open(os.path.join(root, path)).read()``: what every read_source call pays for the guard.
* ``CodeSearch`` (literal) over a generated tree, against a naive ``os.walk`` + read + ``in``
  over the same tree: what search_code pays for the guard, the skip rules and the budget.
* ``LogExceptionReader`` over a 2 MiB log of Django-style records with tracebacks, every
  record and only the newest (what get_last_exception asks for), against splitting the
  same bytes into lines: the cost of parsing.

Both sides of each pair see the same files and give the same answer (checked).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable

from django_webfetch.diagnostics.logs import LogExceptionReader
from django_webfetch.diagnostics.paths import SourcePathGuard
from django_webfetch.diagnostics.search import CodeSearch


def _tree(root: str, files: int) -> list[str]:
    paths = []
    for index in range(files):
        relative = f"pkg{index % 40:02d}/sub{index % 7}/mod{index}.py"
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            fh.write("import os\n\n" + "def f(x):\n    return x + 1\n" * 40)
            if index % 97 == 0:
                fh.write("NEEDLE = 1\n")
        paths.append(relative)
    return paths


def _best(function: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def _naive_search(root: str, needle: str) -> int:
    hits = 0
    for directory, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as fh:
                for line in fh.read().split("\n"):
                    if needle in line:
                        hits += 1
    return hits


def _log(path: str) -> None:
    record = (
        "2026-12-01 03:00:00,{ms:03d} ERROR django.request Internal Server Error: /shop/{n}/\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/app/.venv/lib/python3.11/site-packages/django/core/handlers/exception.py"'
        ", line 55, in inner\n    response = get_response(request)\n"
        '  File "/srv/app/shop/views.py", line 11, in cart\n    return total / count\n'
        "ZeroDivisionError: division by zero\n"
        "2026-12-01 03:00:00,{ms:03d} INFO django.server GET /shop/{n}/ 500\n"
    )
    with open(path, "w") as fh:
        n = 0
        while fh.tell() < 2 * 1024 * 1024:
            fh.write(record.format(ms=n % 1000, n=n))
            n += 1


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    files = int(args[0]) if args else 2_000
    with tempfile.TemporaryDirectory(prefix="webfetch-bench-diag-") as root:
        paths = _tree(root, files)
        guard = SourcePathGuard(root)
        sample = paths[:: max(len(paths) // 500, 1)]

        def guarded() -> None:
            for relative in sample:
                real, _ = guard.resolve(relative)
                with guard.open(real) as fh:
                    fh.read()

        def plain() -> None:
            for relative in sample:
                with open(os.path.join(root, relative), "rb") as fh:
                    fh.read()

        ours, base = _best(guarded), _best(plain)
        print(f"reads:           {len(sample):,} files")
        print(f"guarded read     {ours / len(sample) * 1e6:8.1f} us/file")
        print(f"plain open/read  {base / len(sample) * 1e6:8.1f} us/file")
        print(f"guard overhead   {ours / base:8.1f}x")

        search = CodeSearch(guard)
        outcome = search.search("NEEDLE")
        expected = _naive_search(root, "NEEDLE")
        if len(outcome.hits) != expected or outcome.exhausted:
            raise SystemExit(f"search disagrees: {len(outcome.hits)} vs {expected}")
        ours = _best(lambda: search.search("NEEDLE"), 3)
        base = _best(lambda: _naive_search(root, "NEEDLE"), 3)
        print(f"search:          {files:,} files, {expected} hits")
        print(f"CodeSearch       {files / ours:8.0f} files/s")
        print(f"naive os.walk    {files / base:8.0f} files/s")
        print(f"ratio            {ours / base:8.2f}x the naive time")

        log = os.path.join(root, "django.log")
        _log(log)
        reader = LogExceptionReader([log])
        count = len(reader.records())

        def split() -> None:
            with open(log, "rb") as fh:
                fh.read().decode("utf-8", "replace").split("\n")

        full = _best(reader.records, 3)
        newest = _best(lambda: reader.records(limit=1), 3)
        base = _best(split, 3)
        print(f"log:             2 MiB, {count:,} error records")
        print(f"all records        {full * 1000:6.1f} ms  ({full / base:5.1f}x read + split)")
        print(f"newest (limit=1)   {newest * 1000:6.1f} ms  ({newest / base:5.1f}x read + split)")
        print(f"read + split       {base * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
