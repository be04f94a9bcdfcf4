"""``WEBFETCH_PLUGIN_DIRS`` (docs/decisions/0049-plugin-directories-off-the-site-path.rst):
plugin distributions found off the site's ``sys.path``, imported by location when trusted,
and check E035 for a plugin directory left on ``sys.path``.

The distributions are written as pip installs them (``tests/plugins/packages.py``: a
``.dist-info`` with a true ``RECORD``) into the test's own directories.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db

#: A plugin ``d`` whose tool answers where its module was loaded from.
_WHERE = """\
import os


def run(plugin, arguments):
    return os.path.dirname(os.path.abspath(__file__))


def manifest():
    return {'name': 'd', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'd_run', 'description': 'x', 'handler': run}]}
"""


def test_a_trusted_plugin_of_a_plugin_dir_is_imported_by_location_never_via_sys_path(
    tmp_path, plugin_dirs
):
    """A ``trusted`` instance runs its plugin in the site's process: the package is
    imported from its ``WEBFETCH_PLUGIN_DIRS`` directory by location, and that directory
    is still on no ``sys.path`` entry afterwards."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    site = tmp_path / "srv" / "d"
    wheel(site, "webfetch-d", {"d": "webfetch_d:manifest"}, {"webfetch_d/__init__.py": _WHERE})
    plugin_dirs(site)
    assert registry.origin("d").path == str(site), registry.problems()
    instance = PluginInstance.objects.create(plugin="d", alias="d", trusted=True)
    assert instance.trust_holds()
    tool = next(t for t in plugin_tools() if t.name == "d_run")
    result = tool.execute({}, ToolContext(approved=True, call_id="d", plugin_instance=instance))
    assert result.ok, result.content
    assert str(site / "webfetch_d") in result.content
    assert sys.modules["webfetch_d"].__file__ == str(site / "webfetch_d" / "__init__.py")
    assert not any(os.path.realpath(p or ".").startswith(str(site)) for p in sys.path)


def test_a_plugin_dir_also_on_sys_path_loads_once_and_is_e035(tmp_path, plugin_dirs, monkeypatch):
    """A directory both in ``WEBFETCH_PLUGIN_DIRS`` and on ``sys.path`` (left there from
    the old layout): its distribution is one (its metadata directory, once), a trusted
    import by location finds its own files on ``sys.path`` and loads, and check E035 says
    to take the directory off ``sys.path``."""
    from django_webfetch import checks
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime.host import Origin

    site = tmp_path / "srv" / "d"
    wheel(site, "webfetch-d", {"d": "webfetch_d:manifest"}, {"webfetch_d/__init__.py": _WHERE})
    monkeypatch.syspath_prepend(str(site))
    plugin_dirs(site)
    assert registry.origin("d") == Origin("webfetch_d:manifest", str(site), "webfetch_d")
    assert not registry.problems()
    assert registry._import(registry.origin("d"))["name"] == "d"
    assert sys.modules["webfetch_d"].__file__ == str(site / "webfetch_d" / "__init__.py")
    assert [m.id for m in checks.check_plugin_path()] == ["django_webfetch.E035"]


def test_a_by_location_import_refuses_a_name_the_site_provides(tmp_path, plugin_dirs):
    """A trusted import by location is refused (``plugin_origin_mismatch``) before
    anything of it runs when its top-level name is a module the site can import from its
    own ``sys.path``: the plugin would stand in for it in ``sys.modules``."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.manifest import ManifestError
    from django_webfetch.plugins.runtime.host import Origin

    site = tmp_path / "srv" / "k"
    (site / "kombu").mkdir(parents=True)
    (site / "kombu" / "__init__.py").write_text("raise SystemExit('ran')\n")
    plugin_dirs(site)
    with pytest.raises(ManifestError) as refused:
        registry._import(Origin("kombu:manifest", str(site), "kombu"))
    assert refused.value.reason == "plugin_origin_mismatch"
    assert "kombu" not in sys.modules or "srv" not in str(sys.modules["kombu"].__file__)


def test_distributions_of_plugin_dirs_count_in_the_shared_name_map_and_the_memo(
    tmp_path, plugin_dirs
):
    """A plugin-dir distribution installing a name a site distribution installs is refused
    (the shared-name map covers the plugin directories); its names are memoized like a
    site distribution's, keyed by its files."""
    from django_webfetch.plugins import registry

    site = tmp_path / "srv" / "s"
    wheel(site, "webfetch-s", {"s": "webfetch_s:manifest"},
          {"webfetch_s/__init__.py": MANIFEST % "s", "kombu/__init__.py": ""})  # fmt: skip
    plugin_dirs(site)
    assert registry.get_manifest("s") is None
    assert any("'s'" in p and "plugin_distribution_unsafe" in p for p in registry.problems())
    registry._names_memo.clear()
    ok = tmp_path / "srv" / "ok"
    wheel(ok, "webfetch-ok", {"ok": "webfetch_ok:manifest"},
          {"webfetch_ok/__init__.py": MANIFEST % "ok"})  # fmt: skip
    time.sleep(registry._SETTLE_NS / 1e9 + 0.2)  # settled: the memo skips newer files
    plugin_dirs(ok)
    assert registry.get_manifest("ok") is not None, registry.problems()
    memoized = [k for k in registry._names_memo if str(k[0]).startswith(os.path.realpath(ok))]
    assert memoized, "the plugin directory's distribution is memoized"


