"""Issue 30, round 24, findings 2 to 4 fixed: the site's data is masked where the site
resolves it, with its rotated copies, and no pooled process serves under masks the settings
have left behind (docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst, amended
for round 24).

* A path setting the site resolves against its working directory when empty
  (``MEDIA_ROOT``'s default ``""``, ``FILE_UPLOAD_TEMP_DIR``, a storage's ``location``, a
  file cache's ``LOCATION``, the file e-mail backend's ``EMAIL_FILE_PATH``) makes the
  working directory the site's data: masked (hollowed where it holds what the guest needs).
* Every rotation of a log file (and of any data file) is among its ``copies``:
  ``NAME.<anything>`` and ``NAME-<anything>`` (logrotate's ``dateext``).
* A pooled process started under other ``bubblewrap.site_inputs`` is ended at checkout.

Observed from inside the real sandbox with the codeprobe plugin (``tests/plugins/probe_site``)
reading a directory a system bind holds, and through ``bubblewrap`` for many names.
"""

from __future__ import annotations

import logging.handlers
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

_SECRET = "fix24a-the-sites-secret"


def _site(base: Path, settings_text: str = "DEBUG = False\n") -> Path:
    package = base / "fix24a_site"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(settings_text)
    return package


def test_uploads_under_the_default_empty_media_root_are_masked_with_the_working_directory(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 24, finding 2 (Medium).

    ``MEDIA_ROOT = ""`` (Django's default) makes ``FileSystemStorage`` store under the
    host's working directory: a project under ``/usr/local/lib/<app>`` (bound whole), run
    from its directory, with its dependencies installed in it (a package directory under
    the working directory) has the working directory hollowed: its uploads and its
    settings unreadable, its dependencies bound back."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import FileSystemStorage

    base = system_library_dir / "mysite"
    _site(base, f"# {_SECRET}-settings\nDEBUG = False\n")
    deps = base / "lib" / "site-packages"  # the project's own dependencies
    deps.mkdir(parents=True)
    (deps / "fix24a_control.txt").write_text("control\n")
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(deps))
    monkeypatch.syspath_prepend(str(base))
    assert os.path.realpath(deps) in bubblewrap.site_dirs()
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "fix24a_site.settings")
    monkeypatch.chdir(base)
    settings.BASE_DIR = base
    settings.MEDIA_ROOT = ""  # Django's default
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    saved = FileSystemStorage().save("invoices/customer-42.txt", ContentFile(f"IBAN {_SECRET}"))
    assert (base / saved).is_file()  # the upload is in the working directory
    (base / "fix24a_other.txt").write_text(f"{_SECRET}-beside\n")
    open_up(system_library_dir)
    refused, hollows, _ = bubblewrap._placed([os.path.realpath(system_library_dir)], [])
    assert refused == []
    assert os.path.realpath(base) in hollows, "the working directory is hollowed"
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(deps / "fix24a_control.txt") in seen["read"], seen  # bound back: the control
    assert seen["leaked"] == [], f"the site's uploads are readable: {seen['leaked']}"


_FILE_CACHE = "django.core.cache.backends.filebased.FileBasedCache"
_EMPTY = {
    "media_root": {"MEDIA_ROOT": ""},
    "upload_temp_dir": {"FILE_UPLOAD_TEMP_DIR": ""},
    "email_file_path": {"EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend"},
    "storage_location": {"STORAGES": {"default": {"BACKEND": "x", "OPTIONS": {"location": ""}}}},
    "file_cache": {"CACHES": {"f": {"BACKEND": _FILE_CACHE}}},
}


@pytest.mark.parametrize("kind", sorted(_EMPTY))
def test_an_empty_path_setting_the_site_resolves_to_its_working_directory_is_site_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any, kind: str
) -> None:
    """History: issue 30, round 24, finding 2.  Where Django itself puts the data of each
    empty setting (asked of Django: a storage's location, a temporary upload's directory,
    the e-mail backend's directory, a file cache's) is among the site's data."""
    from django.core.cache.backends.filebased import FileBasedCache
    from django.core.files.storage import FileSystemStorage
    from django.core.files.uploadedfile import TemporaryUploadedFile
    from django.core.mail.backends.filebased import EmailBackend

    monkeypatch.chdir(tmp_path)
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.EMAIL_FILE_PATH = ""
    for name, value in _EMPTY[kind].items():
        setattr(settings, name, value)
    if kind == "media_root":
        where = FileSystemStorage().location
    elif kind == "upload_temp_dir":
        upload = TemporaryUploadedFile("a.txt", "text/plain", 0, None)
        where = os.path.dirname(os.path.abspath(upload.temporary_file_path()))
        upload.close()
    elif kind == "email_file_path":
        where = EmailBackend().file_path
    elif kind == "storage_location":
        where = FileSystemStorage(location="").location
    else:
        where = FileBasedCache("", {})._dir
    assert where == os.getcwd() == str(tmp_path)
    assert str(tmp_path) in bubblewrap._site_data()


