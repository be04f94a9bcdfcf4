"""Benchmark what the trusted import's checks, made again at every trusted call, add to a
call (issue 30, attack 9, findings 3, 4 and 7: ``registry.code_problem``).

Run: ``.venv/bin/python -m tests.benchmarks.bench_trust_per_call [deps files ...]``
(default: pairs 0 0, 1 20, 5 20, 20 50; then the real ``hypothesis`` distribution).

In one interpreter, the plugins of ``bench_trust_dependencies`` (a package of 20 files
requiring a chain of D distributions of F files).  Reported per call, memos warm: the pin
compared before (``tools._pin_holds``), the checks added (``registry.code_problem``: each
``.pyc``'s verdict remembered by its and its source's identity, the names' resolution by
the identity of the import system's state), their ratio to the pin in the same process, and
the checks with nothing remembered (what a trusted import runs, ``_refuse_compiled``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from tests.benchmarks.bench_trust_dependencies import _install, _per_call


def _measure(label: str, deps: int, files: int, real: str = "") -> None:
    from django_webfetch.plugins import closure, provenance, registry, tools

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        site = Path(tmp) / "site"
        name = f"benchcall{deps}x{files}{'r' if real else ''}"
        _install(site, name, deps, files, real)
        sys.path.insert(0, str(site))
        # Settled, as installed files are (and each module's ``.pyc`` written, as the
        # site's interpreter writes it at the first import).
        import compileall

        compileall.compile_dir(str(site), quiet=1)
        time.sleep(provenance.SETTLE_NS / 1e9 + 0.1)
        try:
            registry.reset()
            assert registry.get_manifest(name) is not None, registry.problems()
            origin = registry.origin(name)
            dist = registry.distribution(name)
            assert origin is not None and dist is not None
            digest = closure.trust_digest(dist, origin.path, origin.top_level, origin.entry)
            instance = SimpleNamespace(plugin=name, trusted_record=digest)
            assert tools._pin_holds(instance)
            assert registry.code_problem(name) is None
            pin = _per_call(lambda: tools._pin_holds(instance), 20)
            added = _per_call(lambda: registry.code_problem(name), 20)
            full = _per_call(lambda: registry._refuse_compiled(origin), 5)
            pycs = sum(1 for _ in site.rglob("*.pyc"))
            print(
                f"  {label:>24}: {pycs:5d} .pyc files: pin {pin / 1e3:8.1f} us, "
                f"added {added / 1e3:8.1f} us ({added / pin:5.2f}x of the pin), "
                f"nothing remembered {full / 1e3:9.1f} us"
            )
        finally:
            sys.path.remove(str(site))
            registry.reset()


def main(argv: list[str] | None = None) -> None:
    args = [int(a) for a in (sys.argv[1:] if argv is None else argv)]
    pairs = list(zip(args[::2], args[1::2], strict=False)) or [(0, 0), (1, 20), (5, 20), (20, 50)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    print(f"per trusted call, sys.path of {len(sys.path)} entries:")
    for deps, files in pairs:
        _measure(f"{deps} x {files} files", deps, files)
    _measure("requires hypothesis", 0, 0, real="hypothesis")


if __name__ == "__main__":
    main()
