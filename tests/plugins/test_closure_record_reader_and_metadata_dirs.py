"""Issue 30, attack 11 (decision 0051): ``RECORD`` read with the ``csv`` module (one
reader for the registry and the dependency pin), metadata directories found as
``importlib.metadata`` finds them (any case, an egg directory's ``EGG-INFO``), code a
dependency installs outside its directory, and the remembered compiled-code verdict keyed
by every bytecode cache the import system reads.  Real files, the real
``importlib.metadata``, ``csv`` as pip writes ``RECORD``."""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import py_compile
import tempfile
import time
from importlib.metadata import PathDistribution, distributions
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db


class _Record:
    """A distribution whose only metadata is ``RECORD`` text (what ``_tops`` reads)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def read_text(self, name: str) -> str | None:
        return self.text if name == "RECORD" else None


def _pip_record(paths: list[str]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for path in paths:
        writer.writerow((path, "sha256=x", "1"))
    return out.getvalue()


_PART = st.text(alphabet='ab_,"; x.', min_size=1, max_size=8).filter(
    lambda s: s.strip(". ") == s and s not in {".", ".."}
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_PART, min_size=1, max_size=6))
def test_record_rows_are_read_as_importlib_reads_them(names):
    """Property: every path pip writes into ``RECORD`` (``csv.writer``: commas and quotes
    quoted) is read back by ``provenance.record_paths`` as ``importlib.metadata`` reads it,
    and a ``.pth`` among them, whatever its name holds, makes the dependency unpinnable."""
    from django_webfetch.plugins import closure, provenance

    paths = [f"pkg/{n}.py" for n in names] + [f"{names[0]}.pth"]
    text = _pip_record(paths)
    assert provenance.record_paths(text) == paths
    tops, why = closure._tops(_Record(text), "/nonexistent-site")
    assert tops == () and why.endswith(f"({closure.PATH_FILE})"), why
    tops, why = closure._tops(_Record(_pip_record(paths[:-1])), "/nonexistent-site")
    assert why == "" and tops == ("pkg",)


def test_the_registry_reads_record_with_the_same_reader(tmp_path):
    """``registry._file_list`` and ``closure._tops`` share ``provenance.record_paths``."""
    from django_webfetch.plugins import registry

    info = wheel(tmp_path, "wfdep-q", {}, {"wfdep_q/__init__.py": ""})
    (info / "RECORD").write_text(_pip_record(["wfdep_q/__init__.py", "a,b.pth"]))
    assert registry._file_list(PathDistribution(info)) == ["wfdep_q/__init__.py", "a,b.pth"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.booleans(), min_size=14, max_size=14), st.sampled_from(["dist", "egg"]))
def test_a_metadata_directory_is_found_in_any_case_importlib_finds(upper, kind):
    """Property: a metadata directory whose suffix is written in any mix of cases is found
    by the closure exactly when ``importlib.metadata`` finds it (it lower-cases the name)."""
    from django_webfetch.plugins import closure

    suffix = f".{kind}-info"
    cased = "".join(c.upper() if up else c for c, up in zip(suffix, upper, strict=False))
    with tempfile.TemporaryDirectory() as where:
        meta = Path(where) / f"wfdep_c-1.0{cased}"
        meta.mkdir()
        (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: wfdep-c\nVersion: 1.0\n")
        (meta / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: wfdep-c\nVersion: 1.0\n")
        found = list(distributions(name="wfdep-c", path=[where]))
        entries = closure._entries(where, closure.file_key(where))
        assert [e.label for e in entries] == ["wfdep-c"] * len(found) == ["wfdep-c"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.booleans(), min_size=14, max_size=14), st.sampled_from(["dist", "egg"]))
def test_the_registry_skips_a_metadata_directory_in_any_case(upper, kind):
    """Property: the names a distribution without a file list may have put in its directory
    (``registry._directory_names``) leave out every metadata directory, in any case
    (``importlib.metadata`` lower-cases the name; the import system imports no such
    directory), and keep every package, module and cached module."""
    from django_webfetch.plugins import registry

    cased = "".join(c.upper() if up else c for c, up in zip(f".{kind}-info", upper, strict=False))
    with tempfile.TemporaryDirectory() as where:
        base = Path(where)
        (base / f"wfother-1.0{cased}").mkdir()
        (base / "wfpkg").mkdir()
        (base / "wfmod.py").write_text("")
        (base / "__pycache__").mkdir()
        (base / "__pycache__" / "wfcached.cpython-311.pyc").write_bytes(b"")
        meta = base / "wfself-1.0.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: wfself\nVersion: 1.0\n")
        names = registry._directory_names(PathDistribution(meta))
        assert names == {"wfpkg", "wfmod", "wfcached"}, names


def test_an_egg_directory_dependency_cannot_be_pinned(tmp_path, monkeypatch):
    """A dependency found in an egg directory's ``EGG-INFO`` (no ``RECORD``) cannot be
    pinned (``plugin_dependency_egg_directory``), as ``importlib.metadata`` finds it."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    wheel(
        site,
        "webfetch-t",
        {"t": "webfetch_t:manifest"},
        {"webfetch_t/__init__.py": MANIFEST % "t"},
        {"METADATA": b"Metadata-Version: 2.1\nName: webfetch-t\nVersion: 1.0\n"
         b"Requires-Dist: wfdep-g\n"},
    )  # fmt: skip
    dist = next(iter(distributions(name="webfetch-t", path=[str(site)])))
    egg = tmp_path / "wfdep_g-1.0-py3.11.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: wfdep-g\n")
    monkeypatch.syspath_prepend(str(egg))
    deps = closure.dependencies(dist, str(site))
    assert closure.EGG in closure.unpinnable(deps), deps


