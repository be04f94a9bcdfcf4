"""Issue 30 (reopened): on a site run as root, the plugin process was root *outside* its
user namespace (bwrap mapped uid 65534 inside to the uid that started it: 0).  Now a root
host starts bwrap under a uid and gid of the plugin process's own, from
``WEBFETCH_PLUGIN_UID_RANGE`` (docs/decisions/0047-a-dedicated-uid-per-plugin-process.rst,
docs/plugins.rst "Containment").

Everything is observed from the host: ``/proc/<pid>/status`` of the sandboxed interpreter
as the initial namespace sees it, the errno a root-owned 0600 file gives, how many threads
a bomb starts.  These tests run as root, as CI does (the case under test).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile

import pytest

from django_webfetch.plugins.runtime import bubblewrap, cgroups, identity
from django_webfetch.plugins.runtime.host import capabilities
from tests.plugins.packages import call_without_http, dist_info

from .test_plugin_process_cannot_reach_the_site import site

pytestmark = pytest.mark.django_db

as_root_with_sandbox = pytest.mark.skipif(
    os.geteuid() != 0 or not capabilities().get("isolated"),
    reason="a root site (CI) where the plugin sandbox can be built",
)
CAPABILITY_FIELDS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def status(pid: int) -> dict[str, list[str]]:
    """``/proc/<pid>/status`` as this (the initial) user namespace sees it."""
    with open(f"/proc/{pid}/status") as fh:
        return {
            key: value.split()
            for key, _, value in (line.partition(":") for line in fh.read().splitlines())
        }


def _package(tmp_path, name: str, body: str):
    """A plugin distribution ``name`` under ``tmp_path`` (pytest makes it 0700: the host
    must make the package reachable for an unprivileged bwrap); its one tool runs ``body``
    as the body of ``run(http, arguments)``."""
    from django_webfetch.plugins.runtime.host import Origin

    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text(
        "import errno, json, os, threading, time\n"
        "def run(h, a):\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
        + "def manifest():\n"
        f"    return {{'name': {name!r}, 'version': '1.0', 'description': 'x', 'egress': [],\n"
        f"            'tools': [{{'name': '{name}_run', 'description': 'x',\n"
        "                       'parameters': {'type': 'object'}, 'handler': run}]}\n"
    )
    dist_info(tmp_path, name, {name: f"{name}:manifest"})
    return Origin(f"{name}:manifest", str(tmp_path), name), package


def _call(origin, key, name: str):
    return call_without_http(origin, key, name)


@as_root_with_sandbox
def test_a_root_sites_plugin_process_is_neither_root_nor_the_site_outside(tmp_path):
    """Uid and Gid (real, effective, saved, filesystem), supplementary groups and
    capabilities of the sandboxed interpreter and of bwrap, as the host sees them; two
    plugin processes at once have two different uids, both in the range."""
    from django_webfetch.plugins.runtime import host

    origin, _ = _package(tmp_path, "webfetch_who", "return str(os.getuid())")
    limits = host.Limits.from_settings()
    workers = [host.Worker(origin, limits, "who-a"), host.Worker(origin, limits, "who-b")]
    try:
        uids = set()
        for worker in workers:
            for pid in (worker.pid, worker.process.pid):  # the interpreter, and bwrap
                seen = status(pid)
                uid = seen["Uid"][0]
                assert seen["Uid"] == [uid] * 4, seen["Uid"]
                assert seen["Gid"] == [uid] * 4, seen["Gid"]
                assert int(uid) not in (0, os.getuid(), os.getgid()), seen["Uid"]
                assert seen["Groups"] == [], seen["Groups"]
                for field in ("CapPrm", "CapEff", "CapAmb", "CapInh"):
                    assert int(seen[field][0], 16) == 0, (pid, field, seen[field])
                uids.add(int(uid))
            # The interpreter has no capability left to gain in any namespace either.
            assert int(status(worker.pid)["CapBnd"][0], 16) == 0
            # The uid is the one the host took for this process, in the configured range.
            first, count = limits.uid_range
            assert worker.identity is not None
            assert worker.identity.uid == int(status(worker.pid)["Uid"][0])
            assert first <= worker.identity.uid < first + count
            assert worker.isolation["outer_uid"] == "own"
        assert len(uids) == 2, uids
    finally:
        for worker in workers:
            worker.kill()


@as_root_with_sandbox
def test_a_plugin_cannot_open_a_root_owned_0600_file_in_its_own_package(tmp_path):
    """The plugin sees its own package; a file of root's (0600) dropped into it is
    ``EACCES`` to it.  Before, the process was uid 0 outside, the file's owner: it read it."""
    origin, package = _package(
        tmp_path,
        "webfetch_peek",
        "here = os.path.dirname(__file__)\n"
        "found = {}\n"
        "for name in ('public.txt', 'secret.txt'):\n"
        "    try:\n"
        "        with open(os.path.join(here, name)) as fh:\n"
        "            found[name] = fh.read()\n"
        "    except OSError as exc:\n"
        "        found[name] = errno.errorcode[exc.errno]\n"
        "return json.dumps(found)",
    )
    (package / "public.txt").write_text("anyone")
    secret = package / "secret.txt"
    secret.write_text("root only")
    os.chmod(secret, 0o600)
    assert os.stat(secret).st_uid == 0
    found = json.loads(_call(origin, ("peek", 1), "webfetch_peek").text)
    assert found == {"public.txt": "anyone", "secret.txt": "EACCES"}, found


