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

from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db


def _plugin(site: Path, requires: list[str]) -> object:
    lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    meta = {"METADATA": f"Metadata-Version: 2.1\nName: webfetch-t\nVersion: 1.0\n{lines}".encode()}
    wheel(
        site,
        "webfetch-t",
        {"t": "webfetch_t:manifest"},
        {"webfetch_t/__init__.py": MANIFEST % "t"},
        meta,
    )
    return next(iter(distributions(name="webfetch-t", path=[str(site)])))


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
    dist = _plugin(site, ["wfdep-p"])
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
