"""Issue 30, sixth outside attack (session 6), findings 1, 2, 4, 5 and 5b: what the fixes
add beyond the attacker's own tests (tests/plugins/test_hostile_plugin_at_run_time.py).

- a uid is never handed out while a process runs with it, whatever its lock says (the lock
  dies with its host: finding 1's last step), dumpable or not;
- ``WEBFETCH_PLUGIN_HIDDEN_PATHS`` masks what it names in the real sandbox (a directory
  and a single file), never what the guest needs (finding 2);
- the setting is checked.

Everything runs against the real lock file, the real ``/proc`` and the real sandbox.
"""

from __future__ import annotations

import os
import random
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from django_webfetch.plugins.runtime import bubblewrap, identity
from django_webfetch.plugins.runtime.host import capabilities

pytestmark = pytest.mark.django_db

needs_sandbox = pytest.mark.skipif(
    not capabilities().get("isolated"), reason="the plugin sandbox cannot be built here"
)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the lock file is root's; setuid")

#: Far from ``identity.DEFAULT_RANGE``, so the plugin processes other tests start never
#: take these uids: (first uid of this test's two, ...).
_OWN_RANGE = (2_100_000_000, 40_000_000)


def _spare_uids() -> int:
    """The first of two consecutive uids no process runs with and no lock holds."""
    for _ in range(100):
        first = _OWN_RANGE[0] + 2 * random.randrange(_OWN_RANGE[1] // 2)
        if not identity.in_use(first) and not identity.in_use(first + 1):
            return first
    raise AssertionError("no two spare uids")


def _run_as(uid: int, effective: bool) -> int:
    """A child that runs with ``uid`` until killed: ``sleep`` executed under it (its
    ``/proc/<pid>`` is the uid's, its effective uid), or the forked child itself with
    ``uid`` as its real uid only (effective and saved uid root: ``/proc/<pid>`` shows
    root, and only its status says ``uid``)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.setsid()
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid if effective else 0, uid if effective else 0)
            os.write(write, b"1")
            if effective:
                os.execv("/bin/sleep", ["sleep", "120"])
            while True:
                signal.pause()  # until the test kills it
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.close(read)
    return pid


@as_root
@pytest.mark.parametrize("effective", [True, False])
def test_a_uid_a_process_still_runs_with_is_never_handed_out(effective):
    """Finding 1, the uid: a plugin process whose host died (its uid's lock with it) must
    not share its uid with the next plugin process.  Played by a process started under the
    uid with no lock held at all: ``acquire`` passes over it (a range of one: no uid;
    of two: the other), and hands it out once the process is gone.  A process whose uid
    is not its effective one (``/proc/<pid>`` shows the effective uid) is found by its
    status.  Failed before (``acquire`` looked at the lock only)."""
    uid = _spare_uids()
    pid = _run_as(uid, effective)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (
            _uid_of(pid) == uid and (not effective or _comm(pid) == "sleep")
        ):  # its uid set (and sleep executed)
            time.sleep(0.01)
        assert _uid_of(pid) == uid
        owner = os.stat(f"/proc/{pid}").st_uid
        assert owner == (uid if effective else 0)  # the path in_use takes
        assert identity.in_use(uid)
        with pytest.raises(identity.IdentityUnavailable):
            identity.acquire(uid, 1)
        other = identity.acquire(uid, 2)
        try:
            assert other.uid == uid + 1
        finally:
            other.release()
    finally:
        os.kill(pid, signal.SIGKILL)  # the process this test started, by its pid
        os.waitpid(pid, 0)
    assert not identity.in_use(uid)
    again = identity.acquire(uid, 1)
    try:
        assert again.uid == uid
    finally:
        again.release()


def _comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as fh:
        return fh.read().strip()


def _uid_of(pid: int) -> int | None:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    return None


def test_the_hidden_paths_setting_is_checked(settings):
    from django_webfetch.conf import conf
    from django_webfetch.exceptions import WebFetchConfigurationError

    assert conf.WEBFETCH_PLUGIN_HIDDEN_PATHS == ()
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = ["/srv/site/project"]
    assert conf.WEBFETCH_PLUGIN_HIDDEN_PATHS == ("/srv/site/project",)
    for bad in ("/srv/site/project", ["relative/path"], [3]):
        settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = bad
        with pytest.raises(WebFetchConfigurationError):
            _ = conf.WEBFETCH_PLUGIN_HIDDEN_PATHS


_READER = """
import os

def read(plugin, arguments):
    here = os.path.dirname(os.path.abspath(__file__))
    seen = {}
    for name in ("siteproject/settings.py", "siteproject", "local_settings.py", "tool.py"):
        path = os.path.join(here, name)
        try:
            if os.path.isdir(path):
                seen[name] = sorted(os.listdir(path))
            else:
                with open(path) as fh:
                    seen[name] = fh.read()
        except OSError as exc:
            seen[name] = type(exc).__name__
    return seen

def manifest():
    return {"name": "s6hidden", "version": "1.0", "description": "x", "egress": [],
            "tools": [{"name": "read", "description": "x", "handler": read}]}
"""

_SECRET = "s6-kern30-the-sites-secret"


def _hidden_site(tmp_path: Path) -> Any:
    from django_webfetch.plugins.runtime.host import Origin

    site = tmp_path / "site"
    package = site / "webfetch_s6_hidden"
    (package / "siteproject").mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(_READER))
    (package / "tool.py").write_text("# the plugin's own module\n")
    (package / "siteproject" / "settings.py").write_text(f"SECRET_KEY = {_SECRET!r}\n")
    (package / "local_settings.py").write_text(f"SECRET_KEY = {_SECRET!r}\n")
    for path in (tmp_path, site, package, package / "siteproject"):
        os.chmod(path, 0o755)
    return Origin("webfetch_s6_hidden:manifest", str(site), "webfetch_s6_hidden")


@needs_sandbox
def test_hidden_paths_are_masked_in_the_sandbox(tmp_path, settings):
    """``WEBFETCH_PLUGIN_HIDDEN_PATHS`` naming a directory and a file under a path the
    sandbox binds (here the plugin's own package, the one bound path a test can write):
    the directory is empty, the file unreadable, the rest of the package as it was.  The
    same masks cover a project installed in ``site-packages`` (the attack's finding 2
    test, ``installed-project`` and ``listed-project``)."""
    import json

    from django_webfetch.plugins.runtime.host import Limits, execute, shutdown

    origin = _hidden_site(tmp_path)
    package = Path(origin.path) / origin.top_level
    call = {"tool": "read", "arguments": {}, "config": {}, "plugin": "s6hidden",
            "alias": "x", "reference": "x"}  # fmt: skip
    limits = Limits(5, 20, 1 << 30, 1 << 16, 5, 0)
    try:
        before = execute(origin, ("s6-hidden", 1), call, None, limits=limits)
        settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [
            str(package / "siteproject"),
            str(package / "local_settings.py"),
        ]
        after = execute(origin, ("s6-hidden", 2), call, None, limits=limits)
    finally:
        shutdown()
    assert before.kind == "json" and after.kind == "json", (before, after)
    seen_before, seen = json.loads(before.text), json.loads(after.text)
    assert _SECRET in seen_before["siteproject/settings.py"]  # the control: bound, readable
    assert seen["siteproject"] == []
    assert seen["siteproject/settings.py"] == "FileNotFoundError"
    assert seen["local_settings.py"] in ("PermissionError", ""), seen
    assert seen["tool.py"] == "# the plugin's own module\n"
    assert _SECRET not in after.text


def test_a_hidden_path_holding_what_the_guest_needs_is_not_masked(tmp_path, settings):
    """A path that only holds what the guest needs (the standard library, ``django_
    webfetch``, the plugin's own package) and lies under no bound directory shows nothing
    in the sandbox but that, and is not masked (every plugin would break); one under a
    bound package directory is.  A path that is, or lies under, a bound directory and is
    or holds what the guest needs (a whole package directory, the plugin's own package,
    the standard library) cannot be masked: the sandbox
    is not built (``site_code_unmaskable``), the path is never dropped silently (issue 30,
    round 19; tests/plugins/test_sandbox_masks_the_sites_code_wherever_bound.py)."""
    import django_webfetch

    origin = _hidden_site(tmp_path)
    package = os.path.join(origin.path, origin.top_level)
    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    stdlib = os.path.dirname(os.path.realpath(os.__file__))
    spec = bubblewrap.SandboxSpec(origin.path, origin.top_level, 3, 4, 5, "/tmp/s6")
    visible = bubblewrap._visible(spec)[0]  # every bound directory, the system's included
    holders = [root, origin.path]
    unmaskable = [stdlib, *bubblewrap.site_dirs(), package]  # each bound itself
    # Under a system library directory (a distribution's Python) or holding binds only.
    parent = os.path.dirname(stdlib)
    seen = any(parent == top or parent.startswith(top + "/") for top in visible)
    (unmaskable if seen else holders).append(parent)
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [*holders, os.path.join(package, "siteproject")]
    masks = [entry[1] for entry in bubblewrap._layout(spec) if entry[0] == "mask"]
    assert masks == [os.path.realpath(os.path.join(package, "siteproject"))]
    command = bubblewrap.command(spec)
    at = command.index(masks[0])
    assert command[at - 1] == "--tmpfs" and command[at + 1 : at + 3] == ["--remount-ro", masks[0]]
    assert masks[0] not in bubblewrap.sources(spec)
    for path in unmaskable:
        settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [path]
        with pytest.raises(bubblewrap.SiteCodeUnmaskable) as refused:
            bubblewrap.command(spec)
        assert refused.value.filename == os.path.realpath(path), path


@needs_sandbox
def test_with_the_hidden_paths_setting_wrong_no_plugin_process_starts(tmp_path, settings):
    """What to hide cannot be known: the plugin does not run (fail closed), and check
    E001 names the setting."""
    from django.core import checks

    from django_webfetch.exceptions import WebFetchConfigurationError
    from django_webfetch.plugins.runtime.host import Limits, execute, idle_processes, shutdown

    origin = _hidden_site(tmp_path)
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = "relative/settings.py"
    call = {"tool": "read", "arguments": {}, "config": {}, "plugin": "s6hidden",
            "alias": "x", "reference": "x"}  # fmt: skip
    try:
        with pytest.raises(WebFetchConfigurationError):
            execute(
                origin,
                ("s6-hidden-bad", 1),
                call,
                None,
                limits=Limits(5, 20, 1 << 30, 1 << 16, 5, 1),
            )
        assert idle_processes() == 0
    finally:
        shutdown()
    found = [m for m in checks.run_checks() if m.id == "django_webfetch.E001"]
    assert any("WEBFETCH_PLUGIN_HIDDEN_PATHS" in m.msg for m in found), found


def test_landlock_read_rules_leave_hidden_paths_out(tmp_path):
    """The guest's Landlock rules: a directory holding a hidden path is replaced by its
    entries but the hidden one (down the way to it) and kept listable only, so no read
    rule covers the hidden path, and everything beside it stays readable."""
    from django_webfetch.plugins.runtime.guest import _excluding

    site = tmp_path / "site-packages"
    for path in ("mysite/settings", "other/pkg", "deep/a/hidden", "deep/a/kept", "deep/b"):
        (site / path).mkdir(parents=True)
    (site / "six.py").write_text("")
    hidden = [str(site / "mysite"), str(site / "deep" / "a" / "hidden")]
    read, listed = _excluding([str(site), str(tmp_path / "elsewhere")], hidden)
    assert read == sorted(
        [str(tmp_path / "elsewhere")]
        + [str(site / p) for p in ("other", "six.py", "deep/b", "deep/a/kept")]
    )
    assert listed == sorted(str(site / p) for p in ("", "deep", "deep/a"))
    assert not any(h == r or h.startswith(r + "/") for h in hidden for r in read)


def test_landlock_exclusion_covers_everything_but_the_hidden_paths(tmp_path_factory):
    """Property, over random trees and random hidden paths in them: every file of the tree
    that is not at or under a hidden path is under a read rule, no hidden path is at or
    under one, and every directory on the way to a hidden one is listable (unless that
    directory is itself hidden: one hidden path inside another, found by this property)."""
    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    from django_webfetch.plugins.runtime.guest import _excluding

    names = st.sampled_from(["a", "b", "c", "mysite", "settings.py"])
    trees = st.lists(st.lists(names, min_size=1, max_size=4), min_size=1, max_size=12)

    def covered(path: str, rules: list[str]) -> bool:
        return any(path == r or path.startswith(r + "/") for r in rules)

    @settings(max_examples=150, deadline=None)
    @given(trees, st.lists(st.integers(0, 11), max_size=3), st.integers(0, 3))
    @example(tree=[["c", "a", "a"], ["c", "b"]], picks=[0, 1], depth=2)  # nested hidden paths
    def check(tree, picks, depth):
        root = str(tmp_path_factory.mktemp("tree"))
        files = []
        for parts in tree:
            path = os.path.join(root, *parts)
            if any(f == path or f.startswith(path + "/") or path.startswith(f + "/")
                   for f in files):  # fmt: skip
                continue  # a file where a directory is, or the reverse
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as fh:
                fh.write("x")
            files.append(path)
        hidden = []
        for pick in picks:
            chosen = files[pick % len(files)]
            parts = chosen[len(root) + 1 :].split("/")
            hidden.append(os.path.join(root, *parts[: 1 + depth % len(parts)]))
        read, listed = _excluding([root], hidden)
        for path in files:
            assert covered(path, read) is not covered(path, hidden), (path, read, hidden)
        for path in hidden:
            assert not covered(path, read), (path, read)
            up = os.path.dirname(path)
            while len(up) >= len(root):
                assert up in listed or covered(up, hidden), (up, listed)
                up = os.path.dirname(up)

    check()