@as_root_with_sandbox
def test_a_thread_bomb_stops_at_rlimit_nproc_on_a_root_site_without_a_cgroup(
    plugin_lab, monkeypatch, settings
):
    """RLIMIT_NPROC (64) counts the plugin's own uid: it holds without a pids cgroup, where
    the address space alone let a root-mapped process start hundreds (8 GiB here)."""
    from django_webfetch.plugins import services

    from .test_containment import _direct

    monkeypatch.setattr(cgroups, "_controller", lambda name: None)  # no pids cgroup
    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 1 << 33
    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 120
    instance = services.install("example")
    report = _direct(instance, {"probe": "thread_bomb"})
    started = int(report["thread_bomb"].split()[1])
    assert 0 < started < 64, started


def _wrapper(directory: str, marker: str) -> str:
    """A bwrap that plays a kernel refusing user namespaces to unprivileged users (as
    bwrap says it), and leaves ``marker`` if it was ever started by root."""
    path = os.path.join(directory, "bwrap")
    with open(path, "w") as fh:
        fh.write(
            "#!/bin/sh\n"
            'if [ "$(id -u)" = 0 ]; then touch ' + marker + '; exec /usr/bin/bwrap "$@"; fi\n'
            "echo 'bwrap: No permission to create new namespace, likely because the kernel "
            "does not allow non-privileged user namespaces.' >&2\n"
            "exit 1\n"
        )
    os.chmod(path, 0o755)
    return path


@as_root_with_sandbox
def test_where_the_plugin_uid_may_not_make_a_user_namespace_untrusted_plugins_do_not_run():
    """Never a root-mapped sandbox instead: bwrap is only ever started by the plugin's uid,
    which gets ``userns_unavailable``; nothing of the package is imported."""
    directory = tempfile.mkdtemp(prefix="webfetch-userns-")
    try:
        os.chmod(directory, 0o755)  # the plugin's uid executes the wrapper
        marker = os.path.join(directory, "started-by-root")
        report = site(env={"WEBFETCH_PLUGIN_BWRAP": _wrapper(directory, marker)})
        assert report["capabilities"]["isolated"] is False, report["capabilities"]
        assert report["capabilities"]["reason"] == "userns_unavailable", report["capabilities"]
        assert report["imported_here"] == []
        assert report["manifests"] == []
        assert any("(plugin_isolation_unavailable)" in p for p in report["problems"])
        assert "django_webfetch.W033" in report["checks"]
        assert not os.path.exists(marker)
    finally:
        for name in os.listdir(directory):
            os.unlink(os.path.join(directory, name))
        os.rmdir(directory)


