"""Issue 30, round 19 fixed: the site's code is masked wherever the sandbox can see it
(docs/decisions/0058-every-copy-of-the-sites-code-is-masked.rst, amended).

The sandbox binds the interpreter, the site's package directories, the plugin's package and
the system library directories whole.  The site's code (every copy on ``sys.path`` of the
top-level packages of ``DJANGO_SETTINGS_MODULE`` and ``ROOT_URLCONF``, the zip archive a
copy is imported from, the paths of ``WEBFETCH_PLUGIN_HIDDEN_PATHS``) is masked under every
one of them; where it is, or holds, what the guest needs, the sandbox is not built
(``site_code_unmaskable``).  The property below generates where the copies lie and checks
the layout the sandbox is built from; tests/plugins/test_sites_code_hidden_from_the_sandbox.py reads
from inside the real sandbox.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap, host

pytestmark = pytest.mark.django_db

_SECRET = "fix19-the-sites-secret"
_names = itertools.count()
#: Where a copy of the site's package lies: a package directory (bound whole), a directory
#: under a system library directory on ``sys.path`` (bound whole with it), a zip archive in
#: the package directory, the project's own directory (first on ``sys.path``, not bound).
_PLACES = ("packages", "system", "zip", "project")


@dataclass(frozen=True)
class Layout:
    places: frozenset[str]
    named_by: str


_LAYOUTS = st.builds(
    Layout,
    places=st.frozensets(st.sampled_from(_PLACES), min_size=1),
    named_by=st.sampled_from(
        ["DJANGO_SETTINGS_MODULE", "ROOT_URLCONF", "WEBFETCH_PLUGIN_HIDDEN_PATHS"]
    ),
)


def _package(directory: Path, name: str) -> Path:
    package = directory / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(f"SECRET_KEY = {_SECRET!r}\n")
    return package


def _covered(path: str, by: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == m or real.startswith(m.rstrip("/") + "/") for m in by)


@hypothesis_settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(layout=_LAYOUTS)
@example(Layout(frozenset({"project", "packages"}), "DJANGO_SETTINGS_MODULE"))
@example(Layout(frozenset({"system"}), "WEBFETCH_PLUGIN_HIDDEN_PATHS"))
@example(Layout(frozenset({"zip"}), "ROOT_URLCONF"))
def test_the_sites_code_is_masked_wherever_the_sandbox_binds_it(
    tmp_path, monkeypatch, settings, layout
):
    """Over generated layouts (copies of the site's package in a package directory, under
    a system library directory, in a zip archive, in the project's directory; named by
    ``DJANGO_SETTINGS_MODULE``, ``ROOT_URLCONF`` or ``WEBFETCH_PLUGIN_HIDDEN_PATHS``):
    every file holding the site's secret that lies under a directory the sandbox binds is
    under a path it masks, and under one the guest's Landlock rules leave out."""
    if "system" in layout.places and (
        not os.path.isdir("/usr/local/lib") or os.path.islink("/usr/local/lib")
    ):
        pytest.skip("no /usr/local/lib directory")
    name = f"fix19_site{next(_names)}"
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    packages = root / "lib" / "site-packages"
    packages.mkdir(parents=True)
    (packages / "fix19_other.py").write_text("VALUE = 1\n")
    system = Path(tempfile.mkdtemp(prefix="webfetch-fix19-", dir="/usr/local/lib"))
    try:
        holders: list[str] = []  # files holding the secret, where the sandbox may see them
        named: list[str] = []  # what an operator lists in WEBFETCH_PLUGIN_HIDDEN_PATHS
        entries: list[str] = [str(packages)]  # sys.path, last first
        if "packages" in layout.places:
            named.append(str(_package(packages, name)))
        if "zip" in layout.places:
            archive = packages / f"{name}.zip"
            with zipfile.ZipFile(archive, "w") as zf:
                zf.writestr(f"{name}/__init__.py", "")
                zf.writestr(f"{name}/settings.py", f"SECRET_KEY = {_SECRET!r}\n")
            holders.append(str(archive))
            named.append(str(archive))
            entries.append(str(archive))
        if "system" in layout.places:
            named.append(str(_package(system, name)))
            entries.append(str(system))
        if "project" in layout.places:
            named.append(str(_package(root / "app", name)))
            entries.append(str(root / "app"))
        for top in (packages, system):
            holders += [str(p) for p in top.rglob("*") if p.is_file() and p.suffix == ".py"]
        holders = [h for h in holders if _SECRET.encode() in Path(h).read_bytes()]
        with monkeypatch.context() as patch:
            for entry in entries:
                patch.syspath_prepend(entry)
            settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
            if layout.named_by == "DJANGO_SETTINGS_MODULE":
                patch.setenv("DJANGO_SETTINGS_MODULE", f"{name}.settings")
            elif layout.named_by == "ROOT_URLCONF":
                patch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
                settings.ROOT_URLCONF = f"{name}.urls"
            else:
                settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = named
            spec = bubblewrap.SandboxSpec("/nonexistent", "nothing", 3, 4, 5, "/tmp/fix19")
            entries_ = bubblewrap._layout(spec)
            hidden = bubblewrap.masks(spec)
        bound = [e[1] for e in entries_ if e[0] == "bind"]
        masked = [e[1] for e in entries_ if e[0] == "mask"]
        visible = [h for h in holders if _covered(h, bound)]
        assert visible or not holders, (layout, holders, bound)  # the control: bound
        for holder in visible:
            assert _covered(holder, masked), (layout, holder, masked)
            assert _covered(holder, hidden), (layout, holder, hidden)
        assert _covered(str(packages / "fix19_other.py"), bound)
        assert not _covered(str(packages / "fix19_other.py"), hidden)
    finally:
        shutil.rmtree(system, ignore_errors=True)


def test_a_sandbox_whose_plugin_package_is_the_sites_code_is_not_built(
    tmp_path, monkeypatch, settings
):
    """The site's code that is, or holds, what the guest needs (the plugin's own package,
    bound whole) cannot be masked: the sandbox is not built, with a stable reason
    (``site_code_unmaskable``), rather than the site's settings left readable (the
    registry refuses such a plugin before: ``entry_point_site_code``,
    tests/plugins/test_sites_code_hidden_from_the_sandbox.py)."""
    packages = tmp_path / "lib" / "site-packages"
    package = _package(packages, "fix19_unmaskable")
    monkeypatch.syspath_prepend(str(packages))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "fix19_unmaskable.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    spec = bubblewrap.SandboxSpec(str(packages), "fix19_unmaskable", 3, 4, 5, "/tmp/fix19")
    with pytest.raises(bubblewrap.SiteCodeUnmaskable) as raised:
        bubblewrap.command(spec)
    assert raised.value.filename == os.path.realpath(package)
    origin = host.Origin("fix19_unmaskable:manifest", str(packages), "fix19_unmaskable")
    with pytest.raises(host.IsolationUnavailable) as refused:
        host.Worker(origin, host.Limits(5, 20, 1 << 30, 1 << 16, 5, 2), "fix19")
    assert host.reason_of(refused.value.detail) == "site_code_unmaskable", refused.value.detail
    assert "site_code_unmaskable" in bubblewrap.REASONS
