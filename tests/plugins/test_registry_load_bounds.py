"""Issue 30, attack 14, findings 2 and 3: what a registry load spends on the installed
distributions is bounded by construction.

A distribution declares at most ``registry.MAX_ENTRY_POINTS`` plugin entry points (more:
refused whole, ``plugin_too_many_entry_points``, before any is read); a load starts at
most ``registry.MAX_READS_PER_LOAD`` plugin processes and spends at most its budget on
them (the rest ``plugin_read_deferred``, read by a later load); the host reads at most
``host.READY_BYTES`` of a ``ready`` and keeps no manifest over ``MAX_MANIFEST_BYTES``; the
registry keeps verdicts, at most ``registry.MAX_DESCRIBED`` of them.  Distributions are
written as pip installs them (``tests/plugins/packages.py``); the registry, the runtime and
the sandbox are the real ones.
"""

from __future__ import annotations

import json
import pickle
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import wheel

pytestmark = pytest.mark.django_db


def _source(count: int, description: int = 1) -> str:
    """A package of ``count`` manifest callables ``m0``...; each description ``description``
    characters long."""
    return "".join(
        f"def m{i}():\n    return {{'name': 'p{i}', 'version': '1.0', 'egress': [], "
        f"'tools': [], 'description': 'x' * {description}}}\n\n\n"
        for i in range(count)
    )


def _distribution(site, label: str, count: int, description: int = 1) -> dict[str, str]:
    """Distribution ``webfetch-<label>`` in ``site`` with ``count`` entry points
    ``<label>0``... each naming its own manifest callable; its entry points."""
    entry_points = {f"{label}{i}": f"webfetch_{label}:m{i}" for i in range(count)}
    source = _source(count, description).replace("'name': 'p", f"'name': '{label}")
    wheel(site, f"webfetch-{label}", entry_points, {f"webfetch_{label}/__init__.py": source})
    return entry_points


def _reasons(name: str) -> list[str]:
    from django_webfetch.plugins import registry

    prefix = f"plugin entry point {name!r} refused ("
    return [p[len(prefix) :].split(")")[0] for p in registry.problems() if p.startswith(prefix)]


def test_a_distribution_over_the_entry_point_bound_is_refused_whole_before_any_read(
    tmp_path, registry_on
):
    """One more entry point than ``MAX_ENTRY_POINTS``: every one refused
    (``plugin_too_many_entry_points``), no plugin process started, and the refusal is what
    ``webfetch plugin list`` and check E030 show."""
    from django.core import checks

    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    from .test_cli import webfetch

    site = tmp_path / "site"
    entry_points = _distribution(site, "crowd", registry.MAX_ENTRY_POINTS + 1)
    registry_on.syspath_prepend(str(site))
    registry.reset()
    before = host.reads_started
    registry.load()
    assert host.reads_started == before
    for name in entry_points:
        assert registry.get_manifest(name) is None
        assert _reasons(name) == ["plugin_too_many_entry_points"]
    listed = webfetch("list")
    assert "refused: plugin entry point 'crowd0' refused (plugin_too_many_entry_points)" in listed
    assert f"'webfetch-crowd' declares {registry.MAX_ENTRY_POINTS + 1} entry points" in listed
    errors = [m for m in checks.run_checks() if m.id == "django_webfetch.E030"]
    assert any("plugin_too_many_entry_points" in m.msg for m in errors)