@as_root_with_sandbox
def test_with_every_uid_of_the_range_taken_untrusted_plugins_do_not_run(tmp_path, settings):
    """No free uid: the process is not started (``uid_unavailable``), never as root."""
    from django_webfetch.plugins.runtime import host

    # The uid locks are the machine's: a range of this process's own, so that another run
    # of the suite on the machine (which takes the same test's range) never holds one of it.
    first = 3_000_000 + (os.getpid() % 10_000) * 64
    settings.WEBFETCH_PLUGIN_UID_RANGE = (first, 64)
    held = [identity.acquire(first, 64) for _ in range(64)]
    try:
        assert sorted(h.uid for h in held) == list(range(first, first + 64))
        origin, _ = _package(tmp_path, "webfetch_full", "return 'x'")
        with pytest.raises(host.IsolationUnavailable) as failed:
            host.Worker(origin, host.Limits.from_settings(), "full")
        assert host.reason_of(failed.value.detail) == "uid_unavailable", failed.value.detail
    finally:
        for one in held:
            one.release()
    # Released: taken again.
    again = identity.acquire(first, 64)
    again.release()


def test_a_uid_is_held_once_across_processes():
    """The lock is the machine's, not the process's: a uid one process holds, another
    cannot take; it is free again once the holder is gone."""
    if os.geteuid() != 0:
        pytest.skip("the lock file is root's")
    held = identity.acquire(4_000_000, 64)
    try:
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from django_webfetch.plugins.runtime import identity\n"
                "got = sorted(identity.acquire(4_000_000, 64).uid for _ in range(63))\n"
                "print(got)\n"
                "try:\n"
                "    identity.acquire(4_000_000, 64)\n"
                "except identity.IdentityUnavailable:\n"
                "    print('none left')\n",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        lines = other.stdout.splitlines()
        assert held.uid not in json.loads(lines[0])
        assert lines[1] == "none left"
    finally:
        held.release()


def test_covers_are_the_topmost_directories_the_plugin_uid_may_not_search(tmp_path):
    """What ``launch`` lays a tmpfs over and binds back: only sources behind a directory
    without ``o+x`` (an interpreter under /root); a world-readable path needs nothing."""
    open_dir = tmp_path / "open"
    shut = open_dir / "shut"
    inner = shut / "inner"
    (inner / "pkg").mkdir(parents=True)
    (open_dir / "free").mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(open_dir, 0o755)
    os.chmod(shut, 0o700)
    os.chmod(inner, 0o700)
    paths = [str(inner / "pkg"), str(open_dir / "free"), "/usr/lib"]
    ancestors_open = all(
        os.stat(p).st_mode & stat.S_IXOTH for p in [str(tmp_path), *_parents(tmp_path)]
    )
    cover, keep = bubblewrap.covers(paths)
    if ancestors_open:
        assert cover == [str(shut)]
        assert keep == [str(inner / "pkg")]
    else:  # pytest's own 0700 base directory is the topmost one
        assert len(cover) == 1 and str(inner).startswith(cover[0] + "/")
        assert keep == [str(inner / "pkg"), str(open_dir / "free")]
    assert bubblewrap.covers(["/usr/lib", "/usr/lib64"]) == ([], [])


def _parents(path) -> list[str]:
    return [str(p) for p in path.parents if str(p) != "/"]


