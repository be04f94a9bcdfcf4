"""Credential files the settings name are masked in the plugin sandbox as the site's data
(docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst, amended in round 26): each
``DATABASES`` entry's ``OPTIONS`` ``passfile``, ``sslkey``, ``sslcert``, ``sslrootcert``,
``sslcrl``, ``read_default_file`` (``bubblewrap.CREDENTIAL_OPTIONS``) and MySQL's ``ssl``
files, ``EMAIL_SSL_KEYFILE`` and ``EMAIL_SSL_CERTFILE``, each with its copies; a change
of one ends the pooled processes started under the old value (``SITE_SETTINGS``).

History: issue 30, round 26, finding 5 (``bubblewrap._site_data`` read only SQLite files
of ``DATABASES`` and only ``EMAIL_FILE_PATH`` of the e-mail settings).  Observed from
inside the real sandbox with the codeprobe plugin (``tests/plugins/probe_site``).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

_SECRET = "round26-the-sites-credential"


def test_credential_files_the_settings_name_are_not_readable(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Each credential file the settings name (``bubblewrap.CREDENTIAL_OPTIONS`` of any
    ``DATABASES`` entry, MySQL's ``ssl`` files, ``EMAIL_SSL_KEYFILE``,
    ``EMAIL_SSL_CERTFILE``), relative to the working directory or absolute, is masked with
    its copies, as the SQLite file of the same ``DATABASES`` is.

    History: issue 30, round 26, finding 5 (Medium).  ``bubblewrap._site_data`` read, of
    ``DATABASES``, only SQLite files; of the e-mail settings, only ``EMAIL_FILE_PATH``.  The
    files Django's own docs give for keeping credentials out of ``settings.py`` are named by
    the settings too, often relative to the project directory: PostgreSQL's
    ``OPTIONS["passfile"]`` (``".my_pgpass"``), its client key ``OPTIONS["sslkey"]``,
    MySQL's ``OPTIONS["read_default_file"]`` (a ``my.cnf`` with the password) and
    ``EMAIL_SSL_KEYFILE``.  Beside a project whose ``BASE_DIR`` is not masked whole (it
    holds its virtual environment or dependencies: decision 0060), none was masked or left
    out of the Landlock rules, while the SQLite file of the same ``DATABASES`` was.

    Gain was the production database's and the mail relay's credentials (and TLS client
    keys) to any untrusted plugin, which can then reach them through any egress grant or
    hand them out in its results."""
    base = system_library_dir / "mysite"
    base.mkdir()
    secrets = {
        ".my_pgpass": f"db.internal:5432:app:app:{_SECRET}-pgpass\n",
        "pg-client.key": f"-----BEGIN PRIVATE KEY-----\n{_SECRET}-sslkey\n",
        "my.cnf": f"[client]\nuser = app\npassword = {_SECRET}-mycnf\n",
        "smtp.key": f"-----BEGIN PRIVATE KEY-----\n{_SECRET}-smtp\n",
        "smtp.crt": f"-----BEGIN CERTIFICATE-----\n{_SECRET}-smtpcert\n",
        "pg-client.crt": f"-----BEGIN CERTIFICATE-----\n{_SECRET}-sslcert\n",
        "pg-root.crt": f"-----BEGIN CERTIFICATE-----\n{_SECRET}-sslrootcert\n",
        "mysql-client.key": f"-----BEGIN PRIVATE KEY-----\n{_SECRET}-mysqlssl\n",
        # Copies beside them: an editor's, a deploy's.
        "pg-client.key.bak": f"-----BEGIN PRIVATE KEY-----\n{_SECRET}-sslkey-copy\n",
        "my.cnf~": f"[client]\npassword = {_SECRET}-mycnf-copy\n",
    }
    for name, text in secrets.items():
        (base / name).write_text(text)
    (base / "db.sqlite3").write_text(f"{_SECRET}-sqlite\n")  # the control: masked
    (base / "attack26_other.txt").write_text("control\n")
    open_up(system_library_dir)
    monkeypatch.chdir(base)  # the project run from its directory: relative names are its
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    databases = dict(settings.DATABASES)
    databases["reports"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}
    databases["primary"] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "app",
        "OPTIONS": {
            "passfile": ".my_pgpass",
            "sslkey": "pg-client.key",
            "sslcert": "pg-client.crt",
            "sslrootcert": str(base / "pg-root.crt"),
        },
    }
    databases["legacy"] = {
        "ENGINE": "django.db.backends.mysql",
        "OPTIONS": {
            "read_default_file": str(base / "my.cnf"),
            "ssl": {"key": "mysql-client.key"},
        },
    }
    settings.MEDIA_ROOT = str(base / "media")  # not the working directory
    settings.EMAIL_SSL_KEYFILE = str(base / "smtp.key")
    settings.EMAIL_SSL_CERTFILE = "smtp.crt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding setting DATABASES ..."
        with override_settings(DATABASES=databases):
            seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack26_other.txt") in seen["read"], seen  # the control
    assert str(base / "db.sqlite3") not in seen["read"], seen  # a SQLite NAME: masked
    assert seen["leaked"] == [], f"credential files are readable: {seen['leaked']}"


def test_each_credential_setting_is_site_data_and_decides_the_pooled_masks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Each credential setting, relative or absolute, is among the site's data under its
    absolute name; changing one changes ``site_inputs`` (a pooled process started under the
    old value gets no further call)."""
    monkeypatch.chdir(tmp_path)
    settings.EMAIL_SSL_KEYFILE = "smtp.key"
    before = bubblewrap.site_inputs()
    settings.EMAIL_SSL_CERTFILE = str(tmp_path / "smtp.crt")
    assert bubblewrap.site_inputs() != before
    options = {name: f"{name}.file" for name in bubblewrap.CREDENTIAL_OPTIONS}
    options["ssl"] = {"key": "ssl.key", "cert": "ssl.crt", "ca": "ssl.ca"}
    databases = {
        **settings.DATABASES,
        "other": {"ENGINE": "django.db.backends.postgresql", "NAME": "x", "OPTIONS": options},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding setting DATABASES ..."
        with override_settings(DATABASES=databases):
            data = bubblewrap._site_data()
    expected = [f"{name}.file" for name in bubblewrap.CREDENTIAL_OPTIONS]
    expected += ["ssl.key", "ssl.crt", "ssl.ca", "smtp.key", "smtp.crt"]
    missing = [name for name in expected if str(tmp_path / name) not in data]
    assert missing == [], data