@pytest.mark.parametrize(
    ("row", "code"),
    [
        ("../../../lib64/python3/site-packages/wfdep_x/__init__.py", True),
        (
            "../../../lib64/python3/site-packages/wfdep_x/_speed.cpython-311-x86_64-linux-gnu.so",
            True,
        ),
        ("../../../lib64/python3/site-packages/wfdep_x.PY", True),
        ("../../../lib64/python3/site-packages/__pycache__/wfdep_x.cpython-311.pyc", True),
        ("../../../bin/wfdep-x", False),
        ("../../../share/man/man1/wfdep-x.1", False),
    ],
)
def test_code_installed_outside_the_dependencys_directory_cannot_be_pinned(row, code):
    """A ``RECORD`` row of a module (any suffix the import system loads) outside the
    directory of the ``.dist-info``: unpinnable (``plugin_dependency_outside_directory``);
    a script or a data file there adds no top-level name (it is pinned by its bytes:
    tests/plugins/test_closure_what_a_dependency_installs.py)."""
    from django_webfetch.plugins import closure

    text = _pip_record(["wfdep_x/__init__.py", row])
    tops, why = closure._tops(_Record(text), "/p/lib/python3/site-packages")
    if code:
        assert tops == () and why.endswith(f"({closure.OUTSIDE})"), why
    else:
        assert (tops, why) == (("wfdep_x",), "")


def test_a_pyc_rewritten_in_place_in_a_modules_directory_cache_is_seen(tmp_path):
    """A top-level module's cached ``.pyc`` lives in its directory's ``__pycache__``
    (not among its own entries): rewritten in place (same inode, the directory unchanged)
    with an unchecked-hash ``.pyc`` of other code after the verdict was remembered, the
    remembered check sees it."""
    from django_webfetch.plugins import provenance

    site = tmp_path / "site"
    site.mkdir()
    source = site / "wfdep_r.py"
    source.write_text("print('reviewed')\n")
    cached = Path(importlib.util.cache_from_source(str(source)))
    py_compile.compile(str(source), cfile=str(cached), doraise=True)
    time.sleep(provenance.SETTLE_NS / 1e9 + 0.2)
    assert provenance.compiled_problem(str(site), "wfdep_r", pinned=True, remembered=True) == ""
    other = tmp_path / "other" / "o.py"
    other.parent.mkdir()
    other.write_text("print('other code')\n")
    made = py_compile.compile(
        str(other),
        cfile=str(tmp_path / "other" / "o.pyc"),
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    inode = cached.stat().st_ino
    with open(cached, "r+b") as fh:  # in place: the cache directory's entries unchanged
        fh.write(Path(made).read_bytes())
        fh.truncate()
    assert cached.stat().st_ino == inode
    assert os.path.isdir(cached.parent)
    assert provenance.compiled_problem(str(site), "wfdep_r", pinned=True, remembered=True)
