"""Every walk over a plugin's files keeps its own stack and is bounded in depth and entries
(issue 30, attack 8, finding 1): a package tree of any shape, depth, fan-out or links,
never makes ``registry.load`` raise, and never takes another plugin away.  Real files
installed as pip installs a wheel (tests/plugins/packages.py), the real registry, the
real checks and the real plugin process."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_webfetch.plugins.provenance import WALK_DEPTH
from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db

#: Deeper than the interpreter's recursion limit: what a recursive walk cannot take.
DEEP = sys.getrecursionlimit() + 100


def _chain(base: str, depth: int, name: str = "a") -> str:
    """``depth`` directories nested in ``base``, made one level at a time (``os.makedirs``
    recurses per level); the deepest one."""
    where = base
    for _ in range(depth):
        where = os.path.join(where, name)
        os.mkdir(where)
    return where


def _remove(top: str) -> None:
    """``top`` and everything in it, links never followed, with a stack (``shutil.rmtree``
    recurses per level)."""
    if os.path.islink(top) or not os.path.isdir(top):
        if os.path.lexists(top):
            os.unlink(top)
        return
    todo, emptied = [top], []
    while todo:
        directory = todo.pop()
        emptied.append(directory)
        with os.scandir(directory) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                else:
                    os.unlink(entry.path)
    for directory in reversed(emptied):
        os.rmdir(directory)


def _codes(problems: list[str]) -> list[str]:
    """The reason code each registry problem names (``(<code>)``), or the problem itself."""
    return [m.group(1) if (m := re.search(r"\(([a-z0-9_]+)\)", p)) else p for p in problems]


def _site_with_d(site: Path) -> str:
    """Plugin ``t`` and plugin ``d`` (package ``webfetch_d``) installed in ``site``: the
    directory of ``webfetch_d``."""
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"})  # fmt: skip
    wheel(site, "webfetch-d", {"d": "webfetch_d:manifest"},
          {"webfetch_d/__init__.py": MANIFEST % "d"})  # fmt: skip
    return str(site / "webfetch_d")


def test_every_walk_over_a_deep_package_gives_a_verdict(tmp_path):
    """A chain of directories deeper than the recursion limit: the digest walk
    (``provenance._files``, ``code_digest``, ``compiled_problem``), the path check
    (``registry._path_problem``) and the stamp (``host.stamp``) each return a bounded
    verdict, never ``RecursionError``; the digest is one no pin holds for, the path check
    refuses the package, and so does the stamp, with the same stable reason: no plugin
    process is ever started for it (decision 0055)."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.runtime import host

    package = _site_with_d(tmp_path)
    try:
        Path(_chain(package, DEEP), "x.py").write_text("")
        origin = host.Origin("webfetch_d:manifest", str(tmp_path), "webfetch_d")
        files = provenance._files(str(tmp_path), "webfetch_d")
        assert isinstance(files, str) and "nested deeper than" in files, files
        assert provenance.code_digest(str(tmp_path), "webfetch_d") != provenance.code_digest(
            str(tmp_path), "webfetch_d"
        )
        assert "nested deeper than" in provenance.compiled_problem(str(tmp_path), "webfetch_d")
        assert "nested deeper than" in registry._path_problem(origin)
        with pytest.raises(host.RuntimeFailure) as refused:
            host.stamp(origin)
        assert refused.value.code == host.PATH_UNSAFE
        assert "nested deeper than" in refused.value.detail
    finally:
        _remove(package)


