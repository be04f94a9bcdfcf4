"""Issue 30, attack 11 (outside review of decisions 0050/0051 after the tenth round).

Each test fails while its finding stands.  Real files, the real ``importlib.metadata``,
``site.py`` and ``csv`` as pip writes ``RECORD``."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from importlib.metadata import distributions
from pathlib import Path

import pytest

from tests.plugins.packages import plugin_requiring, wheel

pytestmark = pytest.mark.django_db


def _pip_row(*fields: str) -> str:
    """One RECORD row as pip writes it (``csv.writer``: a field holding a comma is quoted)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(fields)
    return out.getvalue()


def test_a_pth_file_whose_name_holds_a_comma_is_pinned(tmp_path):
    """Finding 1: ``closure._tops`` reads a RECORD row as ``line.split(",")[0]``, not as
    CSV, so a path configuration file named ``wfdep_p,x.pth`` (pip writes its row quoted:
    ``"wfdep_p,x.pth",sha256=...``) is read as ``wfdep_p`` and the dependency is pinned,
    although site.py runs that file (its ``import`` lines, the directories it adds) as any
    other ``.pth`` (decision 0051: such a dependency cannot be pinned, ``PATH_FILE``)."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    dist = plugin_requiring(site, ["wfdep-p"])
    body = f"import pathlib; pathlib.Path({str(tmp_path / 'ran')!r}).write_text('x')\n"
    info = wheel(site, "wfdep-p", {}, {"wfdep_p/__init__.py": "", "wfdep_p,x.pth": body})
    # pip's RECORD for that wheel: the same rows, written by csv.writer.
    rows = [line.rsplit(",", 2) for line in (info / "RECORD").read_text().splitlines() if line]
    (info / "RECORD").write_text("".join(_pip_row(*r) for r in rows))
    assert '"wfdep_p,x.pth"' in (info / "RECORD").read_text()
    # site.py runs it, as it runs every .pth of a site directory.
    subprocess.run(
        [sys.executable, "-S", "-c", f"import site; site.addsitedir({str(site)!r})"],
        check=True,
        timeout=60,
    )
    assert (tmp_path / "ran").read_text() == "x"
    deps = closure.dependencies(dist, str(site))
    assert closure.PATH_FILE in closure.unpinnable(deps), deps


def _unchecked_pyc(source: Path, other: str, tmp: Path) -> Path:
    """An unchecked-hash ``.pyc`` (PEP 552: never compared with its source) of ``other``,
    written where the import system looks for ``source``'s cache."""
    import importlib.util
    import py_compile

    cached = Path(importlib.util.cache_from_source(str(source)))
    written = tmp / "other.py"
    written.write_text(other)
    py_compile.compile(
        str(written),
        cfile=str(cached),
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    return cached


def _runs(where: Path, module: str) -> str:
    """What ``import module`` from directory ``where`` runs, in a new interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(where)!r}); import {module}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout


@pytest.mark.parametrize("shape", ["module", "package_with_empty_cache"])
def test_a_pyc_written_into_an_existing_cache_after_the_first_call_is_remembered_clean(
    tmp_path, shape
):
    """Finding 2: the per-call compiled-code check (``provenance.compiled_problem``,
    ``remembered=True``, from ``registry.code_problem`` at every trusted call) remembers a
    package's verdict by the identity of the directories holding its files and of its
    cached ``.pyc`` files.  The bytecode cache a ``.pyc`` of other code is written into is
    in neither when it holds no ``.pyc`` of the package yet: the directory's own
    ``__pycache__`` for a top-level module (``wfdep_m.py``: ``_own_entries`` leaves it
    out), or the package's ``__pycache__`` while it is empty.  A ``.pyc`` written there
    after one call changes no remembered key, so every later call answers "clean" while a
    first-use import loads the other code (attack 9, finding 7, which the memo reopens)."""
    import time

    from django_webfetch.plugins import provenance

    where = tmp_path / "site"
    where.mkdir()
    if shape == "module":
        source = where / "wfdep_m.py"
        top = "wfdep_m"
        (where / "__pycache__").mkdir()  # the site's cache, holding other modules' pycs
        (where / "__pycache__" / "other.cpython-311.pyc").write_bytes(b"")
    else:
        (where / "wfdep_m").mkdir()
        source = where / "wfdep_m" / "__init__.py"
        top = "wfdep_m"
        (where / "wfdep_m" / "__pycache__").mkdir()  # emptied (pyclean), or made by a tool
    source.write_text("print('reviewed')\n")
    time.sleep(provenance.SETTLE_NS / 1e9 + 0.2)  # settled: the verdict is remembered
    assert provenance.compiled_problem(str(where), top, pinned=True, remembered=True) == ""
    _unchecked_pyc(source, "print('other code')\n", tmp_path)
    assert _runs(where, top).strip() == "other code"  # what a first-use import runs now
    # The check made afresh sees it ...
    assert provenance.compiled_problem(str(where), top, pinned=True) != ""
    # ... the remembered one, made at every trusted call, must too.
    assert provenance.compiled_problem(str(where), top, pinned=True, remembered=True) != ""


def test_a_dependencys_files_installed_into_platlib_beside_purelib_are_not_pinned(tmp_path):
    """Finding 3: ``closure._tops`` keeps only the RECORD rows under the directory of the
    dependency's ``.dist-info`` ("a script or a data file outside its directory: not
    imported").  Where ``platlib`` is not ``purelib`` (the RHEL/Fedora/SUSE layout:
    ``lib64/pythonX.Y/site-packages`` beside ``lib/...``, both on ``sys.path``), pip
    installs a wheel's ``.data/platlib`` package into the other directory and writes its
    RECORD row as ``../../lib64/pythonX.Y/site-packages/...``: a package the dependency
    installs and imports, in the site's process, that its pin never covers (changing it
    keeps trust).  Decision 0051: the digest covers every top-level package its RECORD
    installs."""
    from django_webfetch.plugins import closure

    prefix = tmp_path / "prefix"
    purelib = prefix / "lib" / "python3" / "site-packages"
    platlib = prefix / "lib64" / "python3" / "site-packages"
    platlib.mkdir(parents=True)
    dist = plugin_requiring(purelib, ["wfdep-s"])
    hidden = "../../../lib64/python3/site-packages/wfdep_hidden/__init__.py"
    wheel(
        purelib,
        "wfdep-s",
        {},
        {"wfdep_s/__init__.py": "import wfdep_hidden\n", hidden: "print('reviewed')\n"},
    )
    assert (platlib / "wfdep_hidden" / "__init__.py").is_file()
    # Both directories on the path (as the interpreter's site-packages are): it runs.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path[:0] = [{str(purelib)!r}, {str(platlib)!r}]; import wfdep_s",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "reviewed", done.stderr
    before = closure.pinned_digest("c" * 64, closure.dependencies(dist, str(purelib)))
    (platlib / "wfdep_hidden" / "__init__.py").write_text("print('other code!')\n")
    after = closure.pinned_digest("c" * 64, closure.dependencies(dist, str(purelib)))
    assert before != after, "the dependency's platlib package changed and its pin still holds"


def test_a_dependency_whose_metadata_directory_suffix_is_upper_case_is_pinned_not_installed(
    tmp_path,
):
    """Finding 4: ``closure._entries`` lists metadata directories by a case-sensitive
    ``name.endswith((".dist-info", ".egg-info"))``; ``importlib.metadata`` (and so pip and
    the import of the dependency's code) lowers the name first (``Lookup``:
    ``child.lower().endswith(...)``).  A dependency whose directory is
    ``wfdep_u-1.0.DIST-INFO`` (planted by any wheel's ``.data/purelib``, which pip copies
    as it is) is installed for ``importlib.metadata`` and pip but "not installed" for the
    closure: its code is imported in the site's process with the plugin and never pinned
    (its files change, trust holds)."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    dist = plugin_requiring(site, ["wfdep-u"])
    info = wheel(site, "wfdep-u", {}, {"wfdep_u/__init__.py": "print('reviewed')\n"})
    info.rename(info.with_name(info.name.replace(".dist-info", ".DIST-INFO")))
    found = list(distributions(name="wfdep-u", path=[str(site)]))
    assert [d.version for d in found] == ["1.0"]  # installed, as pip and importlib see it
    deps = closure.dependencies(dist, str(site))
    before = closure.pinned_digest("c" * 64, deps)
    (site / "wfdep_u" / "__init__.py").write_text("print('other code!')\n")
    after = closure.pinned_digest("c" * 64, closure.dependencies(dist, str(site)))
    assert [(d.name, d.version) for d in deps] == [("wfdep-u", "1.0")], deps
    assert before != after


