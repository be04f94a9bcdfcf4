"""A path the sandbox masks that goes away while the sandbox is built (a log rotated, a
file the host wrote removed, between the reading of the site and bwrap's mounts) fails no
call: bwrap cannot make the mask's mount point in a read-only bind ("Can't create file
at ...: Read-only file system"), so the host builds the sandbox again from a new reading
(``host.Worker.started``, reason ``mount_point_gone``); twice in a row fails the call with
that reason, and never starts a process with the path unmasked.

Observed with the real sandbox: the codeprobe plugin (``tests/plugins/probe_site``) reads a
directory a system bind holds (``system_library_dir``), where a log the host writes sits
beside its rotated copy (masked with it: decision 0060); the copy goes away just before
bwrap starts (the host's spawner, the one place every sandbox is started from)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from django_webfetch.plugins.runtime import bubblewrap, host
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

_SECRET = "s16-a-rotated-logs-secret"


class _Site:
    """``base/logs/server.log`` held open for writing by the host's logging (site data),
    its rotated copy ``server.log.1``, and a control file the plugin may read."""

    def __init__(self, top: Path) -> None:
        self.base = top / "mysite"
        self.logs = self.base / "logs"
        self.logs.mkdir(parents=True)
        self.rotated = self.logs / "server.log.1"
        self.control = self.base / "notes.txt"
        self.control.write_text("control\n")
        self.stream = open(self.logs / "server.log", "a")  # noqa: SIM115
        self.handler = logging.StreamHandler(self.stream)
        self.logger = logging.getLogger("s16.rotated")
        self.logger.addHandler(self.handler)
        self.logger.error("session key %s", _SECRET)
        self.handler.flush()
        self.rotate()

    def rotate(self) -> None:
        self.rotated.write_text(f"yesterday's session key {_SECRET}\n")

    def close(self) -> None:
        self.logger.removeHandler(self.handler)
        self.handler.close()
        self.stream.close()


@pytest.fixture
def site(system_library_dir: Path, settings: Any) -> Any:
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    made = _Site(system_library_dir)
    open_up(system_library_dir)
    yield made
    made.close()


def _spawns(monkeypatch: pytest.MonkeyPatch, before: Any) -> list[list[str]]:
    """Every bwrap command the host starts from now on, each after ``before()`` ran (what
    changes on the machine between the host's reading and bwrap's mounts)."""
    started: list[list[str]] = []
    real = host._spawner.popen

    def popen(argv: list[str], **kwargs: Any) -> Any:
        before()
        started.append(argv)
        return real(argv, **kwargs)

    monkeypatch.setattr(host._spawner, "popen", popen)
    return started


def test_a_rotated_log_removed_while_the_sandbox_is_built_fails_no_call(
    probe: Any, site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy is there when the host reads the site, gone when bwrap mounts (once):
    the second build, from a new reading, serves the call, and nothing of the log is read."""
    host.shutdown()  # no pooled process: this call starts one
    gone: list[bool] = []

    def remove_once() -> None:
        if not gone:
            site.rotated.unlink()
            gone.append(True)

    started = _spawns(monkeypatch, remove_once)
    seen = read_all(probe, [str(site.base)], _SECRET)
    assert len(started) == 2, started  # built twice: the first bwrap gave up
    assert str(site.control) in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"the host's log is readable: {seen['leaked']}"


def test_a_masked_path_that_goes_away_at_every_build_fails_the_call_with_its_reason(
    probe: Any, site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rotated at every build (there when read, gone when mounted): the call fails with
    ``mount_point_gone`` after two builds, and no sandbox ever ran with the copy unmasked;
    with the machine calm again, the next call is served."""
    host.shutdown()
    real_prepared = bubblewrap.prepared
    rotating = [True]

    def prepared(spec: Any) -> Any:
        if rotating and not site.rotated.exists():
            site.rotate()  # the next rotation: there again when the site is read
        return real_prepared(spec)

    def remove() -> None:
        if rotating:
            site.rotated.unlink(missing_ok=True)

    monkeypatch.setattr(bubblewrap, "prepared", prepared)
    started = _spawns(monkeypatch, remove)
    with pytest.raises(host.IsolationUnavailable) as failed:
        probe("result = 'never'")
    assert host.reason_of(failed.value.detail) == "mount_point_gone", failed.value.detail
    assert "read-only file system" in failed.value.detail.lower(), failed.value.detail
    assert failed.value.code == "plugin_isolation_unavailable"
    assert len(started) == 2, started
    assert host.idle_processes() == 0
    rotating.clear()
    site.rotate()
    seen = read_all(probe, [str(site.base)], _SECRET)
    assert str(site.control) in seen["read"] and seen["leaked"] == [], seen


def test_the_reason_is_read_from_what_bwrap_says() -> None:
    """bwrap's words for a mount point it could not make, file or directory, in any case;
    other failures keep their reasons."""
    for said in (
        "bwrap: Can't create file at /usr/local/lib/x/server.log.1: Read-only file system",
        "bwrap: Can't mkdir /srv/site/media-old: Read-only file system",
        "BWRAP: CAN'T CREATE FILE AT /x: No such file or directory",
    ):
        assert bubblewrap.reason_of(said) == "mount_point_gone", said
    assert bubblewrap.reason_of("bwrap: setting up uid map: Permission denied") == (
        "userns_unavailable"
    )
    assert bubblewrap.reason_of("bwrap: Can't find source path /x") == "sandbox_failed"
    assert "mount_point_gone" in bubblewrap.REASONS
