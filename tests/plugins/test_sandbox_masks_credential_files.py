"""Credential files the settings name are masked in the plugin sandbox as the site's data
(docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst, amended in round 26): each
``DATABASES`` entry's ``OPTIONS`` ``passfile``, ``sslkey``, ``sslcert``, ``sslrootcert``,
``sslcrl``, ``read_default_file`` (``bubblewrap.CREDENTIAL_OPTIONS``) and MySQL's ``ssl``
files, ``EMAIL_SSL_KEYFILE`` and ``EMAIL_SSL_CERTFILE``, each with its copies; a change
of one ends the pooled processes started under the old value (``SITE_SETTINGS``).

Since round 27, also every existing regular file a ``DATABASES``, ``CACHES`` or
``STORAGES`` entry's ``OPTIONS`` names under a key that names a key, certificate, CA or
password file, at any depth (``bubblewrap._option_files``: ``RedisCache``'s
``ssl_keyfile``, django-redis's ``CONNECTION_POOL_KWARGS``), and this application's own
path settings: ``WEBFETCH_LOG_FILES``, ``WEBFETCH_CA_FILE`` and ``WEBFETCH_PROJECT_ROOT``
(masked whole where it holds nothing the plugin process needs, as ``BASE_DIR``).

History: issue 30, round 26, finding 5 (``bubblewrap._site_data`` read only SQLite files
of ``DATABASES`` and only ``EMAIL_FILE_PATH`` of the e-mail settings).  Observed from
inside the real sandbox with the codeprobe plugin (``tests/plugins/probe_site``).
History: issue 30, round 27, finding 4 (a cache's ``OPTIONS`` and ``WEBFETCH_LOG_FILES``
were not read).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

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


def test_the_redis_cache_keys_and_the_log_tools_files_the_settings_name_are_not_readable(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """The TLS client key and certificate of a ``RedisCache``'s ``OPTIONS`` (relative and
    absolute) and the files of ``WEBFETCH_LOG_FILES`` are unreadable in the real sandbox.

    History: issue 30, round 27, finding 4 (Medium-low).  Round 26 masked the credential
    files of ``DATABASES[...]["OPTIONS"]`` and ``EMAIL_SSL_*`` only; ``_site_data`` read a
    cache's ``LOCATION`` but never its ``OPTIONS``, and never this project's own
    ``WEBFETCH_LOG_FILES`` (logs another process writes: gunicorn's access log, a
    worker's, so neither ``LOGGING`` nor ``written_files`` names them), and
    ``SITE_SETTINGS`` had no ``WEBFETCH_LOG_FILES``.  Beside a project whose ``BASE_DIR``
    is not masked whole, an untrusted plugin read the Redis client key (the sessions in
    the cache) and the site's logs (request URLs with their tokens)."""
    base = system_library_dir / "mysite"
    base.mkdir()
    secrets = {
        "redis-client.key": f"-----BEGIN PRIVATE KEY-----\n{_SECRET}-redis-key\n",
        "redis-client.crt": f"-----BEGIN CERTIFICATE-----\n{_SECRET}-redis-cert\n",
        "webfetch.log": f"GET /reset?token={_SECRET}-log\n",
        "webfetch.log.1": f"GET /reset?token={_SECRET}-log-rotated\n",
    }
    for name, text in secrets.items():
        (base / name).write_text(text)
    (base / "attack27_other.txt").write_text("control\n")
    open_up(system_library_dir)
    monkeypatch.chdir(base)
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.MEDIA_ROOT = str(base / "media")  # not the working directory
    caches = dict(settings.CACHES)
    caches["sessions"] = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "rediss://cache.internal:6380/0",
        "OPTIONS": {
            "ssl_keyfile": str(base / "redis-client.key"),
            "ssl_certfile": "redis-client.crt",
            "ssl_cert_reqs": "required",
        },
    }
    settings.CACHES = caches
    settings.WEBFETCH_LOG_FILES = [str(base / "webfetch.log")]
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack27_other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"files the settings name are readable: {seen['leaked']}"


#: Keys whose value names a credential file (``bubblewrap._credential_key``).
_CREDENTIAL_KEYS = (
    "ssl_keyfile",
    "ssl_certfile",
    "ssl_ca_certs",
    "SSL_KEYFILE",
    "keyfile",
    "certfile",
    "cafile",
    "sslkey",
    "sslrootcert",
    "passfile",
    "key_filename",
    "known_host_file",
    "client-cert-path",
    "read_default_file",
)
#: Keys whose value is no credential file: a path under one is not taken.
_OTHER_KEYS = ("ssl_cert_reqs", "init_command", "socket_timeout", "isolation_level", "host")
#: Values under a credential key that name no regular file.
_NOT_PATHS: tuple[object, ...] = ("required", "none", 6380, True, None, 1.5, "", "a\0b")


@dataclass(frozen=True)
class _Leaf:
    kind: str  # "named": a file under a credential key; "other": a file under another
    # key; "decoy": a value that names no regular file under a credential key
    key: str
    value: object  # for a decoy
    relative: bool
    as_path: bool
    route: tuple[str, ...]  # the containers down to it: "dict" or "list"


_LEAVES = st.builds(
    _Leaf,
    kind=st.sampled_from(["named", "other", "decoy", "directory"]),
    key=st.sampled_from(_CREDENTIAL_KEYS),
    value=st.sampled_from(_NOT_PATHS),
    relative=st.booleans(),
    as_path=st.booleans(),
    route=st.lists(st.sampled_from(["dict", "list"]), max_size=4).map(tuple),
)
_SHAPES = st.lists(
    st.tuples(st.sampled_from(["DATABASES", "CACHES", "STORAGES"]), _LEAVES),
    min_size=1,
    max_size=8,
)


