"""Issue 30, round 24: an outside attack on the plugin sandbox.

Each test failed on the code it was written against (branch s13-attack24, c98892b); its
docstring keeps the severity, the route and the gain.  Observed from the host side: the
codeprobe plugin (``tests/plugins/probe_site``) reading a bound directory in its real
sandbox.  (Finding 1, a child forked during a call kept its uid locked, is fixed: its test
is in test_a_host_keeps_the_uids_it_verified.py.)
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

_SECRET = "attack24-the-sites-secret"


@pytest.fixture
def system_library_dir() -> Iterator[Path]:
    """A directory made under ``/usr/local/lib`` (a system library directory the sandbox
    binds whole: ``bubblewrap._system``), removed after the test."""
    if not os.path.isdir("/usr/local/lib") or os.path.islink("/usr/local/lib"):
        pytest.skip("no /usr/local/lib directory")
    top = tempfile.mkdtemp(prefix="webfetch-attack24-", dir="/usr/local/lib")
    try:
        yield Path(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _open_up(top: Path) -> None:
    for path in [top, *sorted(top.rglob("*"))]:
        if path.is_symlink():
            continue
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def test_uploads_under_the_default_empty_media_root_are_readable(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Severity: Medium (needs a site that leaves ``MEDIA_ROOT`` at Django's default and
    runs from a directory a system bind holds, beside a package directory of its own).

    Route: ``MEDIA_ROOT`` is ``""`` by default, and Django's ``FileSystemStorage`` then
    stores every upload under ``os.path.abspath("")``: the host's working directory.
    ``bubblewrap._paths_of`` takes ``""`` for "no path" and masks nothing for it, so the
    uploads are not the site's data to the sandbox.  A project deployed under
    ``/usr/local/lib/<app>`` (bound whole: ``bubblewrap._system``), run from its
    directory (``BASE_DIR``), with its dependencies installed beside it
    (``pip install --target``, a project-local virtualenv: a package directory under
    ``BASE_DIR``, so ``_site_base`` does not mask it whole) has its settings masked and
    its uploads readable.  Gain: an untrusted plugin reads every file the site's users
    uploaded (invoices, identity documents).  Expected: an empty ``MEDIA_ROOT`` (and any
    storage ``location`` left empty) is the working directory, masked as the site's data,
    or the uploads are otherwise unreadable."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import FileSystemStorage

    base = system_library_dir / "mysite"
    package = base / "attack24_site"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(
        "from pathlib import Path\nBASE_DIR = Path(__file__).resolve().parent.parent\n"
    )
    deps = base / "lib" / "site-packages"  # the project's own dependencies
    deps.mkdir(parents=True)
    _open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(deps))
    monkeypatch.syspath_prepend(str(base))
    assert os.path.realpath(deps) in bubblewrap.site_dirs()
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack24_site.settings")
    monkeypatch.chdir(base)
    settings.BASE_DIR = base
    settings.MEDIA_ROOT = ""  # Django's default
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    saved = FileSystemStorage().save("invoices/customer-42.txt", ContentFile(f"IBAN {_SECRET}"))
    assert (base / saved).is_file()  # the upload is in the working directory
    (base / "attack24_other.txt").write_text("control\n")
    _open_up(system_library_dir)
    masked = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    assert os.path.realpath(package) in masked, "the settings are masked"
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack24_other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"the site's uploads are readable: {seen['leaked']}"


def test_a_log_file_rotated_with_a_date_suffix_is_readable(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Severity: Medium (needs the site's log directory in a directory a system bind holds,
    the layout round 20 accepted, and logrotate's ``dateext``: the default of Red Hat,
    Fedora and SUSE's ``logrotate.conf``).

    Route: the site's log files are masked by the names its settings give
    (``bubblewrap._logging_files``) with their copies (``bubblewrap.copies``:
    every entry beside them named ``<name>.*``, ``<name>~*``, ``<name>#*``), which takes
    ``django.log.1`` and ``django.log.1.gz`` (logrotate's default, ``RotatingFileHandler``)
    but not ``django.log-20261207`` nor ``django.log-20261207.gz``: logrotate's
    ``dateext`` names each rotated log ``<name>-<date>`` (``dateformat -%Y%m%d``), the
    form ``_listed`` takes for a SQLite database only.  Gain: an untrusted plugin reads
    every rotated day of the site's logs (password reset tokens, session keys, request
    bodies, tracebacks with settings) beside the masked current one.  Expected: each entry
    beside a log file named ``<name>-*`` is masked as its copy (as for a database)."""
    base = system_library_dir / "mysite"
    package = base / "attack24_site"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text("DEBUG = False\n")
    logs = base / "logs"
    logs.mkdir()
    (logs / "django.log").write_text(f"ERROR password reset token {_SECRET}-today\n")
    (logs / "django.log.1").write_text(f"ERROR password reset token {_SECRET}-numbered\n")
    (logs / "django.log-20261206").write_text(f"ERROR password reset token {_SECRET}-dated\n")
    (base / "attack24_other.txt").write_text("control\n")
    _open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(base))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack24_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {
            "file": {"class": "logging.FileHandler", "filename": str(logs / "django.log")}
        },
    }
    masked = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    assert os.path.realpath(logs / "django.log") in masked, "the current log is masked"
    assert os.path.realpath(logs / "django.log.1") in masked, "a numbered rotation is masked"
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack24_other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"the site's rotated logs are readable: {seen['leaked']}"


def test_a_pooled_process_reads_the_data_a_setting_names_after_it_started(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Severity: Low (needs a setting that names the site's data to change while the host
    runs: a settings override at run time, ``override_settings`` in the site's own tests,
    a storage location chosen per tenant).

    Route: the masks and the guest's Landlock rules are computed once, when the plugin
    process starts (``bubblewrap.hidden_paths``, ``bubblewrap.masks``), from the
    settings as they are then; a pooled process serves later calls with them, and the pool
    key (the instance and its manifest read) does not hold the site's data paths.  A
    ``MEDIA_ROOT`` set after the process started, to a directory a system bind holds that
    existed then, is neither masked nor left out of its Landlock rules (the directory got
    a rule as a whole).  Gain: a plugin whose process was pooled before the change reads
    the uploads written under the new ``MEDIA_ROOT``.  Expected: a process whose masks no
    longer cover the site's data (those computed now differ) is not handed another call."""
    base = system_library_dir / "mysite"
    package = base / "attack24_site"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text("DEBUG = False\n")
    media = base / "media"
    media.mkdir()
    (base / "attack24_other.txt").write_text("control\n")
    _open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(base))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack24_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.MEDIA_ROOT = str(system_library_dir / "elsewhere")
    from django_webfetch.plugins.runtime import host

    assert probe("result = '1'").kind in ("text", "json")  # a process starts and is pooled
    assert host.idle_processes() >= 1
    settings.MEDIA_ROOT = str(media)  # set after the process started
    (media / "customer-42.txt").write_text(f"IBAN {_SECRET}\n")
    _open_up(system_library_dir)
    assert os.path.realpath(media) in bubblewrap.hidden_paths(
        [os.path.realpath(system_library_dir)], []
    ), "a process started now masks it"
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack24_other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"the site's uploads are readable: {seen['leaked']}"