def test_a_refused_deep_package_does_not_make_every_trust_look_up_load_again(tmp_path, registry_on):
    """The deep package's digest is a new one at each look (no pin holds for it), yet the
    registry compares why, not the digest: ``provider`` of an unrelated trusted plugin
    does not load the registry again (which ends every idle plugin process) while the deep
    package stays as it is."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    package = _site_with_d(tmp_path)
    try:
        Path(_chain(package, DEEP), "x.py").write_text("")
        registry_on.syspath_prepend(str(tmp_path))
        registry.reset()
        instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
        assert "d" not in registry.load() and registry.origin("t") is not None
        before = registry.generation()
        assert instance.trust_holds() and registry.provider("t") is not None
        assert registry.generation() == before
    finally:
        _remove(package)


@pytest.mark.parametrize("depth", [0, 1])
def test_the_depth_bound_is_exact(tmp_path, depth):
    """Directories nested ``WALK_DEPTH`` deep below the package are walked and pinned (the
    digest is the same twice, the path check passes); one level more is refused."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.runtime import host

    package = _site_with_d(tmp_path)
    Path(_chain(package, provenance.WALK_DEPTH + depth), "x.py").write_text("x = 1\n")
    origin = host.Origin("webfetch_d:manifest", str(tmp_path), "webfetch_d")
    first = provenance.code_digest(str(tmp_path), "webfetch_d")
    pinned = first == provenance.code_digest(str(tmp_path), "webfetch_d")
    problem = registry._path_problem(origin)
    if depth == 0:
        assert pinned and problem == "" and host.stamp(origin) == host.stamp(origin)
    else:
        assert not pinned and "nested deeper than" in problem
        with pytest.raises(host.RuntimeFailure, match="nested deeper than"):
            host.stamp(origin)