@as_root_with_sandbox
def test_the_launcher_starts_a_world_readable_program_without_covers(tmp_path):
    """Where nothing is behind a 0700 directory (a system interpreter under /usr), the
    launcher gives up root and bwrap starts without a mount namespace of the launcher's."""
    from django_webfetch.plugins.runtime import launch

    uid = identity.acquire(*identity.DEFAULT_RANGE)
    try:
        layout = []
        for top in ("/lib", "/lib64"):
            if os.path.islink(top):
                layout += ["--symlink", os.readlink(top), top]
        fd = os.open("/usr", os.O_PATH | os.O_CLOEXEC)
        argv = [
            bubblewrap.bwrap_path(), "--unshare-user", "--uid", "65534", "--gid", "65534",
            "--cap-drop", "ALL", "--unshare-pid", "--die-with-parent", "--clearenv",
            "--ro-bind-fd", str(fd), "/usr", *layout, "--proc", "/proc",
            "--", "/usr/bin/sh", "-c", "grep -E '^(Uid|Gid|Groups)' /proc/self/status",
        ]  # fmt: skip
        plan = {"uid": uid.uid, "gid": uid.gid, "cover": [], "keep": [], "argv": argv}
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-B", launch.__file__, json.dumps(plan)],
            pass_fds=(fd,),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        os.close(fd)
    finally:
        uid.release()
    assert done.returncode == 0, done.stderr
    seen = {line.split(":")[0]: line.split()[1:] for line in done.stdout.splitlines()}
    assert seen["Uid"] == ["65534"] * 4 and seen["Gid"] == ["65534"] * 4, seen


def test_the_launcher_refuses_to_stay_root():
    from django_webfetch.plugins.runtime import launch

    plan = {"uid": 0, "gid": 0, "cover": [], "keep": [], "argv": ["/bin/true"]}
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", launch.__file__, json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "webfetch-launch: plan: uid and gid must not be root" in done.stderr


@as_root_with_sandbox
def test_a_one_file_plugin_behind_a_0700_directory_starts(tmp_path):
    """A plugin that is one module file (``name.py``), in a directory the plugin's uid may
    not search: the launcher binds the file back over a file mount point, and it runs."""
    from django_webfetch.plugins.runtime.host import Origin

    assert not os.stat(tmp_path.parent).st_mode & stat.S_IXOTH  # pytest's 0700 directories
    name = "webfetch_onefile"
    (tmp_path / f"{name}.py").write_text(
        "import os\n"
        "def run(h, a):\n"
        "    return str(os.getuid())\n"
        "def manifest():\n"
        f"    return {{'name': {name!r}, 'version': '1.0', 'description': 'x', 'egress': [],\n"
        f"            'tools': [{{'name': '{name}_run', 'description': 'x',\n"
        "                       'parameters': {'type': 'object'}, 'handler': run}]}\n"
    )
    origin = Origin(f"{name}:manifest", str(tmp_path), name)
    assert _call(origin, ("onefile", 1), name).text == "65534"


def test_covers_against_every_tree_of_modes():
    """Property: for any tree of directories with any of the modes that matter, a path is
    kept exactly when a directory above it lacks ``o+x``, and then under exactly one cover,
    the topmost such directory (hypothesis searches the trees)."""
    import pathlib
    import shutil

    from hypothesis import given, settings
    from hypothesis import strategies as st

    base = pathlib.Path(tempfile.mkdtemp(prefix="webfetch-covers-"))  # /tmp: searchable
    os.chmod(base, 0o755)
    counter = iter(range(10**6))

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.lists(st.sampled_from([0o755, 0o750, 0o711, 0o700]), min_size=1,
                             max_size=4), min_size=1, max_size=5))  # fmt: skip
    def check(chains):
        root = base / f"t{next(counter)}"
        root.mkdir(mode=0o755)
        paths, blocked_top = [], {}
        for i, modes in enumerate(chains):
            leaf = root.joinpath(*[f"d{i}_{depth}" for depth in range(len(modes))], "leaf")
            leaf.mkdir(parents=True)
            directory, top = root, None
            for depth, mode in enumerate(modes):
                directory = directory / f"d{i}_{depth}"
                os.chmod(directory, mode)
                if top is None and not mode & stat.S_IXOTH:
                    top = str(directory)
            paths.append(str(leaf))
            blocked_top[str(leaf)] = top
        cover, keep = bubblewrap.covers(paths)
        assert sorted(keep) == sorted(p for p in paths if blocked_top[p])
        assert sorted(cover) == sorted({t for t in blocked_top.values() if t})
        for path in keep:
            assert [c for c in cover if path.startswith(c + "/")] == [blocked_top[path]]

    try:
        check()
    finally:
        shutil.rmtree(base)
