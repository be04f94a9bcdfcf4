"""Benchmark a registry load with the environment's installed distributions.

Run: ``.venv/bin/python -m tests.benchmarks.bench_registry_load [repeats]`` (default 7).

A load places every installed distribution's files (``registry._Providers``: which
distribution installs each top-level name) and finds the site's own requirement set
(``closure.site_names``).  Both are memoized by the identity of the files they read
(``registry._names_memo``, ``closure._requires_memo``), never by the ``sys.path``
directories: a test's (or a site's) new directory on ``sys.path`` is read, the others are
not.  In one interpreter, with the example plugin installed in a new ``sys.path``
directory (not yet settled: read again at each load, as a test's is): the median CPU
(``time.process_time``) of a ``registry.load`` after ``reset`` with the memos warm, and
with them cleared before each load (the uncached read), and with a new empty directory put
on ``sys.path`` before each load (what a test, or a plugin directory, does: the memo was
keyed by the ``sys.path`` directories, so each read every ``RECORD`` again); ratios to the
uncached read.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from importlib.metadata import distributions

_SITE = os.path.join(os.path.dirname(__file__), "..", "plugins", "site")


def _clear() -> None:
    from django_webfetch.plugins import closure, registry

    for memo in (
        registry._names_memo,
        closure._requires_memo,
        closure._requirements_memo,
        closure._entries_memo,
        closure._site_memo,
    ):
        memo.clear()


def _median(repeats: int, cold: bool, tmp: str = "") -> float:
    from django_webfetch.plugins import registry

    times = []
    for i in range(repeats):
        if cold:
            _clear()
        if tmp:
            os.mkdir(os.path.join(tmp, f"new{i}"))
            sys.path.append(os.path.join(tmp, f"new{i}"))
        registry.reset()
        start = time.process_time()
        assert "example" in registry.load(), registry.problems()
        times.append(time.process_time() - start)
    if tmp:
        sys.path[:] = [p for p in sys.path if not p.startswith(tmp)]
    return statistics.median(times)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django_webfetch.plugins import registry

    with tempfile.TemporaryDirectory() as tmp:
        os.mkdir(os.path.join(tmp, "dirs"))
        site = os.path.join(tmp, "site")
        shutil.copytree(_SITE, site, ignore=shutil.ignore_patterns("state.json", "__pycache__"))
        os.chmod(site, 0o755)
        sys.path.insert(0, site)
        try:
            registry.reset()
            registry.load()  # the plugin process's verdict, kept by its inputs
            cold = _median(repeats, cold=True)
            warm = _median(repeats, cold=False)
            moved = _median(repeats, cold=False, tmp=os.path.join(tmp, "dirs"))
        finally:
            sys.path.remove(site)
            registry.reset()
    count = len(list(distributions()))
    print(f"distributions: {count}; median of {repeats} loads (CPU s)")
    print(f"  uncached (memos cleared): {cold:.4f}")
    print(f"  memoized:                 {warm:.4f}")
    print(f"  memoized, new sys.path directory each load: {moved:.4f}")
    print(f"  ratio memoized/uncached:  {warm / cold:.3f}")
    print(f"  ratio new-directory/uncached: {moved / cold:.3f}")


if __name__ == "__main__":
    main()