def test_a_chain_of_links_longer_than_the_recursion_limit_is_refused(tmp_path):
    """Links in a plugin's package that lead through ``DEEP`` further links (more than the
    kernel follows, and more than ``os.path.realpath`` of Python 3.11 can recurse through),
    and one whose target runs ``x/..`` thousands of times: the path check refuses the
    package, the digest walk says it cannot list it (no pin holds), nothing raises."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.runtime import host

    package = _site_with_d(tmp_path)
    links = tmp_path / "links"
    links.mkdir()
    os.mkdir(links / "end")
    for index in range(DEEP):
        target = "end" if index == DEEP - 1 else f"l{index + 1}"
        os.symlink(target, links / f"l{index}")
    os.symlink(str(links / "l0"), os.path.join(package, "far"))
    os.mkdir(os.path.join(package, "x"))
    winding = os.path.join(package, "winding")
    os.symlink("/".join(["x", ".."] * 800 + ["x"]), winding)
    origin = host.Origin("webfetch_d:manifest", str(tmp_path), "webfetch_d")
    assert "too many levels of symbolic links" in registry._path_problem(origin)
    assert registry._PathCheck().chain(winding) == ""  # 1,601 components, no recursion
    # A link the kernel cannot follow: the files cannot be told, so no pin holds.
    assert "cannot be listed" in str(provenance._files(str(tmp_path), "webfetch_d"))
    assert registry._real_path(os.path.join(package, "far")) == os.path.join(package, "far")


def test_the_launcher_makes_a_deep_mount_point_without_recursion(tmp_path):
    """``launch`` makes the mount point of a bind source (a plugin package reached through
    a link may lie thousands of directories deep) one level at a time: ``os.makedirs``
    recursed once per missing level."""
    from django_webfetch.plugins.runtime import launch

    deep = os.path.join(str(tmp_path), *(["a"] * DEEP))
    launch._makedirs(deep)
    launch._makedirs(deep)  # already there: nothing to do
    assert os.path.isdir(deep)
    _remove(os.path.join(str(tmp_path), "a"))


def _outside() -> str:
    """A directory outside every package, with a few files (a link's target)."""
    where = tempfile.mkdtemp(prefix="webfetch-walks-")
    for name in ("o1.py", "o2.txt"):
        Path(where, name).write_text("x = 1\n")
    os.chmod(where, 0o755)
    return where


#: One random tree: a chain ``depth`` deep (thousands of levels at most), ``fan`` entries
#: per directory on its first ``wide`` levels, and links placed at random levels.
_LINK_KINDS = ("ancestor", "self", "dangling", "outside", "chain", "sibling", "winding")
#: Depths and lengths where a walk changes behaviour: none, the bound and either side of
#: it, the kernel's 40 links, the recursion limit and past it; and any in between.
_EDGES = [0, 1, WALK_DEPTH - 1, WALK_DEPTH, WALK_DEPTH + 1, 39, 40, 41, DEEP - 200, DEEP]
_counts = st.one_of(st.sampled_from(_EDGES), st.integers(0, DEEP + 200))
_trees = st.fixed_dictionaries(
    {
        "depth": _counts,
        "fan": st.integers(0, 12),
        "wide": st.integers(0, 3),
        "files": st.integers(0, 3),
        "links": st.lists(st.tuples(st.sampled_from(_LINK_KINDS), _counts), max_size=6),
        "mode": st.sampled_from([0o755, 0o775, 0o700]),
    }
)


def _grow(package: str, outside: str, tree: dict) -> None:
    """``tree`` (one example of ``_trees``) made under ``package``."""
    levels = [package]
    where = package
    for level in range(tree["depth"]):
        if level < tree["wide"]:
            for index in range(tree["fan"]):
                side = os.path.join(where, f"s{index}")
                os.mkdir(side)
                for number in range(tree["files"]):
                    Path(side, f"m{number}.py").write_text("x = 1\n")
        where = os.path.join(where, "a")
        os.mkdir(where)
        levels.append(where)
    Path(where, "x.py").write_text("x = 1\n")
    for number, (kind, at) in enumerate(tree["links"]):
        base = levels[at % len(levels)]
        link = os.path.join(base, f"link{number}")
        if kind == "ancestor":
            os.symlink(levels[(at // 2) % len(levels)], link)
        elif kind == "self":
            os.symlink(link, link)
        elif kind == "dangling":
            os.symlink(os.path.join(base, "nothing-here"), link)
        elif kind == "outside":
            os.symlink(outside, link)
        elif kind == "sibling":
            os.symlink(levels[-1], link)
        elif kind == "winding":
            os.symlink("/".join(["a", ".."] * (1 + at % 800)) if base != levels[-1] else ".", link)
        else:  # a chain of links, each to the next, ending at the package
            previous = package
            for step in range(at):
                name = os.path.join(outside, f"c{number}-{step}")
                os.symlink(previous, name)
                previous = name
            os.symlink(previous, link)
    os.chmod(levels[min(len(levels) - 1, tree["wide"])], tree["mode"])


@settings(
    max_examples=int(os.environ.get("WEBFETCH_WALK_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tree=_trees)
def test_no_package_tree_makes_load_raise_or_takes_another_plugin_away(tmp_path, registry_on, tree):
    """Property: whatever tree plugin ``d``'s package holds (depth from none to far past
    the recursion limit, fan-out, files, group-writable directories, links to an
    ancestor, to themselves, to nothing, outside the package, through a chain of links
    longer than the recursion limit, or winding through ``..``), ``registry.load`` never
    raises; plugin ``t`` installed beside it still loads and its trust still holds; ``d``
    is loaded or refused with a stable reason code; every walk over ``d`` is bounded."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    package = site / "webfetch_d"
    if not (site / "webfetch_t").exists():
        _site_with_d(site)
        registry_on.syspath_prepend(str(site))
    instance, _ = PluginInstance.objects.get_or_create(plugin="t", alias="t", trusted=True)
    tree_dir = os.path.join(package, "tree")
    outside = _outside()
    try:
        os.mkdir(tree_dir)
        _grow(tree_dir, outside, tree)
        registry.reset()
        # Hypothesis raises the recursion limit while an example runs; a site runs with
        # the interpreter's own (``DEEP`` was measured against it).
        raised = sys.getrecursionlimit()
        sys.setrecursionlimit(DEEP - 100)
        try:
            loaded = registry.load()
            problems = registry.problems()
            assert "t" in loaded and registry.origin("t") is not None, problems
            assert instance.trust_holds(), problems
        finally:
            sys.setrecursionlimit(raised)
        codes = _codes([p for p in problems if "'d'" in p])
        assert "d" in loaded or codes, problems
        assert all(re.fullmatch(r"[a-z0-9_]+", code) for code in codes), problems
        deep = tree["depth"] >= provenance.WALK_DEPTH
        if deep:
            assert "d" not in loaded and "plugin_path_unsafe" in codes, problems
    finally:
        _remove(tree_dir)
        _remove(outside)
        registry.reset()