def test_a_plugin_directory_on_sys_path_is_e035_and_site_packages_is_not(tmp_path, monkeypatch):
    """E035: a ``sys.path`` directory other than the interpreter's package directories
    holding a plugin distribution; none for the interpreter's ``site-packages`` (W036
    there), nor for a directory on ``sys.path`` without plugin distributions, nor for
    ``WEBFETCH_PLUGIN_DIRS``."""
    import site as site_module

    from django_webfetch import checks

    assert checks.check_plugin_path() == []
    plugin = tmp_path / "srv" / "p"
    wheel(plugin, "webfetch-p", {"p": "webfetch_p:manifest"},
          {"webfetch_p/__init__.py": MANIFEST % "p"})  # fmt: skip
    plain = tmp_path / "srv" / "plain"
    wheel(plain, "plain", {}, {"plain/__init__.py": ""})
    monkeypatch.syspath_prepend(str(plain))
    assert checks.check_plugin_path() == []
    monkeypatch.syspath_prepend(str(plugin))
    importlib.invalidate_caches()
    found = checks.check_plugin_path()
    assert [m.id for m in found] == ["django_webfetch.E035"]
    assert str(plugin) in found[0].msg and "webfetch-p" in found[0].msg
    # A directory named ``site-packages`` is not the interpreter's for that name alone ...
    packages = tmp_path / "lib" / "site-packages"
    wheel(packages, "webfetch-q", {"q": "webfetch_q:manifest"},
          {"webfetch_q/__init__.py": MANIFEST % "q"})  # fmt: skip
    monkeypatch.setattr(sys, "path", [str(packages), *sys.path[1:]])  # ``plugin`` off
    assert [m.id for m in checks.check_plugin_path()] == ["django_webfetch.E035"]
    # ... one of the interpreter's package directories is not E035: its plugin is one of
    # the site's own packages, W036 (tests/plugins/test_implicit_imports_of_the_site.py).
    monkeypatch.setattr(site_module, "getsitepackages", lambda: [str(packages)])
    assert [m.id for m in checks.check_plugin_path()] == ["django_webfetch.W036"]


@pytest.mark.parametrize(
    "value",
    ["/srv/plugins", b"/srv", ["relative/dir"], [1], {"a": 1}, None],
)
def test_plugin_dirs_of_the_wrong_shape_are_e001(settings, value):
    from django_webfetch import checks
    from django_webfetch.plugins import registry

    settings.WEBFETCH_PLUGIN_DIRS = value
    assert "WEBFETCH_PLUGIN_DIRS" in " ".join(m.msg for m in checks.check_settings())
    assert registry.plugin_dirs() == []


_groups = st.from_regex(r"[a-z][a-z0-9_.]{0,30}", fullmatch=True).filter(
    lambda g: g not in ("django_webfetch.plugins", "console_scripts", "gui_scripts")
)


@hsettings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(group=_groups)
def test_any_entry_point_group_besides_the_plugins_refuses_the_distribution(
    tmp_path_factory, settings, group
):
    """Whatever the other group is named, a plugin distribution declaring it is refused
    (``plugin_distribution_unsafe``, naming the group) before anything of it is imported."""
    from django_webfetch.plugins import registry

    site = tmp_path_factory.mktemp("g")
    info = wheel(site, "webfetch-g", {"g": "webfetch_g:manifest"},
                 {"webfetch_g/__init__.py": "raise SystemExit('imported')\n"})  # fmt: skip
    points = (info / "entry_points.txt").read_text() + f"\n[{group}]\nx = webfetch_g:other\n"
    (info / "entry_points.txt").write_text(points)
    settings.WEBFETCH_PLUGIN_DIRS = [str(site)]
    try:
        registry.reset()
        assert registry.get_manifest("g") is None
        assert any(
            "'g'" in p and "plugin_distribution_unsafe" in p and repr(group) in p
            for p in registry.problems()
        ), registry.problems()
    finally:
        settings.WEBFETCH_PLUGIN_DIRS = []
        registry.reset()
