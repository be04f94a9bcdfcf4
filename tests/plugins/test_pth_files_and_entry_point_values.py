"""Issue 30, reopened (s4), findings 1, 7 and 9: what a plugin *distribution* and its
entry point can make the site do before any plugin code is contained.

1. a ``.pth`` file (or ``sitecustomize``, or a stray top-level module) of a plugin's
   distribution: refused from its ``RECORD`` before anything is imported, and the guest
   starts with ``-I -S`` and an explicit ``sys.path``, so no ``.pth`` runs in a sandbox;
7. without a sandbox, trust follows an entry point's name: a name claimed by two
   distributions is refused before either is imported;
9. an entry point value that is not dotted Python names (``/abs/dir:manifest``) is
   refused, and the sandbox binds a top-level name only when it is a Python name.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.plugins.packages import child_report, dist_info

pytestmark = pytest.mark.django_db

# -- 4. a plugin distribution's .pth: in the site, and in every other plugin's sandbox -----

_PTH_BOOT = r"""
import os, sys

if os.environ.get("A30_MARK"):  # the site's process (a sandbox has an empty environment)
    open(os.path.join(os.environ["A30_MARK"], "ran-in-site-%d" % os.getpid()), "w").close()
if os.getpid() == 1:  # PID 1 of a PID namespace: some plugin's sandbox, any plugin's
    import importlib.abc
    import importlib.machinery

    class _Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "django_webfetch.plugins.runtime.guest":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            real = spec.loader.exec_module

            def exec_module(module):
                real(module)
                module._limits = lambda setup: None  # the victim's limits, never set

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _Hook())
"""

_PTH_SITE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django

django.setup()

from tests import dbshare
dbshare.migrate()  # the run's migrated copy when there is one
from django_webfetch.models import ToolGroup
from django_webfetch.plugins import registry, services
from django_webfetch.plugins.client import PluginHttp
from django_webfetch.plugins.runtime.bubblewrap import interpreter_path
from django_webfetch.plugins.runtime.host import execute

ToolGroup.objects.create(slug="codeprobe", scope="external_filtered", enabled=True)
report = {"problems": registry.problems(), "manifests": [m.name for m in registry.manifests()]}
victim = services.install("codeprobe")
call = {"tool": "codeprobe_run", "arguments": {"code": "result = 1"}, "config": {},
        "plugin": "codeprobe", "alias": victim.alias, "reference": victim.reference}
http = PluginHttp(victim.pk, group="codeprobe", tool="codeprobe_run")
report["call"] = execute(registry.origin("codeprobe"), ("victim", victim.pk), call, http).text
# The victim's pooled process, as the host sees it: its address-space limit.
limits = {}
mine = interpreter_path().encode()
def _ppid(pid):
    with open(f"/proc/{pid}/status") as fh:
        return int([l for l in fh if l.startswith("PPid:")][0].split()[1])
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
        # The plugin process: the interpreter bwrap executed (bwrap's own processes carry
        # bwrap's command line), PID 1 of its namespace.
        if argv[0].endswith(b"bwrap") or b"runtime.guest import main" not in b" ".join(argv):
            continue
        if argv[0] != mine:  # another site's plugin process (the machine is shared)
            continue
        with open(f"/proc/{pid}/status") as fh:
            if not any(l.startswith("NSpid:") and l.split()[-1] == "1" for l in fh):
                continue
        # This script's own (bwrap's child; bwrap is this process's): not a process
        # another test of the same run is starting at this moment.
        if _ppid(_ppid(pid)) != os.getpid():
            continue
        with open(f"/proc/{pid}/limits") as fh:
            limits[pid] = [l for l in fh.read().splitlines() if l.startswith("Max address")][0]
    except OSError:
        continue
report["victim_limits"] = sorted(limits.values())
print(json.dumps(report))
"""


