"""Every other release of the project beside the one the site runs from, and every
rotated copy of a data file that keeps its extension last, is masked with it
(docs/decisions/0058-every-copy-of-the-sites-code-is-masked.rst and
docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst, amended for round 28).

History: issue 30, round 28, findings 1 and 3.

A deploy tool's previous releases (``releases/<timestamp>/``, ``current`` a link to the
newest) hold the site's settings package at the same relative path as the release the
site runs from: each such sibling is a copy (``bubblewrap._releases``).  logrotate's
``extension`` directive names ``django.log``'s rotations ``django.1.log``,
``django.2.log.gz``, ``django-20261206.log``: a data file's copies include
``<root><sep><anything><ext>`` (``bubblewrap._keeps_extension``).

Observed from inside the real sandbox with the codeprobe plugin (``tests/plugins/probe_site``)
reading a directory a system bind holds, and through ``bubblewrap`` for generated names and
layouts.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.test import override_settings
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

_SECRET = "fix28-13-the-sites-secret"


def _release(root: Path, stamp: str, top: str, secret: str) -> Path:
    """One release of a project as a deploy tool leaves it (Capistrano, Deployer,
    Fabric's ``releases/<timestamp>``): ``manage.py`` and the settings package."""
    release = root / "releases" / stamp
    package = release / top
    package.mkdir(parents=True)
    (release / "manage.py").write_text("#!/usr/bin/env python\n")
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(f"SECRET_KEY = '{secret}'\n")
    (package / "urls.py").write_text("urlpatterns = []\n")
    return release


def test_a_previous_release_beside_the_current_one_is_not_readable(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 28, finding 1 (Medium).

    A deploy tool's layout (Capistrano, Deployer, ``releases/<timestamp>`` with
    ``current`` a link to the newest) under a bound directory (``/usr/local/lib/<app>``):
    the current release, ``BASE_DIR``, is masked whole, and so is every previous release
    beside it (kept for a rollback), each holding the same settings package, ``SECRET_KEY``
    and all, though neither on ``sys.path`` nor named after the current release
    (``bubblewrap._releases``).  An unrelated file beside them stays readable."""
    top = "attack28_site"
    app = system_library_dir / "myapp"
    current = _release(app, "20261207120000", top, f"{_SECRET}-current")
    _release(app, "20261206110000", top, f"{_SECRET}-previous")
    _release(app, "20261130093000", top, f"{_SECRET}-older")
    (app / "current").symlink_to(current)
    (app / "attack28_other.txt").write_text("control\n")
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(app / "current"))  # gunicorn --chdir current
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", f"{top}.settings")
    monkeypatch.chdir(app / "current")
    settings.ROOT_URLCONF = f"{top}.urls"
    settings.BASE_DIR = Path(os.path.realpath(current))  # Path(__file__).resolve()...
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    seen = read_all(probe, [str(app)], _SECRET)
    assert str(app / "attack28_other.txt") in seen["read"], seen  # the control
    current_settings = os.path.join(os.path.realpath(current), top, "settings.py")
    assert current_settings not in seen["leaked"], seen  # the control: masked
    assert seen["leaked"] == [], f"previous releases' settings are readable: {seen['leaked']}"


def test_a_log_rotated_by_logrotate_keeping_its_extension_is_masked(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 28, finding 3 (Medium).

    logrotate's ``extension .log`` directive ("log files with ext extension can keep it
    after the rotation") names the rotated copies of ``django.log`` ``django.1.log``,
    ``django.2.log.gz`` and, with ``dateext``, ``django-20261206.log``: each is masked
    with the log (``bubblewrap._keeps_extension``), as ``django.log.1`` was; neighbours
    (``djangoapp.log``, ``django-1.txt``) stay readable."""
    base = system_library_dir / "mysite"
    package = base / "attack28_logsite"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text("DEBUG = False\n")
    logs = base / "logs"
    logs.mkdir()
    (logs / "django.log").write_text(f"ERROR password reset token {_SECRET}-today\n")
    (logs / "django.log.1").write_text(f"ERROR token {_SECRET}-numbered\n")  # the control
    rotated = ("django.1.log", "django.2.log.gz", "django-20261206.log", "django-20261205.log.gz")
    for name in rotated:
        (logs / name).write_text(f"ERROR password reset token {_SECRET}-{name}\n")
    (base / "attack28_other.txt").write_text("control\n")
    for name in ("djangoapp.log", "django-1.txt"):  # neighbours: no copies
        (logs / name).write_text("a neighbour\n")
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(base))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack28_logsite.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {
            "file": {"class": "logging.FileHandler", "filename": str(logs / "django.log")}
        },
    }
    masked = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    for name in ("django.log", "django.log.1"):  # the controls
        assert os.path.realpath(logs / name) in masked, name
    for name in rotated:
        assert os.path.realpath(logs / name) in masked, name
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack28_other.txt") in seen["read"], seen  # the control
    for name in ("djangoapp.log", "django-1.txt"):
        assert str(logs / name) in seen["read"], (name, seen)
    assert seen["leaked"] == [], f"the site's rotated logs are readable: {seen['leaked']}"


