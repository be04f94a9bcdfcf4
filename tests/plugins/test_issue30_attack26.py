"""Issue 30, outside attack round 26: what still gets through the plugin sandbox.

Each test here is a finding: it fails on the code it was written against (that is the
proof) and names what gets through.  Observed from inside the real sandbox with the
codeprobe plugin (``tests/plugins/probe_site``), as
tests/plugins/test_the_default_media_root_rotated_logs_and_pooled_masks.py does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import read_all

pytestmark = pytest.mark.django_db

_SECRET = "attack26-the-sites-secret"


@pytest.fixture
def system_library_dir() -> Iterator[Path]:
    """A directory made under ``/usr/local/lib`` (a system library directory the sandbox
    binds whole: ``bubblewrap._system``), removed after the test."""
    if not os.path.isdir("/usr/local/lib") or os.path.islink("/usr/local/lib"):
        pytest.skip("no /usr/local/lib directory")
    top = tempfile.mkdtemp(prefix="webfetch-attack26-", dir="/usr/local/lib")
    try:
        yield Path(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _open_up(top: Path) -> None:
    for path in [top, *sorted(top.rglob("*"))]:
        if path.is_symlink():
            continue
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def test_a_dated_copy_of_the_media_root_directory_is_not_readable(
    probe: Any, system_library_dir: Path, settings: Any
) -> None:
    """Severity: Low.

    Route: a data *file*'s copies include ``<name>-*`` (round 24: logrotate's
    ``dateext``, an operator's ``db.sqlite3-old``), but a data *directory*'s siblings are
    only ``<name>.*``, ``<name>~`` and ``<name>#`` (``bubblewrap._entries`` with ``data``
    false for a directory): the copy an operator makes before a migration or a storage
    move (``cp -a media media-20261207``, ``uploads-old``) beside a ``MEDIA_ROOT`` under a
    bound directory is neither masked nor left out of the Landlock rules.

    Gain: every upload of that copy (invoices, identity documents) to any untrusted
    plugin."""
    base = system_library_dir / "mysite"
    media = base / "media"
    media.mkdir(parents=True)
    (media / "invoice-42.txt").write_text(f"IBAN {_SECRET}-live\n")
    dated = base / "media-20261207"
    dated.mkdir()
    (dated / "invoice-42.txt").write_text(f"IBAN {_SECRET}-copy\n")
    (base / "attack26_other.txt").write_text("control\n")
    _open_up(system_library_dir)
    settings.MEDIA_ROOT = str(media)
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack26_other.txt") in seen["read"], seen  # the control
    assert str(media / "invoice-42.txt") not in seen["read"], seen  # the live root: masked
    assert seen["leaked"] == [], f"a copy of the uploads is readable: {seen['leaked']}"


def test_a_dated_copy_of_the_sites_package_beside_it_is_hidden(
    system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Severity: Low (finding 3's route, for the site's code).

    Route: a package's copies are ``<name>.*``, ``<name>~`` and ``<name>#`` beside it
    (``bubblewrap.copies``, ``data`` false for a directory); the copy a deploy keeps of
    the previous release (``cp -a mysite mysite-20261207``, ``mysite-old``) beside the
    site's package in a bound directory is not among them, settings module and all.

    Gain: the previous release's settings (its ``SECRET_KEY``, often still valid in
    ``SECRET_KEY_FALLBACKS``; its credentials) to any untrusted plugin."""
    package = system_library_dir / "attack26_site"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(f"SECRET_KEY = '{_SECRET}'\n")
    shutil.copytree(package, system_library_dir / "attack26_site-20261207")
    shutil.copytree(package, system_library_dir / "attack26_site.bak")  # the control
    monkeypatch.syspath_prepend(str(system_library_dir))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack26_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    hidden = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    real = os.path.realpath(system_library_dir)
    assert os.path.join(real, "attack26_site.bak") in hidden, hidden  # the control
    assert os.path.join(real, "attack26_site-20261207") in hidden, hidden