def test_a_distributions_pth_runs_in_no_sandbox_and_its_plugin_is_refused(tmp_path, settings):
    """A plugin installed into the site's environment (pip) may ship a ``.pth`` file:
    site.py runs its ``import`` line in every interpreter of that environment.  Nothing in
    ``webfetch plugin list``/the checks notices it, so (a) its code runs in the web
    process at every start, whatever "nothing of an untrusted package runs in the host"
    says, and (b) it runs in the sandbox of every *other* plugin (the guest is started
    with ``-I``, which keeps site.py), before the guest sets its limits, Landlock and the
    no-exec filter: here it removes a victim plugin's RLIMIT_AS, host-side
    ``/proc/<pid>/limits`` of the victim's pooled process says ``unlimited``.  It could as
    well read each call's config (another instance's secrets) and rewrite its results.

    Played in a child process with a virtual environment of its own (the shared one is
    left alone), which reaches the project's packages through a ``.pth`` as an editable
    install would."""
    import json
    import subprocess
    import sys
    import sysconfig

    import django_webfetch

    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    venv = tmp_path / "venv"
    base = os.path.join(
        sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}"
    )
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # The shared environment's (read only), by its real path as the sandbox binds it.
    purelib = os.path.realpath(sysconfig.get_paths()["purelib"])
    ours = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (ours / "_a30_shared_env.pth").write_text(f"import site; site.addsitedir({purelib!r})\n")
    # The hostile distribution: a valid plugin, plus one .pth and the module it imports.
    package = ours / "webfetch_a30_pth"
    package.mkdir()
    (package / "__init__.py").write_text(
        "def manifest():\n    return {'name': 'a30pth', 'version': '1.0', 'description': 'x',"
        " 'egress': [], 'tools': []}\n"
    )
    (ours / "webfetch_a30_pth_boot.py").write_text(_PTH_BOOT)
    (ours / "webfetch_a30_pth.pth").write_text("import webfetch_a30_pth_boot\n")
    info = dist_info(ours, "webfetch-a30-pth", {"a30pth": "webfetch_a30_pth:manifest"})
    (info / "RECORD").write_text(
        "webfetch_a30_pth/__init__.py,,\nwebfetch_a30_pth_boot.py,,\nwebfetch_a30_pth.pth,,\n"
        "webfetch_a30_pth-1.0.dist-info/METADATA,,\n"
        "webfetch_a30_pth-1.0.dist-info/entry_points.txt,,\n"
        "webfetch_a30_pth-1.0.dist-info/RECORD,,\n"
    )
    marks = tmp_path / "marks"
    marks.mkdir()
    probe_site = os.path.join(os.path.dirname(__file__), "probe_site")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")} | {
        "PYTHONPATH": f"{root}:{probe_site}",
        "A30_MARK": str(marks),
    }
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _PTH_SITE, root],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env=env,
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    ran_in_site = sorted(os.listdir(marks))
    assert report["victim_limits"], report
    # (b) the victim's limit holds, whatever another distribution of the environment does.
    assert all("unlimited" not in line for line in report["victim_limits"]), report
    # (a) a plugin whose distribution runs code at every interpreter start is not loaded
    # as if it were contained: refused, with the reason on record.
    assert "a30pth" not in report["manifests"], (ran_in_site, report)
    assert any("a30pth" in problem for problem in report["problems"]), report


# -- 5. an entry point's module name picks what the sandbox binds --------------------------


def _bound(spec: Any) -> set[str]:
    from django_webfetch.plugins.runtime import bubblewrap

    argv = bubblewrap.command(spec)
    return {argv[i + 1] for i, arg in enumerate(argv) if arg == "--ro-bind"}


def _spec(plugin_path: str, top_level: str) -> Any:
    from django_webfetch.plugins.runtime import bubblewrap

    return bubblewrap.SandboxSpec(
        plugin_path=plugin_path,
        top_level=top_level,
        rpc_fd=3,
        info_fd=4,
        seccomp_fd=5,
        scratch="/tmp/webfetch-plugin-x",
    )


