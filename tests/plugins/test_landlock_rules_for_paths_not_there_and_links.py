"""Landlock rules for hidden paths not there yet, and for links in a split directory.

Observed from inside the real sandbox with the codeprobe plugin
(``tests/plugins/probe_site``), as tests/plugins/test_issue30_attack26.py does.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all

pytestmark = pytest.mark.django_db

_SECRET = "landlock-rules-the-sites-secret"


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
    open_up(system_library_dir)
    env = base / ".env"
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [str(env)]
    _pooled(probe)
    env.write_text(f"SECRET_KEY={_SECRET}\n")  # written by the deploy after the start
    open_up(system_library_dir)
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


_READ_LATER = """\
import json, sys
seen = {'same_process': '__landlock_rules__' in sys.modules}
sys.modules.setdefault('__landlock_rules__', sys)
for path in %r:
    try:
        with open(path, 'rb') as fh:
            seen[path] = %r in fh.read()
    except OSError as exc:
        seen[path] = type(exc).__name__
result = json.dumps(seen)
"""

#: Waits (a condition, with a far safety net) until every path of the first list exists,
#: then reads as ``_READ_LATER``.
_WAIT_THEN_READ = (
    """\
import os, time
for _ in range(1500):
    if all(os.path.lexists(path) for path in %r):
        break
    time.sleep(0.01)
"""
    + _READ_LATER
)


def test_data_written_after_the_start_beside_a_link_to_its_directory_is_unreadable(
    probe: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """With Landlock, data written after a pooled process started (a rotated log, a
    SQLite journal) is unreadable in it only because the guest splits each directory on
    the way to a hidden path into one rule per entry (``guest._excluding``).  An entry of
    such a directory that is a symbolic link (a ``log -> logs`` kept for an old path, a
    deploy's ``shared`` link) is not hidden (hidden paths are resolved) and gets a read
    rule, and ``guest._allow`` opens it with ``O_PATH`` *following* the link: the rule
    lands on the log directory itself, undoing its split.  After a rotation (``django.log``
    renamed to ``django.log.1``: the mask follows the renamed file; a new ``django.log``
    written at the masked name, which no mount covers now) the new log is readable
    through its own path; without the link it is not
    (tests/plugins/test_sandbox_masks_the_sites_data.py::test_data_written_after_the_process_started_is_unreadable_with_landlock).

    Such a link now gets no rule at all (a rule on its target would undo the split): the
    new log stays unreadable in the pooled process.

    History: issue 30, round 26, finding 6."""
    from django_webfetch.plugins.runtime import host
    from django_webfetch.plugins.runtime.host import shutdown

    packages = tmp_path / "lib" / "site-packages"
    logs = packages / "logs"
    logs.mkdir(parents=True)
    log = logs / "django.log"
    log.write_text(f"{_SECRET}-today\n")
    (packages / "log").symlink_to("logs")  # the old name, kept as a link
    monkeypatch.syspath_prepend(str(packages))
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    settings.LOGGING = {
        "version": 1,
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(log)}},
    }
    open_up(tmp_path)
    paths = [str(log), f"{log}.1"]
    # Changed a minute ago: a fingerprint younger than ``bubblewrap.RECENT_NS`` matches
    # nothing, and the pooled process would not be handed the second call.
    for path in [tmp_path, *tmp_path.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            os.utime(path, (time.time() - 60, time.time() - 60))
    done = threading.Event()

    def rotate_once_taken() -> None:
        # Once the pooled process is taken for the second call (no idle one left): a
        # change made while it is idle ends it at checkout (round 26, finding 2), so the
        # rotation happens while its call runs, and the call reads then.
        while host.idle_processes() and not done.wait(0.01):
            pass
        if done.is_set():
            return
        os.replace(log, f"{log}.1")  # the rotation
        log.write_text(f"{_SECRET}-after-rotation\n")
        open_up(tmp_path)

    try:
        before = json.loads(
            json.loads(probe(_READ_LATER % (paths, _SECRET.encode())).text)["result"]
        )
        assert host.idle_processes() == 1
        writer = threading.Thread(target=rotate_once_taken)
        writer.start()
        try:
            code = _WAIT_THEN_READ % (paths, paths, _SECRET.encode())
            after = json.loads(json.loads(probe(code).text)["result"])
        finally:
            done.set()
            writer.join()
    finally:
        shutdown()
    assert before["same_process"] is False and after["same_process"] is True, (before, after)
    assert before[str(log)] is not True, before  # masked at the start
    read = [path for path in paths if after.get(path) is True]
    assert read == [], f"rotated logs readable in the pooled process: {read} ({after})"


def test_no_read_rule_lands_on_a_split_directory_through_a_link(tmp_path_factory):
    """Property, over generated layouts: links in the split directories (to the hidden
    path's directory, to its parent, to the root, to a file beside it, to another link,
    relative or absolute, dangling): no read rule, followed as ``_allow`` opens it, is or
    holds a hidden path (so nothing written later beside one is readable), and every file
    not hidden stays under a rule through its own name.

    History: issue 30, round 26, finding 6."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from django_webfetch.plugins.runtime.guest import _excluding

    dirs = ["", "a", "a/b", "a/b/c", "d"]
    targets = st.sampled_from([*dirs, "a/b/c/f", "a/b/x", "missing", "l0", "l1"])
    links = st.lists(
        st.tuples(st.sampled_from(dirs), targets, st.booleans()), min_size=1, max_size=4
    )
    hiddens = st.sampled_from(["a/b/c/f", "a/b/c", "a/b/new.env", "a/b/c/later/x"])

    def under(path: str, top: str) -> bool:
        return path == top or path.startswith(top.rstrip("/") + "/")

    @settings(max_examples=120, deadline=None)
    @given(links, st.lists(hiddens, min_size=1, max_size=2))
    def check(layout, picks):
        root = os.path.realpath(tmp_path_factory.mktemp("links"))
        for d in dirs:
            os.makedirs(os.path.join(root, d), exist_ok=True)
            with open(os.path.join(root, d, "f"), "w") as fh:
                fh.write("x")
        with open(os.path.join(root, "a/b/x"), "w") as fh:
            fh.write("x")
        for i, (where, target, absolute) in enumerate(layout):
            link = os.path.join(root, where, f"l{i}")
            dest = (
                os.path.join(root, target)
                if absolute
                else os.path.relpath(os.path.join(root, target), os.path.join(root, where))
            )
            if not os.path.lexists(link):
                os.symlink(dest, link)
        hidden = [os.path.join(root, pick) for pick in picks]
        read, listed = _excluding([root], hidden)
        for rule in read:
            landed = os.path.realpath(rule)
            assert not any(under(h, landed) for h in hidden), (rule, landed, hidden)
        for top, _names, files in os.walk(root):
            for name in files:
                path = os.path.join(top, name)
                if os.path.islink(path) or any(under(path, h) for h in hidden):
                    continue
                assert any(under(path, os.path.realpath(r)) for r in read), (path, read)

    check()
