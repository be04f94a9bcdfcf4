"""Issue 30, round 26, findings 2 and 7 fixed: a pooled plugin process serves no call once
what decided its masks changed, however it changed, and every file the host writes is the
site's data (docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst, amended for
round 26).

* The masks are a function of the settings (``bubblewrap.site_inputs``) and of the
  listings of the directories read to compute them: each directory under a bind whose
  listing (or an entry's existence in it) decided them is recorded with its fingerprint
  (``st_dev``, ``st_ino``, ``st_mtime_ns``; ``bubblewrap.Reading``), read before it is
  listed; ``host.Pool.acquire`` ends an idle process whose fingerprints changed
  (``plugin_site_changed``).
* Every regular file the host holds open for writing (``bubblewrap.written_files``: a
  ``StreamHandler``'s file, ``stderr`` pointed at a log) is masked with its copies, and
  those under a bind are part of the ``Reading``.

Observed from inside the real sandbox with the codeprobe plugin (``tests/plugins/probe_site``)
reading a directory a system bind holds, and through ``bubblewrap`` for generated layouts.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.conftest import PROBE_SITE
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

_SECRET = "fix27a-the-sites-secret"


def _library_dir() -> str:
    """A directory made under ``/usr/local/lib`` (a system library directory the sandbox
    binds whole: ``bubblewrap._system``); the caller removes it."""
    if not os.path.isdir("/usr/local/lib") or os.path.islink("/usr/local/lib"):
        pytest.skip("no /usr/local/lib directory")
    return tempfile.mkdtemp(prefix="webfetch-fix27a-", dir="/usr/local/lib")


def _aged(top: Path) -> None:
    """Every directory of ``top`` last changed a minute ago: a fingerprint younger than
    ``bubblewrap.RECENT_NS`` matches nothing, which would make every check below hold."""
    for path in [top, *top.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            os.utime(path, (os.stat(path).st_atime, os.stat(path).st_mtime - 60))


def _spec() -> bubblewrap.SandboxSpec:
    """The codeprobe plugin's sandbox (its descriptors are never opened here)."""
    return bubblewrap.SandboxSpec(
        plugin_path=PROBE_SITE,
        top_level="webfetch_code_probe",
        rpc_fd=3,
        info_fd=4,
        seccomp_fd=5,
        scratch="/tmp/webfetch-plugin-fix27a",
    )


def _pooled(probe: Any) -> None:
    """A plugin process started now, pooled, and handed the next call."""
    from django_webfetch.plugins.runtime import host

    assert probe("result = '1'").kind in ("text", "json")
    assert host.idle_processes() >= 1
    assert probe("result = '1'").kind in ("text", "json")
    assert host.idle_processes() >= 1