def test_a_load_starts_at_most_its_reads_and_a_later_load_reads_the_rest(tmp_path, registry_on):
    """A distribution at the bound and one more entry point elsewhere: one load starts
    ``MAX_READS_PER_LOAD`` plugin processes, defers the rest (``plugin_read_deferred``,
    shown), and the load done again after ``_RETRY_SECONDS`` reads the deferred ones first
    (the names read stay cached: no process started for them)."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    site = tmp_path / "site"
    full = _distribution(site, "full", registry.MAX_ENTRY_POINTS)
    extra = _distribution(site, "extra", 2)
    names = [*full, *extra]
    registry_on.syspath_prepend(str(site))
    registry.reset()
    loads = 0
    while True:
        before = host.reads_started
        registry.load()
        loads += 1
        loaded = {name for name in names if registry.get_manifest(name) is not None}
        deferred = {name for name in names if _reasons(name) == ["plugin_read_deferred"]}
        # Each load: at most its reads (fewer when the machine is so busy that the
        # budget's time ends first), every name loaded or deferred, none dropped.
        assert host.reads_started - before <= registry.MAX_READS_PER_LOAD
        assert loaded | deferred == set(names) and not loaded & deferred
        if loads == 1:
            assert len(deferred) >= len(names) - registry.MAX_READS_PER_LOAD
        if not deferred:
            break
        # Each load reads at least one (its budget holds one read's own bounds).
        assert loads < len(names)
        # No time waited: the retry's moment is set to now.
        registry_on.setattr(registry, "_retry_at", time.monotonic())
    assert loads >= 2
    assert not any("plugin_read_deferred" in p for p in registry.problems())


def test_a_read_past_the_callers_deadline_is_deferred_and_not_remembered(tmp_path, registry_on):
    """``host.describe`` with a deadline (a load's budget) cuts an import that would go on
    to its own wall time there: ``ReadDeferred``, not remembered as the package's failure
    (the next read starts a process again)."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    site = tmp_path / "site"
    wheel(site, "webfetch-slow", {"slow": "webfetch_slow:manifest"},
          {"webfetch_slow/__init__.py": "import time\ntime.sleep(3600)\n"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    origin = host.Origin("webfetch_slow:manifest", str(site), "webfetch_slow")
    with pytest.raises(host.ReadDeferred):
        host.describe(origin, deadline=time.monotonic() + 1)
    assert not host.remembered_failure(origin)


def test_a_manifest_over_the_limit_is_dropped_by_the_host_and_only_its_verdict_kept(
    tmp_path, registry_on
):
    """A manifest a few bytes over ``MAX_MANIFEST_BYTES`` (within ``READY_BYTES``) is
    measured as ``parse_manifest`` measures it and dropped when received; one far over is
    refused from its length, its body never read.  Both are ``manifest_too_large``; what
    the registry keeps of the first is a verdict of a few hundred bytes."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.manifest import MAX_MANIFEST_BYTES
    from django_webfetch.plugins.runtime import host

    overhead = len(json.dumps({"name": "near0", "version": "1.0", "egress": [], "tools": [],
                               "description": ""}))  # fmt: skip
    site = tmp_path / "site"
    near = _distribution(site, "near", 1, MAX_MANIFEST_BYTES - overhead + 1)
    far = _distribution(site, "far", 1, 4 * host.READY_BYTES)
    fits = _distribution(site, "fits", 1, 1000)
    registry_on.syspath_prepend(str(site))
    registry.reset()
    registry.load()
    for name in [*near, *far]:
        assert registry.get_manifest(name) is None
        assert _reasons(name) == ["manifest_too_large"], registry.problems()
    assert registry.get_manifest(next(iter(fits))) is not None
    kept = {origin.top_level: entry for origin, entry in registry._described.items()}
    assert "webfetch_far" not in kept  # refused from its length: a failure, remembered
    verdict = kept["webfetch_near"][1]
    assert verdict.manifest is None and verdict.refusal[0] == "manifest_too_large"
    assert len(pickle.dumps(verdict)) < 4096


@given(
    st.dictionaries(
        st.sampled_from(["ab", "cd"]),
        st.tuples(
            # Few reads within the bound (the count per load has its own test above), any
            # count over it (refused before any read: no process).
            st.one_of(st.integers(1, 3), st.integers(33, 40)),  # MAX_ENTRY_POINTS is 32
            st.sampled_from([1, 70_000, 300_000]),
        ),
        min_size=1,
    )
)
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
def test_what_a_load_starts_and_keeps_is_bounded_whatever_is_installed(registry_on, shapes):
    """Property: distributions of any number of entry points and manifests of any size
    (within, over ``MAX_MANIFEST_BYTES``, over ``READY_BYTES``): one load starts at most
    ``MAX_READS_PER_LOAD`` plugin processes, none for a distribution over
    ``MAX_ENTRY_POINTS``; every verdict kept holds at most ``MAX_MANIFEST_BYTES`` of
    manifest (pickled whole, with its handlers and report), and at most ``MAX_DESCRIBED``
    are kept."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.manifest import MAX_MANIFEST_BYTES
    from django_webfetch.plugins.runtime import host

    site = Path(tempfile.mkdtemp(prefix="webfetch-bounds-"))
    try:
        with pytest.MonkeyPatch.context() as patch:
            for label, (count, size) in shapes.items():
                _distribution(site, label, count, size)
            patch.syspath_prepend(str(site))
            registry.reset()
            registry._described.clear()
            before = host.reads_started
            registry.load()
            started = host.reads_started - before
            assert started <= registry.MAX_READS_PER_LOAD
            within = sum(c for c, _ in shapes.values() if c <= registry.MAX_ENTRY_POINTS)
            assert started <= within
            for label, (count, _size) in shapes.items():
                if count > registry.MAX_ENTRY_POINTS:
                    assert not any(o.top_level == f"webfetch_{label}" for o in registry._described)
            assert len(registry._described) <= registry.MAX_DESCRIBED
            for _key, verdict in registry._described.values():
                assert len(pickle.dumps(verdict)) <= MAX_MANIFEST_BYTES + 8192
            registry.reset()
    finally:
        shutil.rmtree(site, ignore_errors=True)
        registry.reset()


def test_the_hosts_measure_of_a_manifest_is_the_manifests_own():
    """``host.manifest_bytes`` (the cap applied when a ``ready`` is received) gives what
    ``parse_manifest`` measures of the manifest the registry makes of it, to the byte."""
    from django_webfetch.plugins.manifest import _size
    from django_webfetch.plugins.runtime import host

    class Handler:
        pass

    for tools in ([], [{"name": "t", "handler": True}], [{"name": "t", "handler": False}],
                  [{"name": "t"}, {"name": 3, "handler": True}, "x"]):  # fmt: skip
        raw = {"name": "é" * 10, "version": "1.0", "tools": tools}
        served = json.loads(json.dumps(raw))
        for tool in served["tools"]:
            if isinstance(tool, dict):
                named = tool.get("handler") is True and isinstance(tool.get("name"), str)
                tool["handler"] = Handler() if named else None
        assert host.manifest_bytes(raw) == _size(served)
