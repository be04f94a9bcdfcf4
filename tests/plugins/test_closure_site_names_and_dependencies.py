"""Issue 30, attack 9 findings 1, 2, 5, 6, 8 (first half), 9 and 10: the classes behind
them, for ``plugins/closure.py`` (decision 0051).  Real distributions installed as pip
installs a wheel (tests/plugins/packages.py) and the real closure; the environment markers
are this process's (the tests run on Linux, CPython 3.10 or later).
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import distributions
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db

#: Markers with what they say here (Linux, CPython >= 3.10), and for no extra.
_MARKERS = {
    "": True,
    "sys_platform == 'linux'": True,
    "sys_platform == 'win32'": False,
    "python_version >= '3.8'": True,
    "python_version < '3.8'": False,
    "os_name == 'posix'": True,
    "platform_python_implementation == 'PyPy'": False,
    "extra == 'fast'": False,
    "sys_platform == 'win32' or os_name == 'posix'": True,
    "python_version >= '3.8' and sys_platform == 'darwin'": False,
    "(extra == 'fast' or extra == 'slow') and os_name == 'posix'": False,
}


def _metadata(name: str, requires: list[str], version: str = "1.0") -> dict[str, bytes]:
    lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    text = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{lines}"
    return {"METADATA": text.encode()}


def _dist(site: Path, name: str = "webfetch-t") -> object:
    return next(iter(distributions(name=name, path=[str(site)])))


def _plugin(site: Path, requires: list[str]) -> object:
    files = {"webfetch_t/__init__.py": MANIFEST % "t"}
    meta = _metadata("webfetch-t", requires)
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"}, files, meta)
    return _dist(site)


def _line(name: str, marker: str) -> str:
    return f"{name}; {marker}" if marker else name


@pytest.mark.skipif(sys.platform != "linux", reason="the markers' truth is Linux's")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    graph=st.lists(
        st.tuples(
            st.booleans(),  # installed
            st.lists(st.tuples(st.integers(0, 5), st.sampled_from(sorted(_MARKERS))), max_size=3),
        ),
        min_size=6,
        max_size=6,
    ),
    top=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(sorted(_MARKERS))), max_size=4),
)
def test_the_sites_names_are_the_installed_ones_its_markers_ask_for_here(
    tmp_path_factory, graph, top
):
    """Finding 1, as a class: ``closure.site_names`` holds a distribution exactly when a
    line of the site's closure whose marker holds here asks for it and it is installed;
    random graphs of requirements under the only copy of ``django-webfetch``, with markers
    true and false here, extras, and requirements never installed."""
    from django_webfetch.plugins import closure

    site = tmp_path_factory.mktemp("site")
    names = [f"wfsite-{i}" for i in range(6)]
    wheel(site, "django-webfetch", {}, {},
          _metadata("django-webfetch", [_line(names[i], m) for i, m in top]))  # fmt: skip
    for i, (installed, requires) in enumerate(graph):
        if installed:
            lines = [_line(names[j], m) for j, m in requires]
            wheel(site, names[i], {}, {f"wfsite_{i}.py": ""}, _metadata(names[i], lines))
    expected: set[str] = set()
    queue = [i for i, m in top if _MARKERS[m]]
    while queue:
        i = queue.pop()
        if names[i] in expected or not graph[i][0]:
            continue
        expected.add(names[i])
        queue.extend(j for j, m in graph[i][1] if _MARKERS[m])
    # The only copy of ``django-webfetch`` on the path (a name installed twice is not the
    # site's: tests/plugins/test_closure_what_a_dependency_installs.py).
    closure._packaging()
    saved = sys.path[:]
    sys.path[:] = [str(site)]
    try:
        found = closure.site_names()
    finally:
        sys.path[:] = saved
    assert {n for n in found if n.startswith("wfsite-")} == expected
    assert "django-webfetch" in found


def test_a_site_name_needs_its_marker_and_its_install():
    """Finding 1 on the real site: Django's ``tzdata`` (win32 only) and anyio's
    ``exceptiongroup`` (before 3.11) are not the site's unless installed and asked here."""
    from importlib.metadata import PackageNotFoundError, version

    from django_webfetch.plugins import closure

    names = closure.site_names()
    assert {"django", "httpx", "anyio"} <= names
    for name, asked in (("tzdata", sys.platform == "win32"),
                        ("exceptiongroup", sys.version_info < (3, 11))):  # fmt: skip
        try:
            version(name)
            installed = True
        except PackageNotFoundError:
            installed = False
        if not (asked and installed):
            assert name not in names, name


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extras=st.sets(st.sampled_from(["socks", "http2", "brotli", "zstd", "cli"]), max_size=3))
def test_an_extra_of_a_site_name_pins_what_it_brings(tmp_path_factory, extras):
    """Finding 2, as a class: a plugin requiring ``httpx[...]`` pins each distribution
    the asked extras' lines bring that is not the site's (installed or not), and never
    ``httpx`` itself; with no extra the closure is empty."""
    from importlib.metadata import distribution

    from django_webfetch.plugins import closure

    site = tmp_path_factory.mktemp("site")
    asked = f"httpx[{','.join(sorted(extras))}]" if extras else "httpx"
    dist = _plugin(site, [asked])
    pinned = {closure.normalized(d.name) for d in closure.dependencies(dist, str(site))}
    site_set = closure.site_names()
    brought = set(closure.requirements(distribution("httpx"), extras)) - site_set
    assert "httpx" not in pinned
    assert brought <= pinned, (brought, pinned)
    if not extras:
        assert pinned == set()