def test_the_sites_package_installed_into_a_site_dir_after_a_pooled_process_started_is_unreadable(
    probe: Any,
    system_library_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    """History: issue 30, round 26, finding 2 (Medium).

    The site's package installed into a bound ``site-packages`` (``pip install .``) after
    a pooled process started, the settings, ``sys.path`` and working directory all
    unchanged: ``site-packages``' listing decided the masks, its fingerprint changed, so
    the pooled process is ended at checkout and the call runs under the masks of now,
    which hide the new copy (the settings module, ``SECRET_KEY`` and all)."""
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


@st.composite
def _layouts(draw: Any) -> dict[str, Any]:
    """Where the site keeps its code and data under a bound directory: its package in a
    bound ``site-packages`` or not, a log file, a media root, both or neither; and
    where (among the recorded directories under it) an entry is made after the start."""
    return {
        "installed": draw(st.booleans()),
        "log": draw(st.booleans()),
        "media": draw(st.booleans()),
        "pick": draw(st.integers(min_value=0, max_value=1 << 16)),
        "name": draw(st.sampled_from(["fix27a_site.bak", "fix27a_site-old", "new.txt", ".x"])),
        "directory": draw(st.booleans()),
    }


@hypothesis_settings(max_examples=25, deadline=None)
@given(layout=_layouts())
def test_an_entry_made_in_any_recorded_directory_changes_the_reading(
    layout: dict[str, Any],
) -> None:
    """History: issue 30, round 26, finding 2.  Over generated layouts of the site's code
    and data under a bound directory: the masks' ``Reading`` records the directories under
    a bind whose listings decided them, holds while nothing changes (the control), and
    changes once an entry (a file or a directory, of any name) is made in any of them (or
    one not there yet is made: a cache directory where a copy would be written), so
    ``host.Pool.acquire`` hands that process no call."""
    from django.test import override_settings

    top = Path(_library_dir())
    added: list[str] = []
    try:
        deps = top / "venv" / "lib" / "site-packages"
        deps.mkdir(parents=True)
        (deps / "fix27a_dep.py").write_text("")
        project = top / "project"
        package = (deps if layout["installed"] else project) / "fix27a_site"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "settings.py").write_text(f"SECRET_KEY = '{_SECRET}'\n")
        data = top / "data"
        data.mkdir()
        overrides: dict[str, Any] = {"WEBFETCH_PLUGIN_HIDDEN_PATHS": []}
        if layout["log"]:
            (data / "site.log").write_text("")
            handler = {"class": "logging.FileHandler", "filename": str(data / "site.log")}
            overrides["LOGGING"] = {"version": 1, "handlers": {"file": handler}}
        if layout["media"]:
            (data / "media").mkdir()
            overrides["MEDIA_ROOT"] = str(data / "media")
        open_up(top)
        _aged(top)
        added = [str(deps), str(project)]
        sys.path[:0] = added
        environ = os.environ.get("DJANGO_SETTINGS_MODULE")
        os.environ["DJANGO_SETTINGS_MODULE"] = "fix27a_site.settings"
        try:
            with override_settings(**overrides):
                reading = bubblewrap.prepared(_spec())[2]
                ours = sorted(d for d in reading.listings if d.startswith(str(top) + "/"))
                assert os.path.realpath(deps) in ours, sorted(reading.listings)
                assert reading.changed() is None  # the control: nothing changed
                where = Path(ours[layout["pick"] % len(ours)])
                where.mkdir(parents=True, exist_ok=True)  # one not there yet: made
                if layout["directory"]:
                    (where / layout["name"]).mkdir(exist_ok=True)
                else:
                    (where / layout["name"]).touch()
                assert reading.changed() is not None, where
        finally:
            if environ is None:
                del os.environ["DJANGO_SETTINGS_MODULE"]
            else:
                os.environ["DJANGO_SETTINGS_MODULE"] = environ
    finally:
        for entry in added:
            sys.path.remove(entry)
        shutil.rmtree(top, ignore_errors=True)


def test_a_directory_changed_within_the_timestamp_tick_matches_nothing(tmp_path: Path) -> None:
    """History: issue 30, round 26, finding 2.  The kernel stamps a directory's change with
    a coarse clock: a second entry made within the tick of a first one seen leaves its
    ``st_mtime_ns`` as it was.  A fingerprint taken within ``bubblewrap.RECENT_NS`` of the
    last change equals nothing (a process started then is not reused); an older one holds
    while the directory is unchanged, and a removed directory's changes too."""
    (tmp_path / "a").touch()
    assert bubblewrap._fingerprint(str(tmp_path)) != bubblewrap._fingerprint(str(tmp_path))
    _aged(tmp_path)
    before = bubblewrap._fingerprint(str(tmp_path))
    assert bubblewrap._fingerprint(str(tmp_path)) == before
    (tmp_path / "a").write_text("written, not listed\n")
    assert bubblewrap._fingerprint(str(tmp_path)) == before  # a file written: same listing
    (tmp_path / "a").rename(tmp_path / "b")
    assert bubblewrap._fingerprint(str(tmp_path)) != before
    gone = tmp_path / "gone"
    assert bubblewrap._fingerprint(str(gone)) == bubblewrap._fingerprint(str(gone))
    gone.mkdir()
    os.utime(gone, (0, 0))
    assert bubblewrap._fingerprint(str(gone)) != ("missing", 2)


