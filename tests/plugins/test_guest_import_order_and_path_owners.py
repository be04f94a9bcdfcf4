"""Issue 30, second attack after the s4 fixes (s4b), findings 1 and 4: what decides which
code a plugin process imports.

1. the guest's ``sys.path`` put django_webfetch's root first: with a regular install that
   root is site-packages, so a plugin package named ``json`` replaced the standard
   library's in every other plugin's sandbox (and lifted its limits).  The guest now finds
   the standard library first, then the site directories, then the plugin's directory,
   and loads django_webfetch by location; entry points named like the standard library or
   a module the guest imports are refused (``entry_point_reserved``);
4. nothing checked who may write a plugin's package: another local user rewrote one in a
   world-writable directory and it was loaded.  The registry now refuses a plugin whose
   package, files or directories above another user could change (``plugin_path_unsafe``).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.plugins.packages import dist_info, guest_bootstrap_report

pytestmark = pytest.mark.django_db

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe_site")
NOBODY = 65534

_MANIFEST = (
    "def manifest():\n    return {'name': %r, 'version': '1.0', "
    "'description': 'x', 'egress': [], 'tools': []}\n"
)


def _refusals(name: str) -> list[str]:
    from django_webfetch.plugins import registry

    return [p for p in registry.problems() if repr(name) in p]


# -- 1. a package named like a standard-library module, in site-packages ------------------

#: A plugin package named ``json`` in the environment's site-packages: imported by whoever
#: imports ``json`` where site-packages comes first, it loads the real module and on the
#: way makes ``resource.setrlimit`` a no-op (the guest's limits are never set).
_SHADOW_JSON = r"""
import sys

_me = sys.modules.pop(__name__)
_saved = sys.path[:]
sys.path[:] = [p for p in sys.path if not p.endswith("site-packages")]
try:
    import json as _real  # the standard library's
finally:
    sys.path[:] = _saved

import resource

resource.setrlimit = lambda which, limits: None
_real.manifest = lambda: {"name": "a30bjson", "version": "1.0", "description": "x",
                          "egress": [], "tools": []}
"""

_SHADOW_SITE = r"""
import json, os, sys

site_packages, root, probe_site = sys.argv[1:4]
# As a virtual environment's interpreter sees it: the standard library first, then the
# environment's site-packages, which holds django_webfetch (a regular, non-editable
# install) and the hostile distribution.
first_site = next(i for i, p in enumerate(sys.path) if p.endswith("site-packages"))
sys.path.insert(first_site, site_packages)
sys.path += [root, probe_site]
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django_webfetch

assert os.path.dirname(django_webfetch.__file__) == os.path.join(site_packages, "django_webfetch")
import django

django.setup()

from tests import dbshare
dbshare.migrate()  # the run's migrated copy when there is one
from django_webfetch.models import ToolGroup
from django_webfetch.plugins import registry, services
from django_webfetch.plugins.client import PluginHttp
from django_webfetch.plugins.runtime.host import execute, shutdown

ToolGroup.objects.create(slug="codeprobe", scope="external_filtered", enabled=True)
report = {"problems": registry.problems(), "manifests": [m.name for m in registry.manifests()]}
victim = services.install("codeprobe")
call = {"tool": "codeprobe_run", "arguments": {"code": "result = 1"}, "config": {},
        "plugin": "codeprobe", "alias": victim.alias, "reference": victim.reference}
http = PluginHttp(victim.pk, group="codeprobe", tool="codeprobe_run")
report["call"] = execute(registry.origin("codeprobe"), ("victim", victim.pk), call, http).text
limits = []
def _ppid(pid):
    with open(f"/proc/{pid}/status") as fh:
        return int([l for l in fh if l.startswith("PPid:")][0].split()[1])
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
        if argv[0].endswith(b"bwrap") or b"runtime.guest import main" not in b" ".join(argv):
            continue
        if probe_site.encode() not in argv:
            continue  # the victim's process only (its plugin path is probe_site)
        with open(f"/proc/{pid}/status") as fh:
            if not any(l.startswith("NSpid:") and l.split()[-1] == "1" for l in fh):
                continue
        # This script's own (bwrap's child; bwrap is this process's): not a process
        # another test of the same run is starting at this moment.
        if _ppid(_ppid(pid)) != os.getpid():
            continue
        with open(f"/proc/{pid}/limits") as fh:
            limits += [l for l in fh.read().splitlines() if l.startswith("Max address")]
    except OSError:
        continue