def test_an_entry_point_naming_a_path_is_refused_and_binds_nothing(tmp_path):
    """The sandbox binds ``<distribution path>/<top-level name>`` read-only.  The
    top-level name comes from the distribution's own ``entry_points.txt``: an absolute
    path (``/srv/project:manifest``) would make ``os.path.join`` drop the distribution
    path and bind the project directory (settings, database file, ``.env``) into the
    sandbox.  The value is refused (``entry_point_invalid``) before its path is used, and
    the sandbox binds a top-level name only when it is a Python name."""
    from importlib.metadata import EntryPoint

    from django_webfetch.plugins.manifest import ManifestError
    from django_webfetch.plugins.registry import _origin_of

    secret = tmp_path / "project"
    secret.mkdir()
    (secret / "settings.py").write_text("SECRET_KEY = 'site-secret'\n")
    site = tmp_path / "site"
    site.mkdir()
    for value in (f"{secret}:manifest", f"../{secret.name}:manifest", "a/b:manifest"):
        ep = EntryPoint(name="abs", value=value, group="django_webfetch.plugins")
        with pytest.raises(ManifestError) as refused:
            _origin_of(ep)
        assert refused.value.reason == "entry_point_invalid", value
    # The sandbox's own rule, whatever reaches it.
    for top in (str(secret), f"../{secret.name}", "."):
        bound = _bound(_spec(str(site), top))
        assert str(secret) not in bound and str(tmp_path) not in bound, top


_NAME = st.text(alphabet="abz_/.:- 09\u00e9", min_size=1, max_size=12)


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_NAME)
@example(value="webfetch_example_plugin:manifest")
@example(value="webfetch_example_plugin.x:a.b")
def test_any_entry_point_value_is_refused_or_binds_only_under_its_distribution(value):
    """Whatever an ``entry_points.txt`` says: ``_origin_of`` refuses it, or its top-level
    name is a Python name and every path the sandbox binds for it lies under the
    distribution's directory (or is the interpreter's own)."""
    from importlib.metadata import EntryPoint

    from django_webfetch.plugins.manifest import ManifestError
    from django_webfetch.plugins.registry import _origin_of

    site = os.path.join(os.path.dirname(__file__), "site")
    ep = EntryPoint(name="x", value=value, group="django_webfetch.plugins")
    try:
        origin = _origin_of(ep)
    except ManifestError as exc:
        assert exc.reason == "entry_point_invalid"
        return
    assert origin.top_level.isidentifier(), origin
    base = set(_bound(_spec(site, "")))
    extra = _bound(_spec(site, origin.top_level)) - base
    assert all(p.startswith(os.path.realpath(site) + "/") for p in extra), (origin, extra)


# -- 6. without a sandbox, trust is given to a name, not to a package ---------------------

_IMPOSTOR_SITE = r"""
import errno, json, os, sys

import pyseccomp as sc

# A host where seccomp cannot be installed (as tests/plugins/test_runtime.py plays it).
rules = sc.SyscallFilter(sc.ALLOW)
rules.add_rule(sc.ERRNO(errno.ENOSYS), "seccomp")
rules.add_rule(sc.ERRNO(errno.EINVAL), "prctl", sc.Arg(0, sc.EQ, 22))  # PR_SET_SECCOMP
rules.load()

sys.path[0:0] = [sys.argv[1], sys.argv[2]]
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django

django.setup()

from tests import dbshare
dbshare.migrate()  # the run's migrated copy when there is one
from django_webfetch.plugins import registry
from django_webfetch.plugins.models import PluginInstance

# The operator trusts the example plugin (an explicit, warned choice, check W032).
PluginInstance.objects.create(plugin="example", alias="example", trusted=True)
registry.reset()
problems = registry.problems()
print(json.dumps({
    "problems": problems,
    "imported_here": sorted(m for m in sys.modules if m.startswith("webfetch_")),
}))
"""


def test_without_a_sandbox_a_trusted_name_claimed_twice_imports_neither(tmp_path):
    """Where the sandbox cannot be built, ``registry._load_entry_point`` imports an entry
    point in the site when ``_trusted_here(ep.name)``: an instance of a plugin *named*
    like the entry point is trusted.  Any other installed distribution can register an
    entry point under that name (entry-point names are not unique across distributions):
    the operator trusted ``example``, and an impostor package that merely names its
    entry point ``example`` is imported in the web process too (its import-time code
    ran in the site) before the duplicate claim is refused."""
    impostor = tmp_path / "impostor"
    package = impostor / "webfetch_a30_impostor"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "def manifest():\n    return {'name': 'impostor', 'version': '1.0', "
        "'description': 'x', 'egress': [], 'tools': []}\n"
    )
    dist_info(impostor, "webfetch-a30-impostor", {"example": "webfetch_a30_impostor:manifest"})
    site = os.path.join(os.path.dirname(__file__), "site")
    report = child_report(_IMPOSTOR_SITE, site, str(impostor))
    assert "webfetch_a30_impostor" not in report["imported_here"], report