_ROOTS = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
_EXTENSIONS = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)
_COMPRESSED = ("", ".gz", ".bz2", ".xz", ".zst", ".lz4", ".Z", ".gz.gz")
#: What logrotate (``extension``, with or without ``dateext``/``dateformat``) or an
#: operator puts between a data file's root and its extension.
_MIDDLES = ("%n", "%Y%m%d", "%Y%m%d%H", "%Y-%m-%d", "%s", "backup", "old", "prod")


@st.composite
def _kept_extension(draw: Any) -> tuple[str, str, list[str]]:
    """(a data file's name, a copy of it that keeps its extension, neighbours)."""
    root, extension = draw(_ROOTS), draw(_EXTENSIONS)
    name = f"{root}.{extension}"
    moment = time.gmtime(draw(st.integers(0, 4_102_444_800)))
    middle = draw(st.sampled_from(_MIDDLES))
    middle = str(draw(st.integers(0, 400))) if middle == "%n" else time.strftime(middle, moment)
    separator = draw(st.sampled_from([".", "-", "_"]))
    copy = root + separator + middle + "." + extension + draw(st.sampled_from(_COMPRESSED))
    other = "txt" if extension != "txt" else "dat"
    neighbours = [
        f"{root}app.{extension}",  # a longer word that only starts with the root
        f"{root}{middle}x.{extension}" if not middle[:1].isdigit() else f"{root}x1.{extension}",
        f"{root}{separator}{middle}.{other}",  # another extension
        f"{root}{separator}{middle}.{extension}.txt",  # no compression after it
        f"{root}{separator}{middle}.{extension}x",
        f"x{root}{separator}{middle}.{extension}",
    ]
    return name, copy, neighbours


@hypothesis_settings(max_examples=300, deadline=None)
@given(case=_kept_extension())
def test_every_copy_of_a_data_file_that_keeps_its_extension_is_among_its_copies(
    case: tuple[str, str, list[str]],
) -> None:
    """History: issue 30, round 28, finding 3 (Medium).  Over generated data file names
    and their copies that keep the extension last (logrotate's ``extension``, numbered or
    with ``dateext``, compressed or not; an operator's ``db-20261207.sqlite3``,
    ``db_backup.sqlite3``): each is among ``bubblewrap.copies`` of the file; no
    neighbour is (a longer word that starts with its root, another extension, an
    extension continued or followed by a non-compression suffix, a prefix)."""
    name, copy, neighbours = case
    with tempfile.TemporaryDirectory() as top:
        real = os.path.realpath(top)
        path = os.path.join(real, name)
        Path(path).write_text("today\n")
        Path(real, copy).write_text("rotated\n")
        for neighbour in neighbours:
            if neighbour not in (name, copy):
                Path(real, neighbour).write_text("a neighbour\n")
        found = bubblewrap.copies(path)[0]
        assert os.path.join(real, copy) in found, (copy, found)
        for neighbour in neighbours:
            if neighbour not in (name, copy):
                assert os.path.join(real, neighbour) not in found, (neighbour, found)


_sites = itertools.count()
_STAMP = "%Y%m%d%H%M%S"
_OTHER_NAMES = st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True).filter(
    lambda name: name not in ("static", "shared", "other", "notes", "vendor", "current")
)


@st.composite
def _release_layout(draw: Any) -> dict[str, Any]:
    """A deploy layout: the current release's name, the copies' names (previous releases,
    an operator's copy under any name), how the settings module is laid out, whether
    ``sys.path`` reaches the current release through a ``current`` link, and whether a
    copy holds what the guest needs (a virtual environment of its own)."""
    moments = draw(st.lists(st.integers(0, 4_102_444_800), min_size=2, max_size=4, unique=True))
    stamps = [time.strftime(_STAMP, time.gmtime(moment)) for moment in moments]
    names = _unique(stamps[1:] + draw(st.lists(_OTHER_NAMES, max_size=2)))
    return {
        "current": stamps[0],
        "copies": [name for name in names if name != stamps[0]],
        "package": draw(st.sampled_from(["module", "package", "namespace"])),
        "linked": draw(st.booleans()),
        "needs": draw(st.booleans()),
        "parent": draw(st.sampled_from(["releases", "app", "deploys"])),
    }


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _write_release(where: Path, top: str, package: str, secret: str) -> Path:
    """``where/<top>`` with its settings (``settings.py``, or ``settings/__init__.py``;
    with or without ``<top>/__init__.py``), returning the file holding ``secret``."""
    holder = where / top / ("settings/__init__.py" if package == "package" else "settings.py")
    holder.parent.mkdir(parents=True)
    if package != "namespace":
        (where / top / "__init__.py").write_text("")
    holder.write_text(f"SECRET_KEY = '{secret}'\n")
    (where / "manage.py").write_text("#!/usr/bin/env python\n")
    return holder


