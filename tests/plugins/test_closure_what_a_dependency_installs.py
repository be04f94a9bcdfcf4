"""Issue 30, attack 12 findings 1 and 6 (the dependency closure; decision 0051, round 12
amendment), as classes: what a dependency installs never decides which distributions are
the site's own (a name installed more than once is not; a dependency writing into a
metadata directory not its own cannot be pinned), and every file a dependency's ``RECORD``
lists is either pinned by its bytes or makes it unpinnable.  Real files laid out as pip
installs them (tests/plugins/packages.py), the real ``importlib.metadata`` and closure."""

from __future__ import annotations

import csv
import io
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import plugin_requiring, wheel

pytestmark = pytest.mark.django_db


def _site_copy(name: str, spelled: str) -> tuple[str, str]:
    """A copy of site distribution ``name``'s metadata requiring ``wfdep-k``: its METADATA
    path (the directory named as ``spelled`` says) and text."""
    info = f"{spelled}-0.0.0.dist-info"
    text = f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.0\nRequires-Dist: wfdep-k\n"
    return f"{info}/METADATA", text


def _spellings(name: str) -> list[str]:
    """Directory names ``importlib.metadata`` finds for ``name`` (case and separators)."""
    return sorted({name.replace("-", "_"), name.replace("-", "_").upper(), name.replace("-", ".")})


_SITE = sorted({"django-webfetch", "django", "httpx", "asgiref", "sqlparse", "dnspython"})


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    copied=st.lists(st.tuples(st.sampled_from(_SITE), st.integers(0, 2)), min_size=1, max_size=3),
    by_dependency=st.booleans(),
)
def test_what_a_dependency_installs_never_makes_it_the_sites(
    tmp_path_factory, copied, by_dependency
):
    """Property: copies of site distributions' metadata (any of them, the directory named
    in any spelling ``importlib.metadata`` finds), each requiring ``wfdep-k``, put on
    ``sys.path`` by ``wfdep-k``'s own wheel or by another distribution's: no copied name
    and never ``wfdep-k`` is the site's (a name installed twice is none), the site's set
    only shrinks, and a plugin requiring ``wfdep-k`` shows it; it cannot be pinned when
    its own ``RECORD`` writes the copies (``plugin_dependency_foreign_metadata``), and
    otherwise is pinned: its next release changes the pin."""
    from django_webfetch.plugins import closure

    closure._site_memo.clear()
    before = closure.site_names()
    assert set(_SITE) <= before  # every name copied here is the site's, once
    site = tmp_path_factory.mktemp("site")
    dist = plugin_requiring(site, ["wfdep-k"])
    fakes = dict(
        _site_copy(name, _spellings(name)[n % len(_spellings(name))]) for name, n in copied
    )
    code = {"wfdep_k/__init__.py": "ANSWER = 'reviewed'\n"}
    if by_dependency:
        wheel(site, "wfdep-k", {}, {**code, **fakes})
    else:
        wheel(site, "wfdep-k", {}, code)
        wheel(site, "wfdep-other", {}, {"wfdep_other.py": "", **fakes})
    sys.path.insert(0, str(site))
    try:
        names = closure.site_names()
        deps = closure.dependencies(dist, str(site))
        (site / "wfdep_k" / "__init__.py").write_text("ANSWER = 'other code, longer'\n")
        again = closure.dependencies(dist, str(site))
    finally:
        sys.path.remove(str(site))
        closure._site_memo.clear()
    assert names <= before
    assert not {closure.normalized(n) for n, _ in copied} & names, names
    assert "wfdep-k" not in names
    shown = {closure.normalized(d.name): d for d in deps}
    assert "wfdep-k" in shown, deps
    if by_dependency:
        assert shown["wfdep-k"].problem.endswith(f"({closure.FOREIGN_METADATA})"), deps
    else:
        assert closure.unpinnable(deps) == "", deps
        assert closure.pinned_digest("c" * 64, deps) != closure.pinned_digest("c" * 64, again)


class _Dist:
    """A distribution whose metadata directory is ``meta`` and ``RECORD`` is ``rows``."""

    def __init__(self, meta: str, rows: list[str]) -> None:
        self._path = Path(meta)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for row in rows:
            writer.writerow((row, "sha256=x", "1"))
        self.text = out.getvalue()

    def read_text(self, name: str) -> str | None:
        return self.text if name == "RECORD" else None


_BASE = "/p/lib/python3/site-packages"
_META_SUFFIX = st.sampled_from([".dist-info", ".egg-info", ".DIST-INFO", ".Egg-Info"])
_WHERE = st.sampled_from(["", "../../../lib64/python3/site-packages/", "../../../"])


