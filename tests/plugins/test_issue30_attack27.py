"""Issue 30, round 27 (outside attack): what gets through the plugin sandbox.

Each test fails on the code it was written against (that is the proof of its finding);
its docstring gives the severity, the route and what an attacker gains.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all, wheel

pytestmark = pytest.mark.django_db

_SECRET = "attack27-the-sites-secret"


def test_a_plugin_dependency_whose_record_names_a_copy_unmasks_the_copy(
    probe: Any,
    system_library_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    """Medium-low.  Route: decision 0058 amended for round 26 keeps visible every sibling
    of the site's package that another distribution's ``RECORD`` lists
    (``bubblewrap._directory_entries``/``_installed``), and a ``RECORD`` is whatever the
    wheel pip installed holds.  A plugin (or a dependency it declares, which the operator
    installs into ``site-packages``) ships one harmless file under the name of the copy
    an operator keeps of the previous release (``mysite_old/__init__.py``...); pip writes
    it into the existing copy and lists ``mysite_old/...`` in the plugin's ``RECORD``:
    the whole copy, ``settings.py`` with ``SECRET_KEY`` included, is then shown in every
    plugin process.  Gain: the site's settings, secrets and code through any backup copy
    whose name the wheel guessed (a wheel may ship many names).  Suggested fix: an entry
    is another distribution's only when that distribution's ``RECORD`` accounts for every
    file in it (or: never keep visible what holds a copy of a masked file)."""
    deps = system_library_dir / "venv" / "lib" / "site-packages"
    deps.mkdir(parents=True)
    settings_text = f"SECRET_KEY = '{_SECRET}'\n"
    wheel(deps, "attack27-site", {}, {"attack27_site/__init__.py": "",
                                      "attack27_site/settings.py": settings_text})  # fmt: skip
    shutil.copytree(deps / "attack27_site", deps / "attack27_site_old")
    # The plugin's dependency, installed over the copy by pip: one marker file there.
    wheel(deps, "attack27-helper", {}, {"attack27_helper/__init__.py": "",
                                        "attack27_site_old/zz_marker.py": ""})  # fmt: skip
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(deps))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack27_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    seen = read_all(probe, [str(deps)], _SECRET)
    assert str(deps / "attack27_helper" / "__init__.py") in seen["read"], seen  # control
    assert str(deps / "attack27_site" / "settings.py") not in seen["read"], seen
    assert seen["leaked"] == [], f"the site's settings are readable: {seen['leaked']}"


def test_a_copy_dated_without_a_separator_beside_the_sites_package_is_shown(
    system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Low.  Route: a directory's copies are its siblings holding its name as a whole word
    (``bubblewrap._of_directory``): a letter or digit right after the name makes a
    neighbour, never a copy.  The copy a deploy script makes with the date appended
    directly (``cp -a mysite mysite$(date +%F)``: ``mysite2026-12-07``;
    ``mysite$(date +%Y%m%d)``; a versioned ``mysitev41``) lies in the bound package
    directory unmasked, ``settings.py`` with ``SECRET_KEY`` in it (this sits on the rule's
    stated boundary, ``media2`` being a neighbour; a date or a version is the copy the
    amendment meant to catch).  Gain: the site's
    settings and code from an ordinary backup naming.  Suggested fix: a digit run of a
    date or a version (``\\d{4,}``, ``v\\d+``) after the name makes a copy too, or mask
    every sibling holding a file identical to a masked one (its ``settings.py``)."""
    package = system_library_dir / "attack27_site"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(f"SECRET_KEY = '{_SECRET}'\n")
    names = ["attack27_site2026-12-07", "attack27_site20261207", "attack27_siteOLD"]
    for name in names:
        shutil.copytree(package, system_library_dir / name)
    monkeypatch.syspath_prepend(str(system_library_dir))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack27_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    hidden = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    real = os.path.realpath(system_library_dir)
    assert os.path.join(real, "attack27_site") in hidden, hidden  # the control
    shown = [name for name in names if os.path.join(real, name) not in hidden]
    assert shown == [], f"copies of the site's package shown in the sandbox: {shown}"


def test_the_redis_cache_keys_and_the_log_tools_files_the_settings_name_are_readable(
    probe: Any, system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Medium-low.  Route: round 26 (finding 5) masked the credential files of
    ``DATABASES[...]["OPTIONS"]`` and ``EMAIL_SSL_*`` only (``bubblewrap.CREDENTIAL_OPTIONS``,
    ``_site_data``); ``_site_data`` reads a cache's ``LOCATION`` but never its ``OPTIONS``,
    and never this project's own ``WEBFETCH_LOG_FILES``.  Decision 0060 leaves out only
    "paths other applications' settings name" (Celery's, django-storages'); these are
    Django's own cache backend's and this app's own setting.  Beside a project whose
    ``BASE_DIR`` is not masked whole (the premise of the round-26 finding) they stay
    readable: the TLS client key and certificate of Django's ``RedisCache``
    (``CACHES[...]["OPTIONS"]["ssl_keyfile"]``/``ssl_certfile``, which redis-py opens: the
    session and cache store), and the log files the site points its log tools at
    (``WEBFETCH_LOG_FILES``: request URLs with their tokens, user data), written by
    another process (gunicorn's access log, a worker's), so neither ``LOGGING`` nor
    ``written_files`` names them; neither setting decides the pooled masks
    (``SITE_SETTINGS`` has no ``WEBFETCH_LOG_FILES``).  Gain: the Redis client key (the
    sessions in the cache) and the site's logs.  Suggested fix: read every path-valued
    entry of each ``CACHES`` entry's ``OPTIONS`` (walked, any depth) as credentials, add
    ``WEBFETCH_LOG_FILES`` to ``_site_data`` (with its rotated copies) and to
    ``SITE_SETTINGS``."""
    base = system_library_dir / "mysite"
    base.mkdir()
    secrets = {
        "redis-client.key": f"-----BEGIN PRIVATE KEY-----\n{_SECRET}-redis-key\n",
        "redis-client.crt": f"-----BEGIN CERTIFICATE-----\n{_SECRET}-redis-cert\n",
        "webfetch.log": f"GET /reset?token={_SECRET}-log\n",
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
        },
    }
    settings.CACHES = caches
    settings.WEBFETCH_LOG_FILES = [str(base / "webfetch.log")]
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "attack27_other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"files the settings name are readable: {seen['leaked']}"
