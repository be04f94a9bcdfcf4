"""Issue 30, attack 15, findings 1 and 3 fixed (decision 0054): the pinned loader claims the
pinned distributions' files, not a shared namespace's other portions, and loads a pinned
extension by its path (a wheel's vendored library is found) after proving it is the file
hashed.

Distributions are written as pip installs them (RECORD of every file); the registry, the
loader, the models and the tools are the real ones; nothing patched.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import itertools
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import (
    install_extension,
    linked_extension,
    linking_extension,
    requires_metadata,
    vendored_library,
    wheel,
)

pytestmark = pytest.mark.django_db

#: Set in this process by any changed module that runs here.
_RAN = "WF_FIX15_CHANGED_RAN"
_CHANGED = f"__import__('os').environ[{_RAN!r}] = '1'\nANSWER = 'OTHER CODE'\n"
_count = itertools.count()

_PLUGIN = """\
import importlib


def run(plugin, arguments):
    return importlib.import_module({module!r}).ANSWER


def manifest():
    return {{'name': {name!r}, 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{{'name': {name!r} + '_run', 'description': 'x', 'handler': run}}]}}
"""


def _forget(path: list[str], *tops: str, plugin: str = "") -> None:
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    PluginInstance.objects.filter(plugin=plugin).delete()

    sys.path[:] = path
    for name in list(sys.modules):
        if name.partition(".")[0] in tops:
            sys.modules.pop(name)
    importlib.invalidate_caches()
    registry.reset()
    os.environ.pop(_RAN, None)


def _reinstall(site: Path, dist: str, files: dict[str, str], meta: Any = None) -> None:
    """``dist`` installed again over itself, as pip upgrades it (RECORD rewritten)."""
    shutil.rmtree(site / f"{dist.replace('-', '_')}-1.0.dist-info")
    wheel(site, dist, {}, files, meta)
    importlib.invalidate_caches()


def _trusted_call(site: Path, plugin: str, module: str, requires: list[str]) -> str:
    """Plugin ``plugin`` (importing ``module`` at first use, requiring ``requires``)
    installed into ``site`` (first on ``sys.path``), trusted, and its tool called once.
    The instance stays (``_forget`` deletes it): a deleted instance's claim is released,
    and a module below its names imported later refused (issue 30, attack 16, finding 4)."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    package = f"webfetch_{plugin}"
    source = _PLUGIN.format(module=module, name=plugin)
    wheel(site, f"webfetch-{plugin}", {plugin: f"{package}:manifest"},
          {f"{package}/__init__.py": source},
          requires_metadata(f"webfetch-{plugin}", requires))  # fmt: skip
    importlib.invalidate_caches()
    registry.reset()
    assert registry.origin(plugin) is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin=plugin, alias=plugin, trusted=True)
    assert instance.trust_holds(), instance.trust_problem()
    tool = next(t for t in plugin_tools() if t.name == f"{plugin}_run")
    context = ToolContext(approved=True, call_id=tool.name, plugin_instance=instance)
    return str(tool.execute({}, context).content)


@contextlib.contextmanager
def trusted_dependency(site: Path, plugin: str, package: str, dist: str) -> Iterator[None]:
    """Distribution ``dist`` (top-level ``package``), installed into ``site`` before, put
    first on ``sys.path`` and required by plugin ``plugin``, trusted, whose call imports
    ``package`` and answers 'reviewed' (``_trusted_call``); on exit, all of it forgotten."""
    path = list(sys.path)
    sys.path.insert(0, str(site))
    try:
        called = _trusted_call(site, plugin, package, [dist])
        assert "reviewed" in called and "Error" not in called, called[-300:]
        yield
    finally:
        _forget(path, package, f"webfetch_{plugin}", plugin=plugin)