@hypothesis_settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(shape=_SHAPES)
@example(
    shape=[
        ("CACHES", _Leaf("named", "ssl_keyfile", None, True, False, ())),
        ("CACHES", _Leaf("named", "ssl_ca_certs", None, False, True, ("dict", "list"))),
        ("DATABASES", _Leaf("decoy", "ssl_certfile", "required", True, False, ("dict",))),
        ("STORAGES", _Leaf("other", "sslkey", None, False, False, ("dict",))),
    ]
)
def test_every_file_an_options_credential_key_names_is_masked_and_nothing_else(
    tmp_path, monkeypatch, settings, shape
):
    """Over generated ``OPTIONS`` of ``DATABASES``, ``CACHES`` and ``STORAGES`` entries
    (nested dicts and lists to four levels; keys of redis-py, ``ssl``, libpq, MySQL and
    SFTP, any case, ``-`` or ``_``; values as ``str`` or ``Path``, relative to the working
    directory or absolute): every existing file under a credential key is among the paths
    the sandbox masks in a bound directory, with its copies; a file under another key, a
    directory, and a value that names no regular file (``"required"``, a number, ``None``,
    an empty string) are not."""
    root = Path(os.path.realpath(tmp_path)) / f"shape{len(list(tmp_path.iterdir()))}"
    root.mkdir()
    monkeypatch.chdir(root)
    named: list[Path] = []
    kept: list[Path] = []
    decoys: list[object] = []
    overrides: dict[str, Any] = {"DATABASES": dict(settings.DATABASES)}
    overrides["CACHES"] = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    overrides["STORAGES"] = dict(settings.STORAGES)
    for index, (setting, leaf) in enumerate(shape):
        file = root / f"file{index}.pem"
        if leaf.kind == "directory":
            file.mkdir()
        else:
            file.write_text("secret\n")
        given_as: object = file.name if leaf.relative else str(file)
        if leaf.as_path:
            given_as = Path(str(given_as))
        key, value = leaf.key, given_as
        # Round 26's names at the top of a database's ``OPTIONS`` are taken whatever they
        # hold (a file not written yet is guarded): no decoy there.
        by_name = setting == "DATABASES" and not leaf.route and key in bubblewrap.CREDENTIAL_OPTIONS
        if leaf.kind == "named":
            named.append(file)
            (root / f"{file.name}.bak").write_text("a copy\n")
        elif leaf.kind == "other":
            key = _OTHER_KEYS[index % len(_OTHER_KEYS)]
            kept.append(file)
        elif leaf.kind == "decoy":
            value = leaf.value
            if not by_name:
                decoys.append(value)
            kept.append(file)
        elif not by_name:
            kept.append(file)
        options: object = {key: value}
        for container in reversed(leaf.route):
            options = {"nested": options} if container == "dict" else [options]
        entry = {"OPTIONS": options if isinstance(options, dict) else {"pool": options}}
        if setting == "DATABASES":
            entry.update(ENGINE="django.db.backends.postgresql", NAME="x")
        elif setting == "CACHES":
            entry.update(BACKEND="django.core.cache.backends.redis.RedisCache")
        else:
            entry.update(BACKEND="storages.backends.sftpstorage.SFTPStorage")
        overrides[setting][f"entry{index}"] = entry
    overrides["WEBFETCH_PLUGIN_HIDDEN_PATHS"] = []
    overrides["MEDIA_ROOT"] = str(tmp_path / "media")  # not the working directory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding setting DATABASES ..."
        with override_settings(**overrides):
            hidden = bubblewrap.hidden_paths([str(root)], [])
            data = bubblewrap._site_data()
    for file in named:
        assert str(file) in hidden, (shape, file, hidden)
        assert str(root / f"{file.name}.bak") in hidden, (shape, file, hidden)  # its copy
    for file in kept:
        assert str(file) not in hidden, (shape, file, hidden)
    for value in decoys:
        if isinstance(value, str) and value and "\0" not in value:
            assert str(root / value) not in data, (shape, value, data)
    assert str(root) not in hidden, hidden


def test_this_apps_path_settings_are_site_data_and_decide_the_pooled_masks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """``WEBFETCH_LOG_FILES`` (each, relative or absolute) and ``WEBFETCH_CA_FILE`` are
    the site's data; ``WEBFETCH_PROJECT_ROOT`` is masked whole where it holds nothing the
    plugin process needs, as ``BASE_DIR``; a change of any of them changes
    ``site_inputs`` (a pooled process started under the old value gets no further call)."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "src"
    source.mkdir()
    for name in ("WEBFETCH_LOG_FILES", "WEBFETCH_CA_FILE", "WEBFETCH_PROJECT_ROOT"):
        assert name in bubblewrap.SITE_SETTINGS
    before = bubblewrap.site_inputs()
    settings.WEBFETCH_LOG_FILES = ["logs/access.log", tmp_path / "worker.log"]
    logs = bubblewrap.site_inputs()
    settings.WEBFETCH_CA_FILE = "ca.pem"
    ca = bubblewrap.site_inputs()
    settings.WEBFETCH_PROJECT_ROOT = str(source)
    assert len({before, logs, ca, bubblewrap.site_inputs()}) == 4
    data = bubblewrap._site_data()
    for name in ("logs/access.log", "worker.log", "ca.pem"):
        assert str(tmp_path / name) in data, (name, data)
    assert str(source) in bubblewrap._site_base([]), "the code tools' root is masked whole"
    assert str(source) not in bubblewrap._site_base([str(source / "plugin")])