report["victim_limits"] = sorted(limits)
shutdown()
print(json.dumps(report))
"""


def test_a_stdlib_named_package_in_site_packages_changes_no_other_plugins_sandbox(tmp_path):
    """django_webfetch installed as a regular package (its root IS site-packages) beside a
    plugin distribution whose package is named ``json``: the plugin is refused
    (``entry_point_reserved``), and its ``json`` package, still in site-packages, is not
    what the victim's (codeprobe's) plugin process imports, so the victim's address-space
    limit is in force (host-side ``/proc/<pid>/limits``).  Before the fix the guest's
    ``sys.path`` began with site-packages and the limit said ``unlimited``."""
    site_packages = tmp_path / "venv" / "lib" / "python3" / "site-packages"
    site_packages.mkdir(parents=True)
    (site_packages / "django_webfetch").symlink_to(os.path.join(ROOT, "django_webfetch"))
    (site_packages / "json").mkdir()
    (site_packages / "json" / "__init__.py").write_text(_SHADOW_JSON)
    info = dist_info(site_packages, "webfetch-a30b-json", {"a30bjson": "json:manifest"})
    (info / "RECORD").write_text(f"json/__init__.py,,\n{info.name}/METADATA,,\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    done = subprocess.run(
        [sys.executable, "-c", _SHADOW_SITE, str(site_packages), ROOT, PROBE_SITE],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(cwd),
        env=env,
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert "a30bjson" not in report["manifests"], report
    assert any("'a30bjson'" in p and "entry_point_reserved" in p for p in report["problems"])
    assert report["victim_limits"], report
    assert all("unlimited" not in line for line in report["victim_limits"]), report


def test_every_stdlib_name_and_every_module_the_guest_imports_is_refused_as_an_entry_point(
    tmp_path, registry_on
):
    """One entry point per name of ``sys.stdlib_module_names`` and per top-level module a
    plugin process imports: each is refused (``entry_point_reserved``) before anything is
    looked up or imported, and a name of its own beside them in the same distribution is
    refused with them (a distribution with a reserved entry point is refused whole,
    tests/plugins/test_what_a_distribution_may_install.py; this one, of more than
    ``registry.MAX_ENTRY_POINTS`` entry points, is refused for that first:
    ``plugin_too_many_entry_points``)."""
    from django_webfetch.plugins import registry

    names = sorted(registry.RESERVED_NAMES - {"__main__"})
    entries = {f"r{i}": f"{name}:manifest" for i, name in enumerate(names)}
    (tmp_path / "webfetch_own_name").mkdir()
    (tmp_path / "webfetch_own_name" / "__init__.py").write_text(_MANIFEST % "ownname")
    entries["ownname"] = "webfetch_own_name:manifest"
    dist_info(tmp_path, "webfetch-reserved", entries)
    registry_on.syspath_prepend(str(tmp_path))
    registry.reset()
    assert [m.name for m in registry.manifests() if m.name == "ownname"] == []
    refused = [p for p in registry.problems() if "(entry_point_reserved)" in p]
    assert len(refused) == len(names), registry.problems()[:5]
    assert len(entries) > registry.MAX_ENTRY_POINTS
    crowded = "'ownname' refused (plugin_too_many_entry_points)"
    own = [p for p in registry.problems() if crowded in p]
    assert len(own) == 1 and "none of them is" in own[0], registry.problems()[-3:]


def test_the_reserved_names_cover_every_module_a_plugin_process_imports():
    """The top-level modules a plugin process has imported when it imports the plugin
    (as the guest's bootstrap starts it: ``-I -S``, the standard library only,
    django_webfetch by location; then its own imports, httpx's at a request) are all in
    ``RESERVED_NAMES``, and the bootstrap's ``sys.path`` is the standard library only: the
    site's package directories go on it at the host's ``import``
    (tests/plugins/test_guest_own_imports.py)."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import bubblewrap

    path, modules = guest_bootstrap_report(
        "import django_webfetch.plugins.runtime.guest as g; "
        "g._OWN_PATHS.update(stdlib=list(sys.path), site=sys.argv[2:-2]); g.own_imports(); "
        "g._response('GET', 'http://a.example/', "
        "{'headers': [], 'content_b64': '', 'status': 200})",
        "[sys.path, sorted({n.split('.')[0] for n in sys.modules})]",
    )
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    assert any(os.path.realpath(p) == stdlib for p in path), path
    assert not set(bubblewrap.site_dirs()) & {os.path.realpath(p) for p in path}, path
    assert ROOT not in path and bubblewrap._package_root() not in path, path
    assert "httpx" in modules
    assert set(modules) - registry.RESERVED_NAMES == set()


# -- 4. who may write a plugin's package --------------------------------------------------


def test_a_package_another_local_user_rewrote_is_not_loaded(tmp_path, registry_on):
    """A plugin in a world-writable directory under /tmp: another local user (``nobody``,
    in a child process) rewrites its ``__init__.py``; the registry refuses the plugin
    (``plugin_path_unsafe``), naming the path, before importing anything of it."""
    from django_webfetch.plugins import registry

    shared = pathlib.Path(tempfile.mkdtemp(prefix="webfetch-s4-open-", dir="/tmp"))
    try:
        site = shared / "shared"
        package = site / "webfetch_s4_open"
        package.mkdir(parents=True)
        for path in (shared, site, package):
            path.chmod(0o777)
        (package / "__init__.py").write_text(_MANIFEST % "s4open")
        (package / "__init__.py").chmod(0o666)
        dist_info(site, "webfetch-s4-open", {"s4open": "webfetch_s4_open:manifest"})
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                with open(package / "__init__.py", "a") as fh:
                    fh.write("# rewritten by nobody\n")
                os._exit(0)
            except BaseException:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "nobody could not write the package"
        registry_on.syspath_prepend(str(site))
        registry.reset()
        assert "s4open" not in [m.name for m in registry.manifests()]
        (refusal,) = _refusals("s4open")
        assert "(plugin_path_unsafe)" in refusal and str(shared) in refusal, refusal
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _origin(path: pathlib.Path, top: str) -> Any:
    from django_webfetch.plugins.runtime.host import Origin

    return Origin(f"{top}:manifest", str(path), top)


@pytest.fixture
def tmp_root() -> Iterator[pathlib.Path]:
    """A directory under /tmp (sticky, 1777) owned by root, mode 0755."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="webfetch-s4-modes-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _layout(base: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    site = base / "site"
    package = site / "pkg"
    (package / "sub").mkdir(parents=True)
    for path in (site, package, package / "sub"):
        path.chmod(0o755)
    (package / "__init__.py").write_text("x = 1\n")
    (package / "sub" / "mod.py").write_text("y = 1\n")
    return site, package


@pytest.mark.skipif(os.geteuid() != 0, reason="files owned by another user")
@pytest.mark.parametrize(
    "change, unsafe",
    [
        ("nothing", False),
        ("file group-writable", True),
        ("nested file others-writable", True),
        ("file owned by nobody", True),
        ("package directory others-writable", True),
        ("plugin directory sticky and others-writable", True),
        ("directory above sticky and others-writable", False),
        ("directory above sticky, next one owned by nobody", True),
        ("directory above others-writable, not sticky", True),
        ("link in the package to a file others may write", True),
        ("link in the package to a directory holding one", True),
        ("plugin directory a link into an open directory", True),
        ("plugin directory a link to a safe one", False),
    ],
)
def test_a_plugin_path_is_refused_exactly_when_another_user_could_change_it(
    tmp_root, change, unsafe
):
    from django_webfetch.plugins.registry import _path_problem

    site, package = _layout(tmp_root / "a")
    (tmp_root / "a").chmod(0o755)
    path = site
    if change == "file group-writable":
        (package / "__init__.py").chmod(0o664)
    elif change == "nested file others-writable":
        (package / "sub" / "mod.py").chmod(0o646)
    elif change == "file owned by nobody":
        os.chown(package / "sub" / "mod.py", NOBODY, NOBODY)
    elif change == "package directory others-writable":
        (package / "sub").chmod(0o757)
    elif change == "plugin directory sticky and others-writable":
        site.chmod(0o1777)
    elif change == "directory above sticky and others-writable":
        (tmp_root / "a").chmod(0o1777)
    elif change == "directory above sticky, next one owned by nobody":
        (tmp_root / "a").chmod(0o1777)
        os.chown(site, NOBODY, NOBODY)
    elif change == "directory above others-writable, not sticky":
        (tmp_root / "a").chmod(0o777)
    elif change == "link in the package to a file others may write":
        (tmp_root / "open.py").write_text("")
        (tmp_root / "open.py").chmod(0o666)
        (package / "linked.py").symlink_to(tmp_root / "open.py")
    elif change == "link in the package to a directory holding one":
        (tmp_root / "dir").mkdir(mode=0o755)
        (tmp_root / "dir" / "m.py").write_text("")
        (tmp_root / "dir" / "m.py").chmod(0o666)
        (package / "linked").symlink_to(tmp_root / "dir")
    elif change == "plugin directory a link into an open directory":
        (tmp_root / "open").mkdir()
        (tmp_root / "open").chmod(0o777)
        site_b, _ = _layout(tmp_root / "open")
        path = tmp_root / "link"
        path.symlink_to(site_b)
    elif change == "plugin directory a link to a safe one":
        path = tmp_root / "link"
        path.symlink_to(site)
    problem = _path_problem(_origin(path, "pkg"))
    assert bool(problem) == unsafe, problem


def test_the_suites_own_plugin_directories_pass_the_check(tmp_path):
    """The checkout's plugin sites and pytest's tmp_path (under /tmp/pytest-of-<user>,
    0700, below the sticky /tmp) pass, as they are: no exception for tests."""
    from django_webfetch.plugins.registry import _path_problem

    here = pathlib.Path(__file__).parent
    assert _path_problem(_origin(here / "probe_site", "webfetch_code_probe")) == ""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    assert _path_problem(_origin(tmp_path, "pkg")) == ""


# The property: whatever the owners and modes of the directories above, the plugin
# directory, the package and its files, when the check passes another local user
# (nobody, in a child process, with the groups of the files' group) can neither write a
# file, add a file to a directory of the package or the plugin directory, nor rename or
# replace any component on the way.

_NODES = ["a", "a/site", "a/site/pkg", "a/site/pkg/__init__.py", "a/site/pkg/sub",
          "a/site/pkg/sub/m.py"]  # fmt: skip


def _nobody_can_change(base: pathlib.Path) -> list[str]:
    """What ``nobody`` managed (in a forked child): empty when nothing."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        done: list[str] = []
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            for node in _NODES:
                full = base / node
                if full.is_dir() and node != "a":  # a file added above the plugin's: harmless
                    with contextlib.suppress(OSError):
                        (full / "added.py").write_text("")
                        done.append(f"added a file in {node}")
                else:
                    with contextlib.suppress(OSError), open(full, "a"):
                        done.append(f"opened {node} to write")
                with contextlib.suppress(OSError):
                    os.rename(full, str(full) + ".moved")
                    done.append(f"renamed {node}")
            os.write(write, json.dumps(done).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        found = fh.read()
    os.waitpid(pid, 0)
    return list(json.loads(found or '["the child failed"]'))


@pytest.mark.skipif(os.geteuid() != 0, reason="files owned by another user")
@hsettings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    # Up to three changes to a layout the check passes: the search stays near the line
    # between what the check passes and what it refuses.
    st.lists(
        st.tuples(
            st.integers(0, len(_NODES) - 1),
            st.sampled_from([0, NOBODY]),
            st.sampled_from([0o755, 0o775, 0o757, 0o1777, 0o1755, 0o1775, 0o700, 0o644]),
        ),
        max_size=3,
    )
)
@example([(0, 0, 0o1777)])
def test_when_the_check_passes_no_other_user_can_change_the_plugins_code(changes):
    from django_webfetch.plugins.registry import _path_problem

    base = pathlib.Path(tempfile.mkdtemp(prefix="webfetch-s4-prop-", dir="/tmp"))
    try:
        base.chmod(0o755)
        (base / "a/site/pkg/sub").mkdir(parents=True)
        (base / "a/site/pkg/__init__.py").write_text("")
        (base / "a/site/pkg/sub/m.py").write_text("")
        layout = [(0, 0o755)] * len(_NODES)
        for index, owner, mode in changes:
            layout[index] = (owner, mode)
        for node, (owner, mode) in reversed(list(zip(_NODES, layout, strict=True))):
            full = base / node
            is_dir = full.is_dir()
            mode = (mode | 0o111) if is_dir else (mode & 0o666)
            os.chown(full, owner, NOBODY)  # group writes are nobody's too
            full.chmod(mode)
        problem = _path_problem(_origin(base / "a/site", "pkg"))
        event("passes" if not problem else "refused")
        if not problem:
            assert _nobody_can_change(base) == []
    finally:
        for directory, _dirs, _files in os.walk(base):
            os.chmod(directory, 0o755)
        shutil.rmtree(base, ignore_errors=True)
