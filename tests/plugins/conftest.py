"""Fixtures of the plugin tests.

``tests/plugins/site`` holds a real distribution (``webfetch_example_plugin`` + its
``.dist-info`` with a ``django_webfetch.plugins`` entry point); putting the directory on
``sys.path`` installs it for ``importlib.metadata`` exactly as site-packages would.  The
``example`` fixture does that for the test that asks for it (and undoes it), so the rest of
the suite runs without the plugin, as a site without plugins would.
``tests/plugins/probe_site`` holds a hostile plugin the same way (``webfetch_code_probe``,
whose one tool runs the code it is given): the ``probe`` fixture installs it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SITE = os.path.join(os.path.dirname(__file__), "site")


@pytest.fixture(scope="session")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> str:
    """This test process's own copy of ``tests/plugins/site``: ``set_state`` writes the
    package's next version beside the package, and the suite's processes (xdist workers)
    run plugin tests at the same time, each playing its own upgrades."""
    target = tmp_path_factory.mktemp("plugin-site") / "site"
    shutil.copytree(
        SITE, target, ignore=shutil.ignore_patterns("state.json", "__pycache__", "*.pyc")
    )
    return str(target)


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch, example_site: str) -> Any:
    """The example plugin installed, reset to version 1.0, registries reloaded."""
    monkeypatch.syspath_prepend(example_site)
    import webfetch_example_plugin as module

    from django_webfetch.plugins import registry
    from django_webfetch.tools import default_registry

    module.set_state()
    registry.reset()
    default_registry.reset()
    yield module
    module.set_state()
    registry.reset()
    default_registry.reset()


@pytest.fixture
def system_library_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A directory made under ``/usr/local/lib`` (a system library directory the sandbox
    binds whole: ``bubblewrap._system``), named after the test's module, removed after the
    test."""
    if not os.path.isdir("/usr/local/lib") or os.path.islink("/usr/local/lib"):
        pytest.skip("no /usr/local/lib directory")
    module = request.module.__name__.rpartition(".")[2].removeprefix("test_")[:40]
    top = tempfile.mkdtemp(prefix=f"webfetch-{module}-", dir="/usr/local/lib")
    try:
        yield Path(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


LAB_NAMES = {
    "granted.lab.example": 0,
    "x.api.lab.example": 1,
    "ungranted.lab.example": 2,
    "redirector.lab.example": 3,
}


@pytest.fixture
def plugin_lab(lab_settings: Any, example: Any, group_factory: Any) -> Any:
    """The lab's DNS names for the example plugin, and its tool group enabled."""
    lab = lab_settings
    for name, index in LAB_NAMES.items():
        lab.dns.set(name, a=[lab.PUBLIC_V4[index]])
    lab.dns.set("intranet.lab.example", a=["10.0.0.10"])
    lab.dns.set("metadata.lab.example", a=["169.254.169.254"])
    lab.dns.set("mixed.lab.example", a=[lab.PUBLIC_V4[0], "10.0.0.10"])
    group_factory("example", scope="external_filtered", enabled=True)
    return lab


@pytest.fixture
def editor_user(user_factory: Any) -> Any:
    return user_factory(staff=True)


class Isolation:
    """How a test's plugin instances run: ``isolated`` (the default: a plugin process) or
    ``trusted`` (in this process, under the audit hook)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.trusted = mode == "trusted"

    def apply(self) -> None:
        """Every instance made so far runs this way."""
        from django_webfetch.plugins.models import PluginInstance

        for instance in PluginInstance.objects.all():
            # Saved, not a queryset update: turning trust on records the distribution
            # installed now (trust holds only for it,
            # tests/plugins/test_trust_belongs_to_a_distribution.py).
            instance.trusted = self.trusted
            instance.save()


@pytest.fixture(params=["isolated", "trusted"])
def isolation(request: pytest.FixtureRequest) -> Isolation:
    return Isolation(request.param)


@pytest.fixture
def trusted() -> Isolation:
    """For a test of the audit hook itself (in-process state the plugin process lacks)."""
    return Isolation("trusted")


PROBE_SITE = os.path.join(os.path.dirname(__file__), "probe_site")


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch, lab_settings: Any, group_factory: Any) -> Any:
    """The codeprobe plugin (``tests/plugins/probe_site``) installed; ``probe(code)`` runs
    ``code`` in its plugin process (with the audit hook's host window open, as
    tests/plugins/hostile_site does) and returns the runtime's CallOutcome."""
    from django_webfetch.plugins import registry, services
    from django_webfetch.plugins.client import PluginHttp
    from django_webfetch.plugins.runtime.host import execute
    from django_webfetch.tools import default_registry

    monkeypatch.syspath_prepend(PROBE_SITE)
    lab_settings.dns.set("granted.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    group_factory("codeprobe", scope="external_filtered", enabled=True)
    registry.reset()
    default_registry.reset()
    instance = services.install("codeprobe")

    def run(code: str) -> Any:
        http = PluginHttp(instance.pk, group="codeprobe", tool="codeprobe_run")
        call = {
            "tool": "codeprobe_run",
            "arguments": {"code": code},
            "config": {},
            "plugin": "codeprobe",
            "alias": instance.alias,
            "reference": instance.reference,
        }
        return execute(registry.origin("codeprobe"), ("codeprobe", instance.pk), call, http)

    run.instance = instance  # type: ignore[attr-defined]
    yield run
    registry.reset()
    default_registry.reset()


@pytest.fixture(autouse=True)
def no_plugin_process_outlives_its_test() -> Iterator[None]:
    """Every idle plugin process a test left in this host's pool ends with the test: the
    next test counts the plugin processes and threads below it, and the pool, from none
    (a full run found one left by an earlier test in
    ``test_host_bounds_on_a_plugin_process.py``)."""
    yield
    from django_webfetch.plugins.runtime.host import shutdown

    shutdown()


@pytest.fixture(autouse=True)
def claims_end_with_their_test() -> Iterator[None]:
    """The names a trusted import claimed (``plugins/loader.py``, decision 0053) stay
    claimed for the process, by design; a test's claims end with the test.  Two tests that
    install a distribution of the same name in two directories otherwise depended on their
    order: the second's copy was refused as unpinned whenever the first ran before it on
    the same worker (``test_plugin_dirs.py``, found by a full run of tests/plugins)."""
    from django_webfetch.plugins import loader

    claims, released = dict(loader._claims), dict(loader._released)
    index, pinned, dirs = loader._index, loader._pinned, loader._pinned_dirs
    yield
    with loader._lock:
        loader._claims.clear()
        loader._claims.update(claims)
        loader._released.clear()
        loader._released.update(released)
        loader._index, loader._pinned, loader._pinned_dirs = index, pinned, dirs


@pytest.fixture
def registry_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The registry reading ``sys.path`` with the directories a test prepends."""
    from django_webfetch.plugins import registry

    registry.reset()
    before = set(sys.path)
    yield monkeypatch
    added = tuple(os.path.realpath(p) + os.sep for p in sys.path if p and p not in before)
    monkeypatch.undo()
    # Every module imported from a directory the test prepended leaves ``sys.modules`` (a
    # trusted import): the next test's per-call checks would see it imported in this
    # process from a site that no longer exists.
    for name, module in list(sys.modules.items()):
        places = [getattr(module, "__file__", None), *(getattr(module, "__path__", None) or [])]
        if added and any(
            os.path.realpath(str(place)).startswith(added) for place in places if place
        ):
            sys.modules.pop(name, None)
    importlib.invalidate_caches()
    registry.reset()


@pytest.fixture
def plugin_dirs(settings: Any) -> Iterator[Any]:
    """``set(*dirs)``: ``WEBFETCH_PLUGIN_DIRS`` and the registries loaded again; at the end,
    every module imported from those directories (a trusted import) leaves ``sys.modules``."""
    from django_webfetch.plugins import registry
    from django_webfetch.tools import default_registry

    chosen: list[str] = []

    def set_dirs(*dirs: Any) -> None:
        chosen.extend(os.path.realpath(str(d)) for d in dirs)
        settings.WEBFETCH_PLUGIN_DIRS = [str(d) for d in dirs]
        registry.reset()
        default_registry.reset()

    yield set_dirs
    settings.WEBFETCH_PLUGIN_DIRS = []
    # The registries forget those directories' plugins and tools: a full run found a test's
    # plugin tool still offered to a later test of tests/django on the same worker.
    registry.reset()
    default_registry.reset()
    for name, module in list(sys.modules.items()):
        where = os.path.realpath(str(getattr(module, "__file__", None) or "/nonexistent"))
        if any(where.startswith(d + os.sep) for d in chosen):
            sys.modules.pop(name, None)
