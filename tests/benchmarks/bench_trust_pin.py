"""Benchmark what pinning trust to the plugin's code costs a provider look-up.

Run: ``.venv/bin/python -m tests.benchmarks.bench_trust_pin [files...]`` (default 1 20 200).

Every call of a ``trusted`` instance's tool asks the registry which distribution serves the
plugin (``registry.provider``: the installed plugin entry points and each one's
``Provider``).  The ``Provider`` digest was the SHA-256 of the distribution's ``RECORD``
(one file read); it is now the digest of every file of the plugin's package
(``provenance.code_digest``: a walk and a ``stat`` per file, each file's hash memoized by
its identity).  In one interpreter, with a plugin package of N files installed in a
temporary ``sys.path`` directory: ``registry.provider`` with the old ``RECORD`` digest
(baseline), with the code digest (memo warm: the steady state), and the code digest alone,
cold (memo cleared: the first look-up after files changed) and warm, and what every
trusted in-process call adds (``tools._pin_holds``: the pin compared again, memo warm).
Reported as ratios to the baseline of the same process.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def _record_provider(ep: Any) -> Any:
    """The ``Provider`` as it was before decision 0050: SHA-256 of ``RECORD``'s text."""
    from django_webfetch.plugins.provenance import Provider

    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    name = str(dist.metadata["Name"] or "")
    record = dist.read_text("RECORD")
    digest = hashlib.sha256(record.encode()).hexdigest() if record is not None else ""
    return Provider(name, str(dist.version or ""), digest)


def _per_call(fn: Any, rounds: int) -> float:
    fn()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter_ns()
        for _ in range(rounds):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / rounds)
    return best


def _package(site: Path, name: str, files: int) -> None:
    from tests.plugins.packages import MANIFEST, wheel

    sources = {f"{name}/__init__.py": MANIFEST % name}
    for index in range(files - 1):
        sources[f"{name}/sub{index % 10}/m{index}.py"] = f"VALUE = {index}\n" * 40
    for index in range(10):
        if any(k.startswith(f"{name}/sub{index}/") for k in sources):
            sources[f"{name}/sub{index}/__init__.py"] = ""
    wheel(site, f"bench-{name}", {name: f"{name}:manifest"}, sources)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    sizes = [int(a) for a in args] or [1, 20, 200]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django_webfetch.plugins import closure, provenance, registry, tools

    new_provider_of = registry.provider_of
    print("per registry.provider() call (all plugin entry points installed), ratio to RECORD:")
    for files in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            site = Path(tmp) / "site"
            name = f"benchpin{files}"
            _package(site, name, files)
            sys.path.insert(0, str(site))
            # Files changed within ``SETTLE_NS`` are read again at each digest (racily
            # clean): wait until they settled, as an installed plugin's files have.
            time.sleep(provenance.SETTLE_NS / 1e9 + 0.1)
            try:
                registry.reset()
                assert registry.get_manifest(name) is not None, registry.problems()
                rounds = 20
                base = pinned = float("inf")
                for _ in range(5):  # interleaved: a busy machine slows both alike
                    registry.provider_of = _record_provider  # type: ignore[assignment]
                    registry.reset()
                    registry.load()
                    base = min(base, _per_call(lambda name=name: registry.provider(name), rounds))
                    registry.provider_of = new_provider_of
                    registry.reset()
                    registry.load()
                    pinned = min(
                        pinned, _per_call(lambda name=name: registry.provider(name), rounds)
                    )
                origin = registry.origin(name)
                assert origin is not None

                def cold(origin: Any = origin) -> None:
                    provenance._hashes.clear()
                    provenance.code_digest(origin.path, origin.top_level)

                def warm(origin: Any = origin) -> None:
                    provenance.code_digest(origin.path, origin.top_level)

                cold_ns = _per_call(cold, 5)
                warm_ns = _per_call(warm, rounds)
                # What every trusted in-process call adds (issue 30, attack 7): the pin
                # compared with the recorded digest (``tools._pin_holds``), memo warm.
                instance = SimpleNamespace(
                    plugin=name,
                    trusted_record=closure.trust_digest(
                        registry.distribution(name), origin.path, origin.top_level, origin.entry
                    ),
                )
                assert tools._pin_holds(instance)
                pin_ns = _per_call(lambda instance=instance: tools._pin_holds(instance), rounds)
                print(
                    f"  {files:4d} files: RECORD {base / 1e6:7.2f} ms   code {pinned / 1e6:7.2f} ms"
                    f" ({pinned / base:5.2f}x)   code_digest cold {cold_ns / 1e6:7.2f} ms,"
                    f" warm {warm_ns / 1e6:7.2f} ms ({warm_ns / base:5.2f}x of a RECORD look-up)"
                    f"   per-call pin {pin_ns / 1e6:7.3f} ms ({pin_ns / pinned:5.3f}x of a"
                    " provider look-up)"
                )
            finally:
                registry.provider_of = new_provider_of
                sys.path.remove(str(site))
                registry.reset()


if __name__ == "__main__":
    main()
