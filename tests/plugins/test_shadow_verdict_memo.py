"""Issue 30, attack 10, finding 4: the per-call check's remembered resolution of a pinned
name (``registry._shadow_verdict``, keyed by ``registry._shadow_key``) always equals the
full check (``registry._shadow_problem``), whatever links, dangling links, files and
directories an earlier ``sys.path`` directory holds and however they change, and whatever
finder takes the address of one collected.  Real parts only: files on disk, the real
import system, the real registry."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import itertools
import os
import shutil
import sys
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_counter = itertools.count()

#: Longer than one tick of the clock the kernel stamps files with (a change within the
#: tick of a read is what the settle window, set to 0 here, is for).
_TICK = 0.03

#: The entries of a ``sys.path`` directory the path finder could load for name T.
_SLOTS = ("T.py", "T.pyc", "T", "T/__init__.py")
#: What a slot holds: nothing, a file (a directory for ``T``), a link to its target.
_KINDS = ("absent", "real", "link")
#: What a link's target is: missing (the link dangles), present; for ``T``'s target (a
#: directory), present with an ``__init__.py``.
_TARGETS = ("missing", "present", "package")

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("slot"), st.sampled_from(_SLOTS), st.sampled_from(_KINDS)),
        st.tuples(st.just("target"), st.sampled_from(_SLOTS), st.sampled_from(_TARGETS)),
    ),
    min_size=1,
    max_size=8,
)


def _clear(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _apply(cwd: Path, later: Path, top: str, op: tuple[str, str, str]) -> None:
    """One change of the layout: a slot of ``cwd`` set to ``kind``, or the target in
    ``later`` of a slot's link completed or removed (the link itself untouched)."""
    what, slot, kind = op
    name = slot.replace("T", top)
    target = later / slot.replace("/", "_")
    if what == "target":
        _clear(target)
        if kind != "missing" and slot == "T":
            target.mkdir()
            if kind == "package":
                (target / "__init__.py").write_text("ANSWER = 'stray'\n")
        elif kind != "missing":
            target.write_text("ANSWER = 'stray'\n")
        return
    place = cwd / name
    if slot == "T/__init__.py" and not (place.parent.is_dir() and not place.parent.is_symlink()):
        return  # only inside a real directory ``T`` (a link's is its target's)
    _clear(place)
    if kind == "real" and slot == "T":
        place.mkdir()
    elif kind == "real":
        place.write_text("ANSWER = 'stray'\n")
    elif kind == "link":
        place.symlink_to(target)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=_ops)
def test_the_remembered_resolution_always_equals_the_full_check(tmp_path_factory, registry_on, ops):
    """Property: after each change of an earlier ``sys.path`` directory's entries for a
    pinned name (a module, a sourceless module, a package directory, its ``__init__.py``;
    each absent, a file or a link; each link's target completed or removed later), the
    per-call verdict (remembered) equals the full check.  The settle window (a change
    within one clock tick is read again, tested in test_per_call_import_check.py) is
    set to 0 here so that every key is remembered at once, each change made a clock tick
    after the last read: what is under test is that the key changes whenever the
    resolution could; the finders' directory caches are dropped
    (``importlib.invalidate_caches``, which keeps each finder) so that the full check is
    the import system's answer now."""
    from django_webfetch.plugins import registry

    top = f"wfshadow_{os.getpid()}_{next(_counter)}"
    root = tmp_path_factory.mktemp("links")
    site, cwd, later = (root / n for n in ("site", "cwd", "later"))
    for d in (site, cwd, later):
        d.mkdir()
    (site / top).mkdir()
    (site / top / "__init__.py").write_text("ANSWER = 'reviewed'\n")
    pinned = {top: [str(site)]}
    registry_on.setattr(registry, "_SETTLE_NS", 0)
    saved = list(sys.path)
    sys.path[:0] = [str(cwd), str(site)]
    try:
        for op in [("slot", "T", "absent"), *ops]:
            _apply(cwd, later, top, op)
            importlib.invalidate_caches()
            remembered = registry._shadow_verdict(pinned, remembered=True)
            fresh = registry._shadow_problem(pinned)
            assert remembered == fresh, (op, remembered, fresh)
            time.sleep(_TICK)  # the next change is stamped after what was read
    finally:
        sys.path[:] = saved
        sys.modules.pop(top, None)