def _masked(path: Path, masked: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == m or real.startswith(m.rstrip("/") + "/") for m in masked)


@hypothesis_settings(max_examples=60, deadline=None)
@given(layout=_release_layout())
def test_every_release_of_the_project_beside_the_current_one_is_masked(
    layout: dict[str, Any],
) -> None:
    """History: issue 30, round 28, finding 1 (Medium).  Over generated deploy layouts
    (the current release and the previous ones named by time stamps, an operator's copy
    under any name; a settings module or package, with or without ``__init__.py``;
    ``sys.path`` reaching the current release directly or through ``current``; a copy
    holding a virtual environment the guest imports from): every copy's settings file is
    masked (``bubblewrap.hidden_paths``), the guest's package directory in it is not, and
    no neighbour beside the releases is (a directory holding only the package's static
    files or its ``__init__.py``, another package's settings, a file)."""
    top = f"fix28_13_site{next(_sites)}"
    with tempfile.TemporaryDirectory() as tmp:
        real = Path(os.path.realpath(tmp))
        parent = real / "app" / layout["parent"]
        current = parent / layout["current"]
        _write_release(current, top, layout["package"], "current")
        holders = [
            _write_release(parent / name, top, layout["package"], name) for name in layout["copies"]
        ]
        needed: list[str] = []
        if layout["needs"] and layout["copies"]:
            packages = parent / layout["copies"][0] / "venv" / "lib" / "site-packages"
            packages.mkdir(parents=True)
            (packages / "dependency.py").write_text("VALUE = 1\n")
            needed.append(str(packages))
        neighbours = [parent / "static" / top / "style.css", parent / "other" / "settings.py"]
        neighbours += [parent / "shared" / f"{top}x" / "settings.py", parent / "notes"]
        neighbours += [parent / "vendor" / top / "__init__.py"]  # no settings module
        for neighbour in neighbours:
            neighbour.parent.mkdir(parents=True, exist_ok=True)
            neighbour.write_text("a neighbour\n")
        entry = current
        if layout["linked"]:
            (real / "app" / "current").symlink_to(current)
            entry = real / "app" / "current"
        with (
            mock.patch.dict(os.environ, {"DJANGO_SETTINGS_MODULE": f"{top}.settings"}),
            mock.patch.object(sys, "path", [str(entry), *sys.path]),
            override_settings(
                BASE_DIR=Path(os.path.realpath(current)), WEBFETCH_PLUGIN_HIDDEN_PATHS=[]
            ),
        ):
            masked = bubblewrap.hidden_paths([str(real)], needed)
        assert _masked(current / top / "__init__.py", masked) or _masked(current, masked)
        for holder in holders:
            assert _masked(holder, masked), (holder, masked)
        for path in needed:
            assert not _masked(Path(path) / "dependency.py", masked), (path, masked)
        for neighbour in neighbours:
            assert not _masked(neighbour, masked), (neighbour, masked)


def test_the_releases_directory_is_recorded_and_masked_whole_past_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """History: issue 30, round 28, finding 1 (Medium).  The listing of the directory
    holding the releases, and each release looked in, are recorded for the pooled
    processes (``_note``: a new release retires them); a directory of more entries than
    ``_RELEASES_MAX_ENTRIES`` is not looked through but masked whole (fail closed)."""
    top = f"fix28_13_site{next(_sites)}"
    real = Path(os.path.realpath(tmp_path))
    releases = real / "app" / "releases"
    current = releases / "20261207120000"
    _write_release(current, top, "package", "current")
    holders = [_write_release(releases / n, top, "module", n) for n in ("2026120611", "b")]
    with (
        mock.patch.dict(os.environ, {"DJANGO_SETTINGS_MODULE": f"{top}.settings"}),
        mock.patch.object(sys, "path", [str(current), *sys.path]),
        override_settings(WEBFETCH_PLUGIN_HIDDEN_PATHS=[]),
    ):
        with bubblewrap._reading() as listings:
            masked = bubblewrap.hidden_paths([str(real)], [])
        for holder in holders:
            assert _masked(holder, masked), (holder, masked)
            assert str(holder.parent.parent) in listings, listings
            assert str(holder.parent) in listings, listings
        assert str(releases) in listings, listings
        assert str(releases) not in masked
        monkeypatch.setattr(bubblewrap, "_RELEASES_MAX_ENTRIES", 2)
        masked = bubblewrap.hidden_paths([str(real)], [])
        assert str(releases) in masked, masked