@settings(max_examples=200, deadline=None)
@given(
    stem=st.text(alphabet="abcxyz_-.0", min_size=1, max_size=12).filter(
        lambda s: s.strip(".") == s
    ),
    suffix=_META_SUFFIX,
    where=_WHERE,
    leaf=st.sampled_from(["METADATA", "RECORD", "entry_points.txt", "licenses/LICENSE"]),
)
def test_a_row_into_a_metadata_directory_not_its_own_cannot_be_pinned(stem, suffix, where, leaf):
    """Property: a ``RECORD`` row under any metadata directory (any name, any case of the
    suffix) at the top of the dependency's directory or anywhere outside it, other than
    its own, makes it unpinnable (``plugin_dependency_foreign_metadata``); a row in its own
    is pinned by its bytes unless the installer writes it."""
    from django_webfetch.plugins import closure

    own = f"{_BASE}/wfdep_x-1.0.dist-info"
    row = f"{where}{stem}{suffix}/{leaf}"
    dist = _Dist(own, ["wfdep_x/__init__.py", row])
    tops, files, why = closure._scan(dist, _BASE)
    if os.path.normpath(os.path.join(_BASE, row)).startswith(own + "/"):
        assert why == "" and tops == ("wfdep_x",)
        assert bool(files) == (leaf not in closure._INSTALLER_FILES)
    else:
        assert why.endswith(f"({closure.FOREIGN_METADATA})"), (row, why)
        assert (tops, files) == ((), ())


#: Files a dependency's wheel installs that no top-level module holds: outside its
#: directory (``.data/data`` and ``.data/scripts``), in its own metadata directory, and a
#: top-level file named for no module.
_OTHER_FILES = [
    "../../libwfk.so.1",
    "../../libwfk.so.1.2.3",
    "../../libwfk.dylib",
    "../../../bin/wfdep-n",
    "../../../share/wfdep/table.dat",
    "wfdep_n-1.0.dist-info/entry_points.txt",
    "wfdep_n-1.0.dist-info/top_level.txt",
    "wfdep_n-1.0.dist-info/licenses/LICENSE",
    "wfdep_n-1.0.dist-info/WHEEL",
    ".libwfk.so.1",
]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chosen=st.lists(st.sampled_from(_OTHER_FILES), min_size=1, max_size=4, unique=True),
    data=st.data(),
)
def test_every_file_a_dependency_installs_is_pinned_by_its_bytes(tmp_path_factory, chosen, data):
    """Property: whichever files of ``_OTHER_FILES`` a dependency installs, the pin holds
    while nothing changes and any byte of any of them changed (or the file removed)
    changes it; a shared library is code wherever it is."""
    from django_webfetch.plugins import closure, provenance

    prefix = tmp_path_factory.mktemp("prefix")
    purelib = prefix / "lib" / "python3" / "site-packages"
    dist = plugin_requiring(purelib, ["wfdep-n"])
    extra = {p: "" for p in chosen if not p.startswith("wfdep_n-1.0.dist-info/")}
    meta = {p.partition("/")[2]: b"" for p in chosen if p.startswith("wfdep_n-1.0.dist-info/")}
    wheel(purelib, "wfdep-n", {}, {"wfdep_n/__init__.py": "", **extra}, meta)
    sys.path.insert(0, str(purelib))
    try:
        deps = closure.dependencies(dist, str(purelib))
        assert [(d.name, d.problem) for d in deps] == [("wfdep-n", "")], deps
        pin = closure.pinned_digest("c" * 64, deps)
        assert closure.pinned_digest("c" * 64, closure.dependencies(dist, str(purelib))) == pin
        target = purelib / data.draw(st.sampled_from(chosen))
        if data.draw(st.booleans()):
            target.write_bytes(b"\x7fELF other code")
        else:
            target.unlink()
        with provenance.rehashed():
            after = closure.dependencies(dist, str(purelib))
    finally:
        sys.path.remove(str(purelib))
    assert closure.pinned_digest("c" * 64, after) != pin, (target, after)


@pytest.mark.skipif(not os.path.exists("/proc/self/pagemap"), reason="needs /proc")
def test_a_row_naming_a_file_that_reads_past_its_size_cannot_be_pinned(tmp_path):
    """A ``RECORD`` row naming ``/proc/self/pagemap`` (``stat`` says 0 bytes, it reads as
    8 bytes per page of the reader's address space) through ``..``: read no further than
    its size and one byte, and the dependency cannot be pinned."""
    from django_webfetch.plugins import closure

    purelib = tmp_path / "lib" / "python3" / "site-packages"
    dist = plugin_requiring(purelib, ["wfdep-n"])
    up = "../" * len(purelib.parts)
    info = wheel(purelib, "wfdep-n", {}, {"wfdep_n/__init__.py": ""})
    with open(info / "RECORD", "a") as fh:
        fh.write(f"{up}proc/self/pagemap,,\n")
    sys.path.insert(0, str(purelib))
    try:
        deps = closure.dependencies(dist, str(purelib))
    finally:
        sys.path.remove(str(purelib))
    assert "no regular file of a stable size" in closure.unpinnable(deps), deps
