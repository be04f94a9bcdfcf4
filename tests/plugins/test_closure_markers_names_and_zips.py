"""Issue 30, attack 10, findings 1 to 3 (decision 0051): which requirement lines the
closure follows (a line is left out only when its marker, parsed by ``packaging``, holds
for no extra asked in any environment), the METADATA ``Name`` read as pip reads it (one
reader for the registry and the closure), and distributions in a ``sys.path`` entry that
is no directory (unpinnable).  Real files, the real ``importlib.metadata`` and
``packaging``."""

from __future__ import annotations

import zipfile
from importlib.metadata import PathDistribution

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.markers import Marker

from tests.plugins.packages import plugin_requiring, wheel

pytestmark = pytest.mark.django_db

_EXTRA_NAMES = ["a", "B_c", "never", ""]
#: Environment clauses, some holding here, some not, one quoting ``extra == "x"``.
_ENV = [
    'python_version >= "3"',
    'python_version < "3"',
    "os_name == 'nt'",
    'sys_platform != "win32"',
    "platform_release != 'extra == \"never\"'",
    "'extra == \"a\"' == platform_version",
    'extra != "a"',
    'extra === "a"',
]


@st.composite
def _markers(draw: st.DrawFn, depth: int = 0) -> str:
    if depth < 2 and draw(st.booleans()):
        parts = draw(st.lists(_markers(depth + 1), min_size=2, max_size=3))
        joined = f" {draw(st.sampled_from(['or', 'and']))} ".join(parts)
        return f"({joined})" if draw(st.booleans()) else joined
    if draw(st.integers(0, 2)):
        name = draw(st.sampled_from(_EXTRA_NAMES))
        quote = draw(st.sampled_from(["'", '"']))
        if draw(st.booleans()):
            return f"extra == {quote}{name}{quote}"
        return f"{quote}{name}{quote}=={' ' * draw(st.integers(0, 1))}extra"
    return draw(st.sampled_from(_ENV))


#: Environments packaging evaluates each marker in, besides this one.
_ENVIRONMENTS = [
    {},
    {"python_version": "2.7", "os_name": "nt", "sys_platform": "win32"},
    {"platform_release": "x", "platform_version": 'extra == "a"'},
]


def _evaluate(marker: Marker, environment: dict[str, str]) -> bool:
    """``packaging``'s value of ``marker`` in ``environment`` (one it cannot evaluate,
    ``extra === "a"``, pip cannot install by)."""
    try:
        return marker.evaluate(environment)
    except Exception:
        return False


class _Meta:
    """A distribution whose ``requires`` are given (what ``closure.requirements`` reads)."""

    def __init__(self, lines: list[str]) -> None:
        self.requires = lines


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(marker=_markers(), asked=st.sets(st.sampled_from(["a", "b-c", "other"]), max_size=2))
def test_a_line_is_left_out_only_when_no_environment_with_the_asked_extras_holds_it(marker, asked):
    """Finding 1: a requirement line is left out for ``asked`` only when ``packaging``
    evaluates its marker false in every environment tried with every asked extra (and with
    none, as pip evaluates it): generated markers (and, or, groups, both operand orders,
    ``extra == "x"`` inside a string literal, environment clauses)."""
    from django_webfetch.plugins import closure

    line = f"webfetch-low; {marker}"
    followed = "webfetch-low" in closure.requirements(_Meta([line]), asked)
    parsed = Marker(marker)
    holds = any(
        _evaluate(parsed, {**env, "extra": extra})
        for env in _ENVIRONMENTS
        for extra in [*sorted(asked), ""]
    )
    if holds:
        assert followed, (marker, asked)
    # Every extra followed: the plugin's own lines (which extras it has is not recorded).
    assert "webfetch-low" in closure.requirements(_Meta([line]), None)


@pytest.mark.parametrize(
    ("marker", "asked", "followed"),
    [
        ('extra == "a"', set(), False),
        ('extra == "A.a" or extra == "b"', {"a-a"}, True),
        ('(extra == "x") or "y" == extra', set(), False),
        ('extra == "x" and python_version >= "3"', set(), False),  # needs extra x
        ('extra == "x" and python_version >= "3" or os_name == "nt"', set(), True),
        ('extra == "never" or python_version >= "3"', set(), True),
        ('extra == ""', set(), True),  # holds with no extra asked
        ("not a marker", set(), True),  # unreadable: followed (fail closed)
    ],
)
def test_which_marked_lines_are_left_out(marker, asked, followed):
    """Finding 1, by example: only ``extra == "X"`` clauses joined by ``or``, none asked."""
    from django_webfetch.plugins import closure

    got = closure.requirements(_Meta([f"webfetch-low; {marker}"]), asked)
    assert ("webfetch-low" in got) is followed


