"""Landlock rules for hidden paths not there yet, and for links in a split directory.

Observed from inside the real sandbox with the codeprobe plugin
(``tests/plugins/probe_site``), as tests/plugins/test_issue30_attack26.py does.
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

_SECRET = "landlock-rules-the-sites-secret"


@pytest.fixture
def system_library_dir() -> Iterator[Path]:
    """A directory made under ``/usr/local/lib`` (a system library directory the sandbox
    binds whole: ``bubblewrap._system``), removed after the test."""
    if not os.path.isdir("/usr/local/lib") or os.path.islink("/usr/local/lib"):
        pytest.skip("no /usr/local/lib directory")
    top = tempfile.mkdtemp(prefix="webfetch-landlock-rules-", dir="/usr/local/lib")
    try:
        yield Path(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _open_up(top: Path) -> None:
    for path in [top, *sorted(top.rglob("*"))]:
        if path.is_symlink():
            continue
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def _pooled(probe: Any) -> None:
    """A plugin process started now, pooled, and handed the next call."""
    from django_webfetch.plugins.runtime import host

    assert probe("result = '1'").kind in ("text", "json")
    assert host.idle_processes() >= 1
    assert probe("result = '1'").kind in ("text", "json")  # the same process, kept
    assert host.idle_processes() >= 1


def test_a_listed_hidden_file_written_after_a_pooled_process_started_is_unreadable_in_it(
    probe: Any, system_library_dir: Path, settings: Any
) -> None:
    """A ``WEBFETCH_PLUGIN_HIDDEN_PATHS`` entry that does not exist when a plugin process
    starts is among the Landlock guards all the same (``bubblewrap._guards``): its
    directory is split into the entries it has then, so the file the deploy writes there
    later (an ``.env`` rendered at release time) is unreadable in the pooled process.

    History: issue 30, round 26, finding 1."""
    base = system_library_dir / "mysite"
    base.mkdir()
    (base / "other.txt").write_text("control\n")
    _open_up(system_library_dir)
    env = base / ".env"
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [str(env)]
    _pooled(probe)
    env.write_text(f"SECRET_KEY={_SECRET}\n")  # written by the deploy after the start
    _open_up(system_library_dir)
    assert os.path.realpath(env) in bubblewrap.hidden_paths(
        [os.path.realpath(system_library_dir)], []
    ), "a process started now masks it"
    seen = read_all(probe, [str(base)], _SECRET)
    assert str(base / "other.txt") in seen["read"], seen  # the control
    assert seen["leaked"] == [], f"the listed file is readable: {seen['leaked']}"


def test_a_listed_path_not_there_yet_is_a_guard_with_its_bytecode(
    system_library_dir: Path, settings: Any
) -> None:
    """Each listed path is a guard whether it exists or not, with where its bytecode would
    be written (``copies``' second list); an existing one too.

    History: issue 30, round 26, finding 1."""
    real = Path(os.path.realpath(system_library_dir))
    (real / "mysite").mkdir()
    (real / "mysite" / "there.py").write_text("X = 1\n")
    absent = real / "mysite" / "local_settings.py"
    deeper = real / "mysite" / "keys" / "signing.key"  # its directory not there either
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [
        str(absent),
        str(deeper),
        str(real / "mysite" / "there.py"),
    ]
    guards = bubblewrap._guards([str(real)], [])
    assert str(absent) in guards, guards
    assert str(real / "mysite" / "__pycache__" / "local_settings.") in guards, guards
    assert str(deeper) in guards, guards
    assert str(real / "mysite" / "there.py") in guards, guards
    outside = "/nonexistent-webfetch-dir/.env"  # under no bound directory: no guard
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [outside]
    assert outside not in bubblewrap._guards([str(real)], [])
