"""A symbolic link named like a plugin's top-level package or module never widens its
sandbox (issue 30, round 29, finding 1, High; decision 0058 amended).

The host bound the resolved path of both ``<top>`` and ``<top>.py`` of the plugin's
directory whenever they existed, and the guest gave both a Landlock read rule: a
distribution shipping its package ``webfetch_s29/`` and, beside it, a link
``webfetch_s29.py -> ..`` (never imported: a package wins over a module) had the link's
target, resolved in the host, bound into its sandbox: the project around a plugin
directory kept in it (``BASE_DIR`` then counted as what the guest needs, so it was not
masked), ``/srv`` around the docs' own layout, and, without Landlock, any host path
(``/etc``, ``/proc/self/cwd/.env``: the host's own working directory).

Now an entry named like the plugin's package or module that is a link (or resolves
anywhere but in the plugin's directory) starts no process (``bubblewrap._bound`` raises
``PluginEntryLinked``; the call or the manifest read fails ``plugin_path_unsafe``, the
registry refuses the entry point with that reason), and the guest makes no rule through
one.  The tests are the outside attacker's, each run through the real sandbox.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.packages import open_up

_SECRET = "s29-the-sites-secret-key-0123456789"

#: A plugin whose tool reads the paths its argument names (or PATHS).
_READER = """\
import json, os


def run(plugin, arguments):
    seen = {}
    for path in PATHS:
        try:
            with open(path, 'rb') as fh:
                seen[path] = fh.read().decode('utf-8', 'replace')[:300]
        except OSError as exc:
            seen[path] = type(exc).__name__
    return json.dumps(seen)


PATHS = %(paths)r


def manifest():
    return {'name': %(name)r, 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'read', 'description': 'x',
                       'parameters': {'type': 'object'}, 'handler': run}]}
"""

#: The host, in a child: optionally on a kernel without Landlock (simulated as
#: tests/plugins/test_plugin_process_cannot_reach_the_site.py does), one call of the tool.
_HOST = r"""
import errno, json, sys
if sys.argv[3] == "no-landlock":
    import pyseccomp as sc
    rules = sc.SyscallFilter(sc.ALLOW)
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "landlock_create_ruleset")
    rules.load()
from django_webfetch.plugins.runtime import host
site, top = sys.argv[1:3]
origin = host.Origin(top + ":manifest", site, top)
limits = host.Limits(5, 20, 1 << 30, 1 << 16, 5, 0)
call = {"tool": "read", "arguments": {}, "config": {}, "plugin": "s29", "alias": "x",
        "reference": "x"}
try:
    outcome = host.execute(origin, ("s29", 1), call, None, limits=limits)
except host.RuntimeFailure as exc:
    print(json.dumps({"kind": "refused", "code": exc.code, "detail": exc.detail}))
else:
    print(json.dumps({"kind": outcome.kind, "text": outcome.text, "code": outcome.code,
                      "error": outcome.error, "landlock": host._host_landlock_abi()}))