def _imported(name: str) -> tuple[str, str]:
    """(``name``'s ``ANSWER`` or why its import was refused, its loader's class name)."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        return f"refused:{getattr(exc, 'reason', type(exc).__name__)}", ""
    return str(module.ANSWER), type(module.__spec__.loader).__name__


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    depth=st.integers(min_value=1, max_value=2),
    kind=st.sampled_from(["module", "package"]),
    change=st.sampled_from(["other", "pinned", "added"]),
    dist_only_top=st.booleans(),
)
def test_a_shared_namespace_serves_only_the_pinned_distributions_modules_from_the_pin(
    tmp_path, depth, kind, change, dist_only_top
):
    """Whatever the namespace's depth (``ns`` or ``ns.sub``, both namespace packages),
    whether the pinned distribution provides a module or a regular package there, and
    whether the plugin requires it directly or through another dependency: after a
    trusted call, another distribution's module of that namespace is imported by the
    import system's own finders (an upgrade of it loads, not refused), while a module the
    pinned distribution provides, and one a later release of it adds to its regular
    package, is served only from pinned bytes (changed or added: ``plugin_code_changed``,
    nothing of it executed)."""
    assume(not (change == "added" and kind == "module"))
    k = next(_count)
    ns = f"wfns15_{k}"
    level = "/".join([ns, "sub"][:depth])
    dotted = level.replace("/", ".")
    if kind == "module":
        pinned = {f"{level}/a.py": "ANSWER = 'reviewed'\n", f"{level}/c.py": "ANSWER = 'c'\n"}
        first, lazy = f"{dotted}.a", f"{dotted}.c"
    else:
        pinned = {f"{level}/a/__init__.py": "ANSWER = 'reviewed'\n",
                  f"{level}/a/c.py": "ANSWER = 'c'\n"}  # fmt: skip
        first, lazy = f"{dotted}.a", f"{dotted}.a.c"
    other = {f"{level}/b.py": "ANSWER = 'the site'\n", f"{level}/b0.py": "ANSWER = 'b0'\n"}
    site = tmp_path / f"site{k}"
    dep = f"wfns15-a{k}"
    requires = [dep]
    wheel(site, dep, {}, pinned)
    if dist_only_top:  # required through a dependency of its own
        middle = f"wfns15-m{k}"
        wheel(site, middle, {}, {f"wfns15m{k}/__init__.py": ""}, requires_metadata(middle, [dep]))
        requires = [middle]
    wheel(site, f"wfns15-b{k}", {}, other)  # the site's, no dependency of the plugin
    path = list(sys.path)
    sys.path.insert(0, str(site))
    plugin = f"ns{k}"
    try:
        called = _trusted_call(site, plugin, first, requires)
        assert "reviewed" in called and "Error" not in called, called[-300:]
        answer, loader = _imported(f"{dotted}.b0")
        assert (answer, loader) == ("b0", "SourceFileLoader"), "another distribution's module"
        if change == "other":
            _reinstall(site, f"wfns15-b{k}", {**other, f"{level}/b.py": "ANSWER = 'upgraded'\n"})
            assert _imported(f"{dotted}.b") == ("upgraded", "SourceFileLoader")
        elif change == "pinned":
            changed = next(p for p in pinned if p.endswith("/c.py"))
            _reinstall(site, dep, {**pinned, changed: _CHANGED})
            assert _imported(lazy) == ("refused:plugin_code_changed", "")
        else:
            _reinstall(site, dep, {**pinned, f"{level}/a/extra.py": _CHANGED})
            assert _imported(f"{dotted}.a.extra") == ("refused:plugin_code_changed", "")
        assert os.environ.get(_RAN) is None, "changed code ran in the site's process"
    finally:
        _forget(path, ns, f"webfetch_{plugin}", f"wfns15m{k}", plugin=plugin)


# -- an extension linking a vendored library (the manylinux layout) -----------------------


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    layout=st.sampled_from(["libs_dir", "beside", "in_package"]),
    change=st.sampled_from(["none", "library", "extension"]),
)
def test_a_pinned_extension_loads_with_its_vendored_library_and_only_the_pinned_bytes(
    tmp_path, layout, change
):
    """Whichever place the extension's vendored library is in (``<dist>.libs`` beside its
    package, as auditwheel puts it; beside the extension; a directory of the package),
    a trusted plugin's dependency built so imports at first use, by its path: the
    library is found through ``$ORIGIN`` and the module answers.  When a release changes
    the extension or its library after the trust's pin was taken, the import is refused
    (``plugin_code_changed``): the extension's ``PyInit`` never ran with other bytes."""
    k = next(_count)
    dist, package = f"wfext15-{k}", f"wfext15_{k}"
    libname = f"libwfx15_{k}.so"
    where = {"libs_dir": (f"{package}.libs", "$ORIGIN/../" + f"{package}.libs"),
             "beside": (package, "$ORIGIN"),
             "in_package": (f"{package}/_libs", "$ORIGIN/_libs")}[layout]  # fmt: skip
    build = tmp_path / f"build{k}"
    extension, library = linked_extension(build, libname, "reviewed", where[1])
    site = tmp_path / f"site{k}"
    target = install_extension(site, dist, package, extension, library, f"{where[0]}/{libname}")
    path = list(sys.path)
    sys.path.insert(0, str(site))
    plugin = f"ext{k}"
    try:
        # A release changing a file while the pin is taken would fail the pin: the change
        # lands after the trusted call took it and before the first import.
        called = _trusted_call(site, plugin, package, [dist])
        assert "reviewed" in called and "Error" not in called, called[-300:]
        if change == "library":
            changed = vendored_library(build / "other", libname, "OTHER CODE")
            (site / where[0] / libname).unlink()
            (site / where[0] / libname).write_bytes(changed)
        elif change == "extension":
            target.unlink()
            target.write_bytes(linking_extension(build, libname, "$ORIGIN/nowhere") + b"\0")
        importlib.invalidate_caches()
        try:
            answer = importlib.import_module(f"{package}._speed").answer()
        except ImportError as exc:
            answer = f"refused:{getattr(exc, 'reason', type(exc).__name__)}"
        expected = "reviewed" if change == "none" else "refused:plugin_code_changed"
        assert answer == expected
    finally:
        _forget(path, package, f"webfetch_{plugin}", plugin=plugin)