@pytest.mark.parametrize(
    ("info", "name", "required", "pinned"),
    [
        # pip accepts a wheel's metadata directory whose name begins with the
        # distribution's: it is found by its METADATA Name and pinned.
        ("wfdep_x_build-1.0.dist-info", "wfdep-x", "wfdep-x", True),
        # A directory named for one distribution whose METADATA names another.
        ("wfdep_y-1.0.dist-info", "wfdep-other", "wfdep-y", False),
        # Found by Name, in a directory named for no name its Name begins.
        ("wfdep_zz-1.0.dist-info", "wfdep-z", "wfdep-z", False),
    ],
)
def test_a_dependency_is_found_by_its_metadata_name(tmp_path, info, name, required, pinned):
    """Finding 5: a requirement is looked up by the METADATA ``Name`` pip goes by (and by
    the name of the metadata directory the import system finds); where the two disagree
    it cannot be pinned (``plugin_dependency_name_mismatch``)."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    dist = _plugin(site, [required])
    (site / info).mkdir()
    (site / info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (site / "wfdep_mod.py").write_text("X = 1\n")
    (site / info / "RECORD").write_text(f"wfdep_mod.py,,\n{info}/METADATA,,\n{info}/RECORD,,\n")
    deps = closure.dependencies(dist, str(site))
    assert len(deps) == 1 and deps[0].version == "1.0", deps
    if pinned:
        assert not deps[0].problem and deps[0].digest, deps
    else:
        assert closure.NAME_MISMATCH in deps[0].problem, deps
        assert closure.NAME_MISMATCH in closure.unpinnable(deps)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(missing=st.integers(0, 12), installed=st.integers(0, 4))
def test_every_name_looked_up_counts_towards_the_bound(tmp_path_factory, missing, installed):
    """Finding 6: ``MAX_DISTRIBUTIONS`` counts every name looked up, installed or not: a
    closure never has more than ``MAX_DISTRIBUTIONS + 1`` entries, and one past the bound
    cannot be pinned (``plugin_dependency_closure_too_large``)."""
    from django_webfetch.plugins import closure

    site = tmp_path_factory.mktemp("site")
    names = [f"wfmiss-{i}" for i in range(missing)] + [f"wfhave-{i}" for i in range(installed)]
    for i in range(installed):
        wheel(site, f"wfhave-{i}", {}, {f"wfhave_{i}.py": ""})
    dist = _plugin(site, names)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(closure, "MAX_DISTRIBUTIONS", 8)
        deps = closure.dependencies(dist, str(site))
    assert len(deps) <= 9
    if len(names) > 8:
        assert closure.TOO_MANY in closure.unpinnable(deps), deps
    else:
        assert len(deps) == len(names) and not closure.unpinnable(deps), deps


def test_more_requirement_lines_than_are_read_cannot_be_pinned(tmp_path):
    """Finding 6: a METADATA of more than ``MAX_REQUIREMENTS`` lines is not read."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    lines = [f"wfmiss-{i % 5}" for i in range(closure.MAX_REQUIREMENTS + 1)]
    wheel(site, "wfdep-many", {}, {"wfdep_many.py": ""}, _metadata("wfdep-many", lines))
    dist = _plugin(site, ["wfdep-many"])
    deps = closure.dependencies(dist, str(site))
    assert closure.TOO_MANY in closure.unpinnable(deps), deps
    other = tmp_path / "other"
    plugin = _plugin(other, lines)
    assert closure.TOO_MANY in closure.unpinnable(closure.dependencies(plugin, str(other)))


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("wfdep-h", "1.0\x1b[1A\x1b[2K"),
        ("wfdep-h", "not a version"),
        ("wfdep-h", ""),
        ("wfdep-\u202eh", "1.0"),
        ("wfdep-h ", "1.0;x"),
    ],
)
def test_a_dependency_with_an_invalid_name_or_version_cannot_be_pinned(tmp_path, name, version):
    """Finding 8 (first half): a METADATA ``Name`` that is not a PEP 508 name or a
    ``Version`` that is not a PEP 440 version cannot be pinned
    (``plugin_dependency_metadata_invalid``), and neither is what the entry says."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    dist = _plugin(site, ["wfdep-h"])
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    wheel(site, "wfdep-h", {}, {"wfdep_h.py": ""}, {"METADATA": meta})
    deps = closure.dependencies(dist, str(site))
    assert len(deps) == 1, deps
    if name.strip() == "wfdep-h" or closure.normalized(name) == "wfdep-h":
        assert closure.BAD_METADATA in deps[0].problem, deps
    else:  # a Name that is not the requirement's: the directory's name disagrees with it
        assert deps[0].problem, deps
    assert (deps[0].name, deps[0].version) == ("wfdep-h", "?"), deps


_VERSION_CHARS = "0123456789.!+-_abcdeilnoprstv"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=_VERSION_CHARS, max_size=14))
def test_the_version_check_is_pep_440s(text):
    """The PEP 440 check (``closure.invalid``) agrees with ``packaging`` on every string
    of version characters (no white space: a version shown is never padded)."""
    from packaging.version import InvalidVersion, Version

    from django_webfetch.plugins import closure

    try:
        Version(text)
        valid = True
    except InvalidVersion:
        valid = False
    assert (closure.invalid("x", text) == "") == valid, text


@pytest.mark.parametrize(
    "rows",
    [
        ["wfdep_p.pth"],
        ["wfdep_p/__init__.py", "wfdep_p-nspkg.pth"],
        ["wfdep_p/__init__.py", "../../elsewhere/wfdep_p.PTH"],
    ],
)
def test_a_dependency_installing_a_path_file_cannot_be_pinned(tmp_path, rows):
    """Finding 9: a dependency whose RECORD installs a path configuration file (site.py
    puts the directories it names on ``sys.path`` and runs its ``import`` lines) cannot be
    pinned (``plugin_dependency_path_file``), wherever the file is."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    dist = _plugin(site, ["wfdep-p"])
    info = wheel(site, "wfdep-p", {}, {"wfdep_p/__init__.py": ""})
    with (info / "RECORD").open("a") as record:
        record.write("".join(f"{row},,\n" for row in rows))
    deps = closure.dependencies(dist, str(site))
    assert closure.PATH_FILE in closure.unpinnable(deps), deps


