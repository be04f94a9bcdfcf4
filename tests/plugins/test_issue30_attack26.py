"""Issue 30, outside attack round 26: what still gets through the plugin sandbox.

Each test here is a finding: it fails on the code it was written against (that is the
proof) and names what gets through.  Observed from inside the real sandbox with the
codeprobe plugin (``tests/plugins/probe_site``), as
tests/plugins/test_the_default_media_root_rotated_logs_and_pooled_masks.py does.
Finding 3's tests, fixed, are in
tests/plugins/test_dated_copies_of_data_and_package_directories.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

_SECRET = "attack26-the-sites-secret"


def _pooled(probe: Any) -> None:
    """A plugin process started now, pooled, and handed the next call."""
    from django_webfetch.plugins.runtime import host

    assert probe("result = '1'").kind in ("text", "json")
    assert host.idle_processes() >= 1
    assert probe("result = '1'").kind in ("text", "json")  # the same process, kept
    assert host.idle_processes() >= 1


def test_the_sites_package_installed_into_a_site_dir_after_a_pooled_process_started_is_unreadable(
    probe: Any,
    system_library_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    """Severity: Medium.

    Route: the site runs its project from a directory the sandbox never binds, and its
    dependencies' ``site-packages`` (bound whole) holds no copy of it when a plugin process
    starts: nothing there is hidden, so the directory has one whole Landlock read rule.
    A release then installs the project into that ``site-packages`` (``pip install .``,
    as the container builds do) before the server restarts.  ``_places`` finds that copy
    for a process started now (the control: it is masked), but the pooled one was
    started under masks computed without it and ``site_inputs`` is unchanged (the same
    settings, ``sys.path`` and working directory): it is handed the next call and reads the
    settings module, secrets and all.

    Gain: the site's settings (``SECRET_KEY``, credentials) to an untrusted plugin pooled
    across a deploy."""
    project = tmp_path / "project"
    package = project / "attack26_site"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(f"SECRET_KEY = '{_SECRET}'\n")
    deps = system_library_dir / "venv" / "lib" / "site-packages"
    deps.mkdir(parents=True)
    (deps / "attack26_control.txt").write_text("control\n")
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(deps))
    monkeypatch.syspath_prepend(str(project))
    assert os.path.realpath(deps) in bubblewrap.site_dirs()
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack26_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    _pooled(probe)
    shutil.copytree(package, deps / "attack26_site")  # the release installs it
    open_up(system_library_dir)
    assert os.path.realpath(deps / "attack26_site") in bubblewrap.hidden_paths(
        [os.path.realpath(system_library_dir)], []
    ), "a process started now masks it"
    seen = read_all(probe, [str(deps)], _SECRET)
    assert str(deps / "attack26_control.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"the site's settings are readable: {seen['leaked']}"


def test_a_log_file_the_hosts_logging_writes_through_a_stream_handler_is_not_readable(
    probe: Any, system_library_dir: Path, settings: Any
) -> None:
    """Severity: Low.

    Route: ``bubblewrap._logging_files`` takes the files of ``LOGGING``'s ``filename``
    keys and of live ``logging.FileHandler`` objects only.  A ``StreamHandler`` writing to
    a file is a log file of the host's ``logging`` all the same: Django's ``console``
    handlers write to ``sys.stderr``, which a process manager points at a file
    (``nohup ... >> logs/server.log 2>&1``, supervisord's ``stdout_logfile``, systemd's
    ``StandardError=append:``), and code that opens its own stream does the same.  Neither
    is masked, nor is its rotated copy.

    Gain: the site's error log (tracebacks with request data, tokens) to any untrusted
    plugin, where the project's log directory lies in a bound directory."""
    import logging

    base = system_library_dir / "mysite"
    logs = base / "logs"
    logs.mkdir(parents=True)
    path = logs / "server.log"
    stream = open(path, "a")  # noqa: SIM115  # what stderr is under the process manager
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("attack26.server")
    logger.addHandler(handler)
    try:
        logger.error("password reset token %s", _SECRET)
        handler.flush()
        (base / "attack26_other.txt").write_text("control\n")
        open_up(system_library_dir)
        settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
        seen = read_all(probe, [str(base)], _SECRET)
    finally:
        logger.removeHandler(handler)
        handler.close()
        stream.close()
    assert str(base / "attack26_other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"the host's log file is readable: {seen['leaked']}"