def test_a_log_file_the_hosts_logging_writes_through_a_stream_handler_is_not_readable(
    probe: Any, system_library_dir: Path, settings: Any
) -> None:
    """History: issue 30, round 26, finding 7 (Low).

    A ``StreamHandler`` writing to a file (what ``stderr`` is under a process manager:
    ``nohup ... >> logs/server.log``, supervisord's ``stdout_logfile``, systemd's
    ``StandardError=append:``) is a file the host holds open for writing: the site's data,
    masked with its copies (``bubblewrap.written_files``), whatever handler or code opened
    it."""
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
        (logs / "server.log-20261206").write_text(f"rotated {_SECRET}\n")
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


def test_the_files_the_host_writes_are_those_open_for_writing_and_named(tmp_path: Path) -> None:
    """History: issue 30, round 26, finding 7.  ``written_files`` takes each regular file
    the host holds open for writing (``O_WRONLY``, ``O_RDWR``, ``O_APPEND``) by the name
    that still leads to it, and nothing else: not a file open for reading, a removed
    file (a plugin process's ``stderr`` file), one replaced since (a rotation by renaming:
    the new file at the name is another), a ``memfd`` (the filter programs), a socket, a
    pipe or a device."""
    import socket

    names = {mode: tmp_path / f"{mode.strip('+')}-{len(mode)}.log" for mode in ("w", "a", "r+")}
    for path in names.values():
        path.write_text("")
    read_only = tmp_path / "read.log"
    read_only.write_text("")
    removed = tmp_path / "removed.log"
    replaced = tmp_path / "replaced.log"
    held: list[Any] = [open(path, mode) for mode, path in names.items()]  # noqa: SIM115
    held.append(open(read_only))  # noqa: SIM115
    held.append(open(removed, "w"))  # noqa: SIM115
    removed.unlink()
    held.append(open(replaced, "a"))  # noqa: SIM115
    replaced.rename(tmp_path / "replaced.log.1")
    replaced.write_text("")
    fds = [os.memfd_create("fix27a"), *os.pipe(), os.open("/dev/null", os.O_WRONLY)]
    pair = socket.socketpair()
    try:
        found = bubblewrap.written_files()
        for path in names.values():
            assert str(path) in found, (path, found)
        assert str(tmp_path / "replaced.log.1") in found  # where it is now
        for path in (read_only, removed, replaced):
            assert str(path) not in found, (path, found)
        assert not [p for p in found if not p.startswith("/") or p.startswith("/dev/")], found
    finally:
        for fh in held:
            fh.close()
        for fd in fds:
            os.close(fd)
        pair[0].close()
        pair[1].close()
    assert not [p for p in bubblewrap.written_files() if p.startswith(str(tmp_path))]


def test_a_file_the_host_writes_under_a_bind_is_masked_and_decides_the_pooled_masks(
    system_library_dir: Path, settings: Any
) -> None:
    """History: issue 30, round 26, finding 7.  A file the host holds open for writing
    under a bound directory is masked with its copies (``<name>.*``, ``<name>-*``); one
    opened (or closed) after a process started changes its ``Reading``, so the pool hands
    it no call (``host.Pool.acquire``), and one outside every bind changes nothing."""
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    logs = system_library_dir / "logs"
    logs.mkdir()
    log = logs / "worker.log"
    for name in ("worker.log.1", "worker.log-20261206.gz"):
        (logs / name).write_text("")
    _aged(system_library_dir)
    real = os.path.realpath(logs)
    reading = bubblewrap.prepared(_spec())[2]
    assert reading.changed() is None  # the control
    with tempfile.TemporaryFile(mode="w") as unnamed, open(log, "a") as stream:
        assert unnamed.writable() and stream.writable()
        assert reading.changed() == "the files the host writes changed"  # under a bind
        hidden = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
        for name in ("worker.log", "worker.log.1", "worker.log-20261206.gz"):
            assert os.path.join(real, name) in hidden, (name, hidden)
        _aged(system_library_dir)
        now = bubblewrap.prepared(_spec())[2]
        assert now.written == (os.path.join(real, "worker.log"),)
        assert now.changed() is None
    assert now.changed() == "the files the host writes changed"  # closed: masks differ
