"""Issue 30, round 22: an outside attack on the plugin sandbox and its pool.

Each test failed on the code it was written against (d950f7b); its docstring keeps the
severity, the route and the gain.  The tests run a hostile plugin (or the probe) in its
real sandbox and observe from the host side.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def _project_in_site_packages(tmp_path: Path, monkeypatch: Any, settings: Any) -> Path:
    """A project installed into a ``site-packages`` bound in the sandbox (``BASE_DIR`` is
    that directory, so it is not masked whole: decision 0060), its SQLite database beside
    it holding the secret; the directory is ``DATABASES``' ``NAME``'s."""
    from django_webfetch.plugins.runtime import bubblewrap
    from tests.plugins.test_sandbox_site_data_venv_and_pooled_queues import _SECRET

    base = tmp_path / "lib" / "site-packages"
    package = base / "attack22_site"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text("SECRET = None\n")
    with sqlite3.connect(base / "db.sqlite3") as db:
        db.execute("CREATE TABLE django_session (session_key TEXT, session_data TEXT)")
        db.execute("INSERT INTO django_session VALUES (?, ?)", (_SECRET, "{}"))
    db.close()
    (base / "attack22_other.py").write_text("VALUE = 1\n")  # the control: readable
    monkeypatch.syspath_prepend(str(base))
    assert os.path.realpath(base) in bubblewrap.site_dirs()
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack22_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.BASE_DIR = base
    monkeypatch.setitem(
        settings.DATABASES,
        "attack22",
        {"ENGINE": "django.db.backends.sqlite3", "NAME": base / "db.sqlite3"},
    )
    return base


def test_one_plugins_locks_make_every_other_plugins_processes_single_use(tmp_path, caplog):
    """Severity: Medium (availability of every plugin of the site, and of every other site
    on the machine running this code).  Route: round 21's fix made "cannot tell" fail
    closed: ``host._locks`` reads at most ``host.LOCKS_READ`` (256 KiB) of
    ``/proc/locks``, and past it ``Worker.holds_locks`` says the process holds locks, so
    it is not pooled (``plugin_holds_locks``).  But ``/proc/locks`` is the whole
    machine's table, not the process's: any process that holds some 5,000 byte-range
    locks (an untrusted plugin's call, on files of its own ``/tmp``: ``F_OFD_SETLK`` is
    allowed and nothing bounds how many a process takes; each line is ~50 bytes) makes
    the table longer than the bound, and then *no* plugin process of any plugin is pooled,
    however well it behaves: each of its calls pays a new sandbox (bwrap, namespaces,
    the interpreter, the plugin's import) in the site's worker.  The attacker holds its
    locks for the wall time of each of its calls (here 10,000 locks for a few seconds),
    and keeps them there by calling again.  Gain: one untrusted plugin turns the pool off
    for the whole site (every call cold: hundreds of ms of CPU each instead of a warm
    call), while its own process stays within every limit.  Expected: a process that
    holds no lock is pooled whatever other processes hold (``/proc/locks`` not consulted,
    or only for the process's own mapped inodes: e.g. ``F_OFD_GETLK`` through
    ``/proc/<pid>/map_files``, or any file-backed mapping the call added refusing the
    process)."""
    import json
    import logging
    import threading
    import time

    from django_webfetch.plugins.runtime import host
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin
    from tests.plugins.test_pool_refuses_locks_and_masks_linked_data_copies import (
        _BENIGN,
        _LOCKS_IN_MAPPINGS,
        _all_lock_lines,
    )

    attacker = _plugin(tmp_path / "a", "webfetch_a22locks", "a22locks", _LOCKS_IN_MAPPINGS,
                       {"idle": "idle", "wait": "hold_and_wait"})  # fmt: skip
    benign = _plugin(tmp_path / "b", "webfetch_a22benign", "a22benign", _BENIGN,
                     {"ping": "ping"})  # fmt: skip
    limits = host.Limits(30, 60, 256 << 20, 1 << 16, 5, 1)
    key = ("a22benign", 1)

    def call(origin: Any, key: Any, name: str, tool: str, arguments: dict[str, Any]) -> Any:
        message = {"tool": tool, "arguments": arguments, "config": {}, "plugin": name,
                   "alias": name, "reference": name}  # fmt: skip
        outcome = host.execute(origin, key, message, None, limits=limits)
        assert outcome.kind in ("text", "json"), outcome
        return outcome.text

    caplog.set_level(logging.INFO, logger="django_webfetch.plugins")
    host.shutdown()
    baseline = _all_lock_lines()
    done: list[Any] = []
    attack = threading.Thread(
        target=lambda: done.append(
            call(
                attacker, ("a22locks", "wait"), "a22locks", "wait", {"count": 10_000, "seconds": 6}
            )
        ),  # fmt: skip
        daemon=True,
    )
    try:
        assert call(benign, key, "a22benign", "ping", {}) == "pong"
        assert len(host._pool._idle.get(key, [])) == 1, "the control: the benign one is pooled"
        attack.start()
        for _ in range(600):
            if _all_lock_lines() >= baseline + 10_000:
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the attacker took no locks: {done}")
        caplog.clear()
        assert call(benign, key, "a22benign", "ping", {}) == "pong"
        recycled = [r.getMessage() for r in caplog.records if host.HOLDS_LOCKS in r.getMessage()]
        assert len(host._pool._idle.get(key, [])) == 1 and not recycled, (
            "a well-behaved plugin's process, holding no lock, was not pooled because "
            f"another plugin holds locks: {recycled}"
        )
    finally:
        attack.join(90)
        host.shutdown()
    assert json.loads(done[0])["taken"] == 10_000, done


def test_data_named_through_a_linked_directory_and_dotdot_is_readable(
    probe, tmp_path, monkeypatch, settings
):
    """Severity: Medium (the site's database and uploads; needs a data setting written
    with ``..`` after a directory that is a link, as a release layout gives: ``BASE_DIR``
    ``/usr/local/lib/app/current`` linking to ``releases/<date>``, built without
    ``resolve()`` as Django's template did before 3.1 (``os.path.dirname(os.path.abspath
    (__file__))``), and the data kept beside the releases: ``os.path.join(BASE_DIR, '..',
    'db.sqlite3')``, ``SESSION_FILE_PATH = os.path.join(BASE_DIR, '..', 'sessions')``).
    Route:
    ``bubblewrap._path_of`` makes each data setting absolute with ``os.path.abspath``,
    which drops ``link/..`` as text; the kernel (and SQLite, and the storage) walk the link
    first, then its parent.  So the host masks ``<lib>/db.sqlite3`` and ``<lib>/sessions``
    (which do not exist: only Landlock guards), while the data the site uses,
    ``<lib>/releases/db.sqlite3`` and ``<lib>/releases/sessions``, is in the bound
    directory, under no mask; ``BASE_DIR`` (resolved: ``releases/r1``) is masked whole,
    not its parent.  (``MEDIA_ROOT`` and ``EMAIL_FILE_PATH`` are opened through
    ``abspath`` by Django too, so they are where the host looks.)  Gain: an untrusted
    plugin reads the site's whole database and every session.
    Expected: data paths resolved as the kernel resolves them (``os.path.realpath`` of the
    path as given, never ``abspath`` first), and the lexical form kept only as a second
    name."""
    from tests.plugins.test_sandbox_site_data_venv_and_pooled_queues import (
        _SECRET,
        _open_up,
        _read_all,
    )

    base = _project_in_site_packages(tmp_path, monkeypatch, settings)
    os.remove(base / "db.sqlite3")
    release = base / "releases" / "r1"
    release.mkdir(parents=True)
    (release / "manage.py").write_text("")
    (base / "current").symlink_to(release)
    with sqlite3.connect(base / "releases" / "db.sqlite3") as db:
        db.execute("CREATE TABLE django_session (session_key TEXT, session_data TEXT)")
        db.execute("INSERT INTO django_session VALUES (?, ?)", (_SECRET, "{}"))
    db.close()
    (base / "releases" / "sessions").mkdir()
    (base / "releases" / "sessions" / "sessionidk3y").write_text(f"{{'token': '{_SECRET}'}}")
    here = os.path.join(str(base / "current"))
    settings.BASE_DIR = here
    settings.SESSION_FILE_PATH = os.path.join(here, "..", "sessions")
    settings.DATABASES["attack22"]["NAME"] = os.path.join(here, "..", "db.sqlite3")
    # The site opens what the kernel resolves (the control).
    with sqlite3.connect(settings.DATABASES["attack22"]["NAME"]) as db:
        assert db.execute("SELECT session_key FROM django_session").fetchone() == (_SECRET,)
    db.close()
    # django.contrib.sessions.backends.file joins SESSION_FILE_PATH and opens it as given.
    assert os.path.samefile(settings.SESSION_FILE_PATH, base / "releases" / "sessions")
    _open_up(tmp_path)
    seen = _read_all(probe, [str(base)])
    assert str(base / "attack22_other.py") in seen["read"], seen  # the control: bound
    assert str(release / "manage.py") not in seen["read"], seen  # the control: masked
    assert seen["leaked"] == [], f"the site's data is readable: {seen['leaked']}"