def test_an_unpinnable_closure_gives_a_digest_registered_with_why(tmp_path):
    """Finding 10: ``closure.pinned_digest`` of a closure that cannot be pinned is a new
    digest at each call, registered with a stable why (``provenance.unpinned_why``), so
    a registry load compares why; and one that can is stable and registers nothing."""
    from django_webfetch.plugins import closure, provenance

    bad = [closure.Dependency("wfdep-e", "1.0", "", "/x", "installed in editable mode")]
    one, two = closure.pinned_digest("c" * 64, bad), closure.pinned_digest("c" * 64, bad)
    assert one != two
    assert provenance.unpinned_why(one) == provenance.unpinned_why(two) != ""
    good = [closure.Dependency("wfdep-e", "1.0", "d" * 64, "/x")]
    assert closure.pinned_digest("c" * 64, good) == closure.pinned_digest("c" * 64, good)
    assert provenance.unpinned_why(closure.pinned_digest("c" * 64, good)) == ""
    # The plugin's own code that cannot be told, with pinnable dependencies: the same.
    code = provenance._unpinned("unlistable")
    three = closure.pinned_digest(code, good)
    assert "unlistable" in provenance.unpinned_why(three)


def test_without_packaging_a_marked_site_line_is_not_the_sites(monkeypatch):
    """Where ``packaging`` is not installed no marker is evaluated: a site line with any
    marker is not the site's (fail closed: a plugin requiring it pins it), and the site's
    set is a subset of the one evaluated markers give."""
    from django_webfetch.plugins import closure

    closure._site_memo.clear()
    evaluated = closure.site_names()
    monkeypatch.setattr(closure, "_Requirement", None)
    closure._site_memo.clear()
    try:
        plain = closure.site_names()
        assert closure._site_requirement("wfx; sys_platform == 'linux'") == ""
        assert closure._site_requirement("wfx >= 1.0") == "wfx"
    finally:
        closure._site_memo.clear()
    assert plain <= evaluated
    assert {"django-webfetch", "django", "httpx"} <= plain


def test_an_unpinned_digest_is_told_by_its_form_after_the_memo_forgot_it():
    """The memo of why holds 4096 digests: one it forgot (4096 others since) is still an
    unpinned digest by its form, so a trust recorded with it never holds."""
    from django_webfetch.plugins import provenance

    digest = provenance._unpinned("unlistable")
    assert provenance.unpinned_why(digest) == "unlistable"
    for n in range(provenance._unpinned_why.size):
        provenance._unpinned(f"other {n}")
    assert digest not in provenance._unpinned_why
    assert provenance.unpinned_why(digest) == "its code could not be told"
    assert len(digest) == 64 and int(digest, 16) >= 0
    real = provenance.code_digest(os.path.dirname(provenance.__file__), "provenance")
    assert provenance.unpinned_why(real) == ""