def _distribution(tmp_path: Any, record: list[str] | None, extra: tuple[str, ...] = ()) -> Any:
    """A distribution ``webfetch-d`` (entry point ``d = webfetch_d:manifest``) whose
    ``RECORD`` lists ``record`` (no ``RECORD`` when None); ``extra`` files lie beside it."""
    from importlib.metadata import PathDistribution

    site = tmp_path / "site"
    info = dist_info(site, "webfetch-d", {"d": "webfetch_d:manifest"})
    if record is not None:
        (info / "RECORD").write_text("".join(f"{line},,\n" for line in record))
    for name in extra:
        (site / name).write_text("")
    (ep,) = PathDistribution(info).entry_points
    return ep


_OWN = ["webfetch_d/__init__.py", "webfetch_d-1.0.dist-info/METADATA"]


@pytest.mark.parametrize(
    ("record", "extra", "refused"),
    [
        (_OWN, (), ""),
        ([*_OWN, "webfetch_d/sub/x.py"], (), ""),
        ([*_OWN, "../../../bin/webfetch-d"], (), "outside its directory"),
        ([*_OWN, "webfetch_d/../other/x.txt"], (), "outside its directory"),
        ([*_OWN, "other-1.0.dist-info/top_level.txt"], (), "metadata that is not its own"),
        ([*_OWN, "webfetch_d/sitecustomize.py"], (), ""),
        (["webfetch_d.py", "__pycache__/webfetch_d.cpython-311.pyc"], (), ""),
        ([*_OWN, "webfetch_d.pth"], (), "webfetch_d.pth"),
        ([*_OWN, "webfetch_d/inner.pth"], (), "inner.pth"),
        ([*_OWN, "../../x.pth"], (), "x.pth"),
        ([*_OWN, "sitecustomize.py"], (), "sitecustomize"),
        ([*_OWN, "usercustomize/__init__.py"], (), "usercustomize"),
        ([*_OWN, "webfetch_d_boot.py"], (), "webfetch_d_boot.py"),
        ([*_OWN, "requests/__init__.py"], (), "requests/__init__.py"),
        ([*_OWN, "__pycache__/other.cpython-311.pyc"], (), "other"),
        ([*_OWN, "../../evil.py"], (), "evil.py"),
        (None, (), ""),
        (None, ("easy.pth",), "easy.pth"),
        (None, ("sitecustomize.py",), "sitecustomize"),
    ],
)
def test_a_distribution_is_refused_for_what_it_installs_beside_its_package(
    tmp_path, record, extra, refused
):
    """What runs at an interpreter's start (a ``.pth``, ``sitecustomize``,
    ``usercustomize``) or is importable by every other plugin and by the site (a
    top-level module besides the entry point's package) refuses the distribution, from
    its ``RECORD`` alone, and so does a file outside its directory (a script over a
    command of the environment) or in metadata not its own: its own metadata does not."""
    from django_webfetch.plugins.registry import _distribution_problem

    problem = _distribution_problem(_distribution(tmp_path, record, extra))
    if refused:
        assert refused in problem, problem
    else:
        assert problem == ""


def test_an_unsafe_distribution_is_refused_before_its_code_runs(tmp_path, monkeypatch):
    """Through the registry: the plugin is not loaded, the reason is on record (check
    E030), and its package's import-time code ran nowhere (not even in a sandbox)."""
    import sys

    from django_webfetch.plugins import registry

    _distribution(tmp_path, [*_OWN, "webfetch_d_boot.py"])
    site = tmp_path / "site"
    package = site / "webfetch_d"
    package.mkdir()
    mark = tmp_path / "ran"
    (package / "__init__.py").write_text(
        f"open({str(mark)!r}, 'w').close()\n"
        "def manifest():\n    return {'name': 'd', 'version': '1.0', 'egress': [], 'tools': []}\n"
    )
    monkeypatch.syspath_prepend(str(site))
    registry.reset()
    try:
        assert "d" not in {m.name for m in registry.manifests()}
        assert any("'d' refused (plugin_distribution_unsafe)" in p for p in registry.problems()), (
            registry.problems()
        )
        assert not mark.exists()
        assert "webfetch_d" not in sys.modules
    finally:
        monkeypatch.undo()
        registry.reset()
