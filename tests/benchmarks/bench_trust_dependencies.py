"""Benchmark what pinning a trusted plugin's installed dependencies costs (decision 0051).

Run: ``.venv/bin/python -m tests.benchmarks.bench_trust_dependencies [deps files ...]``
(default: pairs 0 0, 1 20, 5 20, 20 50; then the real ``hypothesis`` distribution).

In one interpreter, a plugin package of 20 files installed in a temporary ``sys.path``
directory, requiring a chain of D distributions of F files each (the last one requiring the
first: a cycle).  Reported: what every trusted in-process call compares
(``tools._pin_holds``: the plugin's code and its dependencies' digests, memos warm), as a
ratio to the same plugin with no dependency (the pin of decision 0050) in the same process;
the whole ``trust_digest`` with every memo cleared (the first look-up after files changed,
and each registry load, which reads every file again); and a ``registry.provider`` look-up.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def _per_call(fn: Any, rounds: int) -> float:
    fn()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter_ns()
        for _ in range(rounds):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / rounds)
    return best


def _install(site: Path, name: str, deps: int, files: int, real: str = "") -> None:
    from tests.plugins.packages import MANIFEST, wheel

    chain = [f"benchdep-{name}-{i}" for i in range(deps)]
    requires = [chain[0]] if chain else []
    if real:
        requires.append(real)
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    sources = {f"{name}/__init__.py": MANIFEST % name}
    sources.update({f"{name}/m{i}.py": f"V = {i}\n" * 40 for i in range(19)})
    head = f"Metadata-Version: 2.1\nName: bench-{name}\nVersion: 1.0\n{meta}"
    wheel(site, f"bench-{name}", {name: f"{name}:manifest"}, sources,
          {"METADATA": head.encode()})  # fmt: skip
    for index, dist in enumerate(chain):
        top = dist.replace("-", "_")
        files_of = {f"{top}/__init__.py": "X = 1\n"}
        files_of.update({f"{top}/m{i}.py": f"V = {i}\n" * 40 for i in range(files - 1)})
        following = chain[(index + 1) % len(chain)]
        wheel(site, dist, {}, files_of,
              {"METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n"
               f"Requires-Dist: {following}\n".encode()})  # fmt: skip


def _measure(label: str, deps: int, files: int, real: str = "") -> dict[str, float]:
    from django_webfetch.plugins import closure, provenance, registry, tools

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        site = Path(tmp) / "site"
        name = f"benchdeps{deps}x{files}{'r' if real else ''}"
        _install(site, name, deps, files, real)
        sys.path.insert(0, str(site))
        time.sleep(provenance.SETTLE_NS / 1e9 + 0.1)  # settled, as installed files are
        try:
            registry.reset()
            assert registry.get_manifest(name) is not None, registry.problems()
            origin = registry.origin(name)
            dist = registry.distribution(name)
            assert origin is not None and dist is not None
            found = registry.dependencies(name)
            assert not any(d.problem for d in found), found
            digest = closure.trust_digest(dist, origin.path, origin.top_level, origin.entry)
            instance = SimpleNamespace(plugin=name, trusted_record=digest)
            assert tools._pin_holds(instance)
            pin = _per_call(lambda: tools._pin_holds(instance), 20)
            # Before attack 12 the pin covered the entry point's package alone (no entry
            # point value, no other top-level name, no metadata): the same process's ratio.
            alone = whole = float("inf")
            for _ in range(5):  # interleaved: a busy machine slows both alike
                alone = min(
                    alone,
                    _per_call(
                        lambda: closure.pinned_digest(
                            provenance.code_digest(origin.path, origin.top_level),
                            closure.closure_of(dist, origin.path),
                        ),
                        20,
                    ),
                )
                whole = min(
                    whole,
                    _per_call(
                        lambda: closure.trust_digest(
                            dist, origin.path, origin.top_level, origin.entry
                        ),
                        20,
                    ),
                )

            def cold() -> None:
                provenance._hashes.clear()
                closure._closures.clear()
                closure._site_memo.clear()
                closure._entries_memo.clear()
                closure.trust_digest(dist, origin.path, origin.top_level, origin.entry)

            cold_ns = _per_call(cold, 2)
            look_up = _per_call(lambda: registry.provider(name), 10)
            counted = sum(
                tree[1]
                for _label, where, top in closure.packages(dist, origin.path)
                if not isinstance(tree := provenance.code_tree(where, top), str)
            )
            print(
                f"  {label:>24}: {len(found):3d} dependencies, {counted:5d} files:"
                f"  per-call pin {pin / 1e6:7.3f} ms   cold trust_digest "
                f"{cold_ns / 1e6:8.2f} ms   registry.provider {look_up / 1e6:7.2f} ms"
                f"   whole-distribution pin {whole / alone:5.2f}x of the package's alone"
            )
            return {"pin": pin, "cold": cold_ns, "provider": look_up}
        finally:
            sys.path.remove(str(site))
            registry.reset()


def main(argv: list[str] | None = None) -> None:
    args = [int(a) for a in (sys.argv[1:] if argv is None else argv)]
    pairs = list(zip(args[::2], args[1::2], strict=False)) or [(0, 0), (1, 20), (5, 20), (20, 50)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    print("a trusted plugin of 20 files, its dependencies a chain (a cycle) of D x F files:")
    base = _measure("no dependency", 0, 0)
    for deps, files in pairs:
        if deps:
            found = _measure(f"{deps} x {files} files", deps, files)
            print(
                f"  {'':>24}  per-call pin {found['pin'] / base['pin']:6.2f}x and provider "
                f"{found['provider'] / base['provider']:5.2f}x of no dependency"
            )
    found = _measure("requires hypothesis", 0, 0, real="hypothesis")
    print(
        f"  {'':>24}  per-call pin {found['pin'] / base['pin']:6.2f}x and provider "
        f"{found['provider'] / base['provider']:5.2f}x of no dependency"
    )


if __name__ == "__main__":
    main()