def test_a_dependency_installed_as_an_egg_directory_is_pinned_not_installed(tmp_path, monkeypatch):
    """Finding 4b (the same class): a ``sys.path`` entry that is an egg directory
    (``wfdep_e-1.0.egg``, put there by an ``easy-install.pth`` or ``PYTHONPATH``) holds its
    metadata as ``EGG-INFO``, which ``importlib.metadata`` finds (``Lookup``:
    ``base_is_egg and low == "egg-info"``) and ``closure._entries`` does not (it looks for
    ``*.dist-info``/``*.egg-info`` only).  The dependency is imported from there and
    pinned "not installed" instead of "cannot be pinned" (no ``RECORD``): its code
    changes and trust holds."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    dist = plugin_requiring(site, ["wfdep-e"])
    egg = tmp_path / "eggs" / "wfdep_e-1.0.egg"
    (egg / "EGG-INFO").mkdir(parents=True)
    (egg / "EGG-INFO" / "PKG-INFO").write_text(
        "Metadata-Version: 1.1\nName: wfdep-e\nVersion: 1.0\n"
    )
    (egg / "wfdep_e").mkdir()
    (egg / "wfdep_e" / "__init__.py").write_text("print('reviewed')\n")
    monkeypatch.syspath_prepend(str(egg))
    assert [d.version for d in distributions(name="wfdep-e")] == ["1.0"]
    deps = closure.dependencies(dist, str(site))
    before = closure.pinned_digest("c" * 64, deps)
    (egg / "wfdep_e" / "__init__.py").write_text("print('other code!')\n")
    after = closure.pinned_digest("c" * 64, closure.dependencies(dist, str(site)))
    assert before != after, deps