def test_without_packaging_every_marked_line_is_followed(monkeypatch):
    """Finding 1: without ``packaging`` no marker is parsed, and no line is left out."""
    from django_webfetch.plugins import closure

    monkeypatch.setattr(closure, "_Marker", None)
    assert "webfetch-low" in closure.requirements(_Meta(['webfetch-low; extra == "x"']), ())


_HEADER_TEXT = st.text(
    alphabet=st.sampled_from(["a", ":", " ", "\t", "\n", "\r", "\x0c", "\x1c", "\x85", "\u2028"]),
    max_size=30,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=_HEADER_TEXT,
    value=st.sampled_from(["webfetch-low", " webfetch-low ", "decoy", ""]),
    after=_HEADER_TEXT,
    long=st.booleans(),
)
def test_the_metadata_name_is_read_as_importlib_metadata_reads_it(
    tmp_path_factory, before, value, after, long
):
    """Finding 2: ``closure.metadata_name`` (the registry's reader too) gives the ``Name``
    ``importlib.metadata`` (and so pip) gives, whatever the header text around it
    (continuation lines, form feeds and other characters ``str.splitlines`` breaks at,
    carriage returns, a first header longer than any cut)."""
    from django_webfetch.plugins import closure, registry

    meta = tmp_path_factory.mktemp("site") / "webfetch_low-1.0.dist-info"
    meta.mkdir()
    pad = "x" * (70 << 10) if long else ""
    text = f"Metadata-Version: 2.1\nSummary: {pad}{before}\nName: {value}{after}\nVersion: 1\n"
    (meta / "METADATA").write_bytes(text.encode())
    dist = PathDistribution(meta)
    expected = str(dist.metadata["Name"] or "")
    assert closure.metadata_name(dist) == expected
    assert registry._meta_name(dist) == expected


@pytest.mark.parametrize(
    "metadata",
    [
        b"Metadata-Version: 2.1\nName: \xff\xfe\nVersion: 1.0\n",  # not UTF-8: unreadable
        b"Metadata-Version: 2.1\nVersion: 1.0\n",  # no Name
        b"Metadata-Version: 2.1\nName: wfdep-other\nVersion: 1.0\n",  # another, named for none
    ],
    ids=["undecodable", "no-name", "other-name"],
)
def test_a_directory_named_for_the_requirement_with_another_name_cannot_be_pinned(
    tmp_path, metadata
):
    """Finding 2: a metadata directory whose normalized name begins with a requirement's
    (``wfdep_low_x-1.0.dist-info`` for ``wfdep-low``: pip's rule) but whose METADATA
    ``Name`` cannot be read, or names another distribution its directory is not named
    for, makes the requirement unpinnable (``plugin_dependency_name_mismatch``), never
    "not installed"."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    dist = plugin_requiring(site, ["wfdep-low"])
    info = site / "wfdep_low_x-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(metadata)
    (site / "wfdep_low.py").write_text("X = 1\n")
    (info / "RECORD").write_text("wfdep_low.py,,\n")
    deps = closure.dependencies(dist, str(site))
    assert closure.NAME_MISMATCH in closure.unpinnable(deps), deps


def test_another_distribution_whose_name_begins_with_the_requirements_is_not_it(tmp_path):
    """Finding 2: ``wfdep-low-extra``, named for its own ``Name``, is another distribution,
    not a copy of ``wfdep-low`` (which is pinned as not installed)."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    dist = plugin_requiring(site, ["wfdep-low"])
    wheel(site, "wfdep-low-extra", {}, {"wfdep_low_extra.py": ""})
    deps = closure.dependencies(dist, str(site))
    assert [(d.name, d.version, d.problem) for d in deps] == [("wfdep-low", "", "")]


def test_a_distribution_in_a_zip_on_sys_path_cannot_be_pinned(tmp_path, monkeypatch):
    """Finding 3: every ``sys.path`` entry ``importlib.metadata`` reads is searched; a
    distribution found in one that is no directory (a zip) cannot be pinned
    (``plugin_dependency_not_in_directory``), and one in a directory still can."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    dist = plugin_requiring(site, ["wfdep-zip"])
    archive = tmp_path / "deps.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("wfdep_zip.py", "X = 1\n")
        zf.writestr(
            "wfdep_zip-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: wfdep-zip\nVersion: 1.0\n",
        )
        zf.writestr("wfdep_zip-1.0.dist-info/RECORD", "wfdep_zip.py,,\n")
    monkeypatch.syspath_prepend(str(archive))
    deps = closure.dependencies(dist, str(site))
    assert [d.name for d in deps] == ["wfdep-zip"], deps
    assert closure.unpinnable(deps).endswith(f"({closure.ARCHIVE})"), deps
    monkeypatch.syspath_prepend(str(tmp_path / "missing.zip"))  # not there: nothing found
    assert closure.unpinnable(closure.dependencies(dist, str(site))).endswith(
        f"({closure.ARCHIVE})"
    )