"""


def _run_host(site: Path, top: str, kernel: str, cwd: Path) -> dict:
    import django_webfetch
    from django_webfetch.plugins.runtime.bubblewrap import site_dirs

    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", _HOST, str(site), top, kernel],
        capture_output=True, text=True, timeout=120, cwd=str(cwd), start_new_session=True,
        env={**env, "PYTHONPATH": ":".join([root, *site_dirs()])}, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _layout(tmp_path: Path, site: Path, link: str, paths: list[str], module: bool = False) -> None:
    """The plugin's code as a package and the link named like its module, or (``module``)
    the code as a module and the link named like its package."""
    site.mkdir(parents=True)
    source = _READER % {"name": "s29", "paths": paths}
    if module:
        (site / "webfetch_s29.py").write_text(source)
        os.symlink(link, site / "webfetch_s29")
    else:
        (site / "webfetch_s29").mkdir()
        (site / "webfetch_s29" / "__init__.py").write_text(source)
        os.symlink(link, site / "webfetch_s29.py")
    open_up(tmp_path)


@pytest.mark.django_db
def test_a_link_named_like_the_plugins_module_beside_its_package_in_the_project_is_refused(
    tmp_path, plugin_dirs, settings
):
    """History: issue 30, round 29, finding 1 (High), with Landlock where the kernel has it.
    A ``startproject`` directory keeps its plugins in ``<BASE_DIR>/plugins`` (as the example
    project does); a distribution there (a true ``RECORD``) plus one link
    ``webfetch_s29.py -> ..`` (a tarball, a ``git clone``, ``cp -a``) read the project's
    ``.env`` and ``local_settings.py``.  Now its entry point is refused
    (``plugin_path_unsafe``, naming the link) and nothing of it runs."""
    from django_webfetch.plugins import registry
    from tests.plugins.packages import wheel

    project = tmp_path / "mysite"
    project.mkdir()
    env_file = project / ".env"
    env_file.write_text(f"SECRET_KEY={_SECRET}\n")
    (project / "local_settings.py").write_text(f"SECRET_KEY = {_SECRET!r}\n")
    site = project / "plugins"
    paths = [str(env_file), str(project / "local_settings.py")]
    wheel(site, "webfetch-s29", {"s29": "webfetch_s29:manifest"},
          {"webfetch_s29/__init__.py": _READER % {"name": "s29", "paths": paths}})  # fmt: skip
    os.symlink("..", site / "webfetch_s29.py")
    open_up(tmp_path)
    settings.BASE_DIR = project
    plugin_dirs(site)
    assert registry.origin("s29") is None
    [refused] = [p for p in registry.refusals() if p.reason == "plugin_path_unsafe"]
    assert "webfetch_s29.py" in refused.message and "symbolic link" in refused.message, refused


@pytest.mark.django_db
def test_a_link_to_the_plugin_dirs_ancestor_in_the_docs_layout_is_refused(
    tmp_path, plugin_dirs, settings
):
    """History: issue 30, round 29, finding 1 (High), the docs' own layout: each plugin in a
    directory of its own (``/srv/plugins/<name>``), the project beside them.
    ``webfetch_s29.py -> ../..`` bound ``/srv`` whole, Landlock-readable (a compose file's
    ``/srv/deploy/.env``, every other plugin's directory).  Refused now."""
    from django_webfetch.plugins import registry
    from tests.plugins.packages import wheel

    srv = tmp_path / "srv"
    project = srv / "mysite"
    project.mkdir(parents=True)
    deploy = srv / "deploy"
    deploy.mkdir()
    (deploy / ".env").write_text(f"SECRET_KEY={_SECRET}\n")
    site = srv / "plugins" / "s29"
    source = _READER % {"name": "s29", "paths": [str(deploy / ".env")]}
    wheel(site, "webfetch-s29", {"s29": "webfetch_s29:manifest"},
          {"webfetch_s29/__init__.py": source})  # fmt: skip
    os.symlink("../..", site / "webfetch_s29.py")
    open_up(tmp_path)
    settings.BASE_DIR = project
    plugin_dirs(site)
    assert registry.origin("s29") is None
    [refused] = [p for p in registry.refusals() if p.reason == "plugin_path_unsafe"]
    assert "webfetch_s29.py" in refused.message and "symbolic link" in refused.message, refused


@pytest.mark.parametrize("target", ["host-cwd", "etc", "etc-as-package", "no-link"])
def test_without_landlock_a_link_named_like_the_plugins_module_starts_no_process(tmp_path, target):
    """History: issue 30, round 29, finding 1 (High), without Landlock (a kernel without
    it, simulated as tests/plugins/test_plugin_process_cannot_reach_the_site.py does),
    through the runtime directly (no registry): ``webfetch_s29.py -> /proc/self/cwd/.env``
    (the host's own working directory's ``.env``), ``-> /etc``, and the other way round,
    the code in ``webfetch_s29.py`` and a link ``webfetch_s29 -> /etc`` named like a
    package, each read the host's files.  Now the call is refused
    (``plugin_path_unsafe``) before any process starts; ``no-link`` (the same plugin, its
    module a plain file) is the control: it runs, and reads neither."""
    project = tmp_path / "mysite"
    project.mkdir()
    env_file = project / ".env"
    env_file.write_text(f"SECRET_KEY={_SECRET}\n")
    site = tmp_path / "srv" / "plugins"
    paths = [str(env_file), "/etc/passwd"]
    if target == "no-link":
        site.mkdir(parents=True)
        (site / "webfetch_s29.py").write_text(_READER % {"name": "s29", "paths": paths})
        open_up(tmp_path)
    else:
        link = {"host-cwd": "/proc/self/cwd/.env", "etc": "/etc", "etc-as-package": "/etc"}
        _layout(tmp_path, site, link[target], paths, target == "etc-as-package")
    report = _run_host(site, "webfetch_s29", "no-landlock", project)
    if target != "no-link":
        assert report["kind"] == "refused" and report["code"] == "plugin_path_unsafe", report
        assert "symbolic link" in report["detail"], report
        return
    assert report["kind"] in ("text", "json"), report
    seen = json.loads(report["text"])
    assert _SECRET not in seen[str(env_file)], seen
    assert not seen["/etc/passwd"].startswith("root:"), seen