def test_an_empty_path_django_never_resolves_to_the_working_directory_is_not_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 24, finding 2.  ``SESSION_FILE_PATH = ""`` is the system's
    temporary directory to Django, ``STATIC_ROOT = ""`` no location, and an
    ``EMAIL_FILE_PATH`` no file backend reads is nothing: none makes the working
    directory the site's data."""
    monkeypatch.chdir(tmp_path)
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SESSION_FILE_PATH = ""
    settings.STATIC_ROOT = ""
    settings.EMAIL_FILE_PATH = ""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    data = bubblewrap._site_data()
    assert str(tmp_path / "media") in data  # the control
    assert str(tmp_path) not in data


def test_a_log_file_rotated_with_a_date_suffix_is_masked(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 24, finding 3 (Medium).

    logrotate's ``dateext`` (the default of Red Hat's, Fedora's and SUSE's
    ``logrotate.conf``) names each rotated log ``<name>-<date>``: masked as a copy of the
    log, as ``<name>.1`` is."""
    base = system_library_dir / "mysite"
    _site(base)
    logs = base / "logs"
    logs.mkdir()
    (logs / "django.log").write_text(f"ERROR password reset token {_SECRET}-today\n")
    (logs / "django.log.1").write_text(f"ERROR password reset token {_SECRET}-numbered\n")
    (logs / "django.log-20261206").write_text(f"ERROR password reset token {_SECRET}-dated\n")
    (logs / "django.log-20261205.gz").write_text(f"ERROR {_SECRET}-dated-compressed\n")
    (base / "fix24a_other.txt").write_text("control\n")
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(base))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "fix24a_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {
            "file": {"class": "logging.FileHandler", "filename": str(logs / "django.log")}
        },
    }
    masked = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    for name in ("django.log", "django.log.1", "django.log-20261206", "django.log-20261205.gz"):
        assert os.path.realpath(logs / name) in masked, name
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "fix24a_other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"the site's rotated logs are readable: {seen['leaked']}"


_LOG_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,10}(\.log|\.txt|_log|\.err)?", fullmatch=True)
_WHEN = ("S", "M", "H", "D", "MIDNIGHT", "W0")
#: logrotate's ``dateformat`` (the default ``-%Y%m%d``, hourly ``-%Y%m%d%H``, ``-%s``).
_DATEEXT = ("-%Y%m%d", "-%Y%m%d%H", "-%Y%m%d%H%M%S", "-%s", ".%Y-%m-%d")


@st.composite
def _rotation(draw: Any) -> tuple[str, Any]:
    """(a log's name, how its rotated copy is named from its path)."""
    name = draw(_LOG_NAMES)
    moment = time.gmtime(draw(st.integers(0, 4_102_444_800)))
    number = draw(st.integers(0, 400))
    compressed = draw(st.sampled_from(["", ".gz", ".xz", ".bz2", ".zst"]))
    kinds = ["rotating", "timed", "logrotate", "dateext", "savelog", "extension"]
    kind = draw(st.sampled_from(kinds))
    when = draw(st.sampled_from(_WHEN))
    dateext = draw(st.sampled_from(_DATEEXT))
    dated = draw(st.booleans())

    def rotated(path: str) -> str:
        if kind == "rotating":  # RotatingFileHandler.doRollover
            handler = logging.handlers.RotatingFileHandler(path, delay=True)
            handler.close()
            return handler.rotation_filename(f"{handler.baseFilename}.{number}")
        if kind == "timed":  # TimedRotatingFileHandler.doRollover
            timed = logging.handlers.TimedRotatingFileHandler(path, when=when, delay=True)
            timed.close()
            suffix = time.strftime(timed.suffix, moment)
            return timed.rotation_filename(f"{timed.baseFilename}.{suffix}")
        if kind == "logrotate":  # ``.1``, ``.1.gz``
            return f"{path}.{number}{compressed}"
        if kind == "dateext":
            return path + time.strftime(dateext, moment) + compressed
        root, dot, extension = path.rpartition(".")
        if kind == "extension" and dot and "/" not in extension:
            # logrotate's ``extension .log``: ``django.1.log.gz``, with ``dateext``
            # ``django-20261206.log`` (issue 30, round 28, finding 3).
            middle = time.strftime(dateext, moment) if dated else f".{number}"
            return f"{root}{middle}.{extension}{compressed}"
        return f"{path}.{number}{compressed}"  # savelog: ``.0``, ``.1.gz``

    return name, rotated


@hypothesis_settings(max_examples=300, deadline=None)
@given(rotation=_rotation())
def test_every_rotated_name_of_a_log_is_among_its_copies(rotation: tuple[str, Any]) -> None:
    """History: issue 30, round 24, finding 3.  Over generated names of the log rotators
    (``RotatingFileHandler``, ``TimedRotatingFileHandler`` for each ``when``, logrotate's
    numbered and ``dateext`` names, compressed or not, savelog; round 28, finding 3:
    logrotate's ``extension``, which keeps the extension last, ``django.1.log.gz``,
    ``django-20261206.log``): every rotated copy beside a log file is among
    ``bubblewrap.copies`` of it, and a neighbour named after it with no separator is
    not, nor one whose root is a longer word or whose extension is another."""
    name, rotated = rotation
    with tempfile.TemporaryDirectory() as top:
        path = os.path.join(os.path.realpath(top), name)
        Path(path).write_text("today\n")
        copy = rotated(path)
        assert os.path.dirname(copy) == os.path.dirname(path)
        Path(copy).write_text("rotated\n")
        neighbours = [path + "x"]
        root, dot, extension = name.rpartition(".")
        if dot and root:  # ``djangoapp.log``, ``django-1.txt``
            other = "txt" if extension != "txt" else "dat"
            neighbours += [os.path.join(os.path.dirname(path), n) for n in
                           (f"{root}app.{extension}", f"{root}-1.{other}")]  # fmt: skip
        for neighbour in neighbours:
            Path(neighbour).write_text("a neighbour\n")
        found = bubblewrap.copies(path)[0]
        assert copy in found, (copy, found)
        for neighbour in neighbours:
            assert neighbour not in found, (neighbour, found)


def test_a_pooled_process_started_before_a_data_setting_changed_serves_no_call(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 24, finding 4 (Low).

    Masks and Landlock rules are computed when a plugin process starts: a pooled process
    started before ``MEDIA_ROOT`` named a directory it can read is ended at checkout
    (``host.Pool.acquire`` compares ``bubblewrap.site_inputs``), and the call runs in a
    process started under the masks of now."""
    from django_webfetch.plugins.runtime import host

    base = system_library_dir / "mysite"
    _site(base)
    media = base / "media"
    media.mkdir()
    (base / "fix24a_other.txt").write_text("control\n")
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(base))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "fix24a_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.MEDIA_ROOT = str(system_library_dir / "elsewhere")
    assert probe("result = '1'").kind in ("text", "json")  # a process starts and is pooled
    assert host.idle_processes() >= 1
    assert probe("result = '1'").kind in ("text", "json")  # the same settings: kept
    assert host.idle_processes() >= 1
    settings.MEDIA_ROOT = str(media)  # set after the process started
    (media / "customer-42.txt").write_text(f"IBAN {_SECRET}\n")
    open_up(system_library_dir)
    assert os.path.realpath(media) in bubblewrap.hidden_paths(
        [os.path.realpath(system_library_dir)], []
    ), "a process started now masks it"
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "fix24a_other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"the site's uploads are readable: {seen['leaked']}"


def test_the_site_inputs_change_with_each_data_setting_and_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """History: issue 30, round 24, finding 4.  What the pool compares changes when a
    setting naming the site's data, or the working directory, does, and only then."""
    from django.test import override_settings

    before = bubblewrap.site_inputs()
    assert bubblewrap.site_inputs() == before
    for name in bubblewrap.SITE_SETTINGS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Overriding setting DATABASES ..."
            with override_settings(**{name: str(tmp_path / name)}):
                assert bubblewrap.site_inputs() != before, name
        assert bubblewrap.site_inputs() == before, name
    monkeypatch.chdir(tmp_path)
    assert bubblewrap.site_inputs() != before


def test_the_copies_of_a_file_whose_name_starts_with_a_dot_are_its_copies(tmp_path: Path) -> None:
    """History: issue 30, round 24, finding 3.  A listed ``.env`` has its backups and
    rotations (``.env.bak``, ``.env-old``, ``.env~``) among its copies, as ``secrets.json``
    has, and not another dotfile (``.envrc``) nor a module's ``settings-old.py``."""
    for name in (".env", ".env.bak", ".env-old", ".env~", ".envrc"):
        (tmp_path / name).write_text("SECRET_KEY=x\n")
    (tmp_path / "settings.py").write_text("")
    (tmp_path / "settings-old.py").write_text("")
    found = bubblewrap.copies(str(tmp_path / ".env"))[0]
    assert sorted(os.path.basename(p) for p in found) == [".env", ".env-old", ".env.bak", ".env~"]
    assert (
        str(tmp_path / "settings-old.py") not in bubblewrap.copies(str(tmp_path / "settings.py"))[0]
    )


def test_site_inputs_read_from_a_removed_working_directory_match_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """History: issue 30, round 24, finding 4.  A working directory that was removed has no
    name to compare: the inputs read then equal no others (no pooled process is reused),
    and reading them raises nothing."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert bubblewrap.site_inputs() != bubblewrap.site_inputs()