class _Finds:
    """A ``sys.meta_path`` finder that finds ``top`` at ``where`` (or nothing)."""

    def __init__(self, top: str, where: str | None) -> None:
        self.top, self.where = top, where

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.top or self.where is None:
            return None
        return importlib.util.spec_from_file_location(name, self.where)


def test_a_finder_collected_cannot_lend_its_address_to_another(tmp_path, registry_on):
    """The remembered resolution is keyed by the finders themselves, held (``_Same``), not
    by their ``id()``: a finder that found nothing, removed and collected, cannot have its
    address taken by one that finds the name elsewhere while the verdict is remembered;
    over many tries (CPython reuses a freed address at once), the remembered verdict
    equals the full check each time."""
    from django_webfetch.plugins import registry

    top = f"wfshadow_{os.getpid()}_{next(_counter)}"
    site = tmp_path / "site"
    (site / top).mkdir(parents=True)
    (site / top / "__init__.py").write_text("ANSWER = 'reviewed'\n")
    stray = tmp_path / "stray.py"
    stray.write_text("ANSWER = 'stray'\n")
    pinned = {top: [str(site)]}
    registry_on.setattr(registry, "_SETTLE_NS", 0)
    registry_on.syspath_prepend(str(site))
    held = []
    # Every object this process made before the tries is left out of the collections below
    # (``gc.freeze``: a full collection of a worker's heap cost about half a CPU second,
    # twenty times): a finder is made, dropped and collected within one try, so whatever
    # could hold it in a cycle of garbage was made after the freeze and is collected.
    gc.collect()
    gc.freeze()
    try:
        for _ in range(20):
            quiet = _Finds(top, None)
            sys.meta_path.insert(0, quiet)
            assert registry._shadow_verdict(pinned, remembered=True) == ""
            sys.meta_path.remove(quiet)
            held.append(weakref.ref(quiet))
            del quiet
            gc.collect()
            loud = _Finds(top, str(stray))
            sys.meta_path.insert(0, loud)
            try:
                fresh = registry._shadow_problem(pinned)
                assert fresh and str(tmp_path) in fresh
                assert registry._shadow_verdict(pinned, remembered=True) == fresh
            finally:
                sys.meta_path.remove(loud)
        # The memo keeps the finders it was keyed by (so no address is reused).
        assert all(ref() is not None for ref in held)
    finally:
        gc.unfreeze()
        sys.modules.pop(top, None)


@pytest.mark.parametrize("kind", ["module", "package"])
def test_a_link_pointed_elsewhere_is_seen(tmp_path, registry_on, kind):
    """A link in an earlier ``sys.path`` directory that resolved to a file the finder
    passes over (a directory named ``T.py``, an ``__init__.py`` that is a directory) and is
    then pointed at a file (the link replaced, its directory unchanged in name) changes
    the remembered verdict: each loadable entry is read with ``lstat`` and ``stat``."""
    from django_webfetch.plugins import registry

    top = f"wfshadow_{os.getpid()}_{next(_counter)}"
    site, cwd, later = (tmp_path / n for n in ("site", "cwd", "later"))
    for d in (site, cwd, later):
        d.mkdir()
    (site / top).mkdir()
    (site / top / "__init__.py").write_text("ANSWER = 'reviewed'\n")
    (later / "adir").mkdir()
    pinned = {top: [str(site)]}
    registry_on.setattr(registry, "_SETTLE_NS", 0)
    registry_on.syspath_prepend(str(site))
    registry_on.syspath_prepend(str(cwd))
    link = cwd / f"{top}.py" if kind == "module" else cwd / top / "__init__.py"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(later / "adir")
    try:
        importlib.invalidate_caches()
        registry._shadow_problem(pinned)  # each directory's finder made (in the key)
        assert registry._shadow_verdict(pinned, remembered=True) == ""
        time.sleep(_TICK)
        # The directory the link points to becomes a file: only the target changed.
        (later / "adir").rmdir()
        (later / "adir").write_text("ANSWER = 'stray'\n")
        importlib.invalidate_caches()
        fresh = registry._shadow_problem(pinned)
        assert fresh and "adir" in fresh  # the link resolved
        assert registry._shadow_verdict(pinned, remembered=True) == fresh
    finally:
        sys.modules.pop(top, None)
