"""Issue 30, attack 14, finding 1 fixed: what a trusted plugin imports is executed only from
bytes its pin holds, checked when the import reads them (``plugin.loader``, decision 0053).

A plugin ``p`` (distribution ``webfetch-p``, package ``webfetch_p``) requiring ``wfdep-p``
(package ``wfdep_p``), put on ``sys.path`` and trusted; its tools and a thread it starts at
import import a module at first use.  Releases are installed as pip installs them; the
registry, the runtime, the models and the tools are the real ones; nothing patched.
"""

from __future__ import annotations

import importlib
import itertools
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import requires_metadata, wheel

pytestmark = pytest.mark.django_db

#: Set in this process by any changed module that runs here.
_RAN = "WF_FIX14_CHANGED_RAN"

_PLUGIN = """\
import sys
import threading

go = threading.Event()
seen = []
which = None


def _lazy(which):
    try:
        if which == 'own':
            from webfetch_p import impl as module
        elif which == 'added':
            from webfetch_p import extra as module
        else:
            from wfdep_p import mod as module
        return module.ANSWER
    except ImportError as exc:
        return 'refused:' + str(getattr(exc, 'reason', type(exc).__name__))


def _background():
    go.wait()
    if which is not None:
        seen.append(_lazy(which))


worker = threading.Thread(target=_background, daemon=True)
worker.start()


def warm(plugin, arguments):
    return 'warm'


def lazy(plugin, arguments):
    if arguments.get('answer'):
        with open(arguments['answer'], 'rb') as fh:  # waits for its API's answer
            fh.read()
    if arguments.get('background'):
        return 'waited'
    return _lazy(arguments['which'])


def manifest():
    return {'name': 'p', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'p_warm', 'description': 'x', 'handler': warm},
                      {'name': 'p_lazy', 'description': 'x', 'handler': lazy}]}
"""

_REVIEWED = "ANSWER = 'reviewed'\n"
_CHANGED = f"__import__('os').environ[{_RAN!r}] = '1'\nANSWER = 'OTHER CODE'\n"


def _install(site: Path, changed: str = "") -> None:
    """The plugin and its dependency installed in ``site``; ``changed`` (``own``, ``dep``
    or ``added``): the release whose module of that kind is other code."""
    for info in site.glob("*.dist-info"):
        shutil.rmtree(info)
    own = {"webfetch_p/__init__.py": _PLUGIN,
           "webfetch_p/impl.py": _CHANGED if changed == "own" else _REVIEWED}  # fmt: skip
    if changed == "added":
        own["webfetch_p/extra.py"] = _CHANGED
    wheel(site, "webfetch-p", {"p": "webfetch_p:manifest"}, own,
          requires_metadata("webfetch-p", ["wfdep-p"]))  # fmt: skip
    wheel(site, "wfdep-p", {}, {"wfdep_p/__init__.py": "",
          "wfdep_p/mod.py": _CHANGED if changed == "dep" else _REVIEWED})  # fmt: skip
    importlib.invalidate_caches()


class _Site:
    """Plugin ``p`` installed in a fresh directory, first on ``sys.path``, trusted; gone
    (path, modules, registry) at the end."""

    _count = itertools.count()

    def __init__(self, base: Path) -> None:
        self.site = base / f"site{next(self._count)}"
        self.path = list(sys.path)

    def __enter__(self) -> Any:
        from django_webfetch.plugins import registry
        from django_webfetch.plugins.models import PluginInstance

        _install(self.site)
        sys.path.insert(0, str(self.site))
        registry.reset()
        assert registry.origin("p") is not None, registry.problems()
        self.instance = PluginInstance.objects.create(plugin="p", alias="p", trusted=True)
        assert self.instance.trust_holds(), self.instance.trust_problem()
        return self

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        from django_webfetch.plugins.tools import plugin_tools
        from django_webfetch.tools.base import ToolContext

        found = next(t for t in plugin_tools() if t.name == tool)
        context = ToolContext(approved=True, call_id=tool, plugin_instance=self.instance)
        return str(found.execute(arguments, context).content)

    def __exit__(self, *exc: Any) -> None:
        from django_webfetch.plugins import registry

        module = sys.modules.get("webfetch_p")
        if module is not None and module.worker.is_alive():
            module.which = None
            module.go.set()
            module.worker.join(30)
        self.instance.delete()
        sys.path[:] = self.path
        for name in list(sys.modules):
            if name.partition(".")[0] in ("webfetch_p", "wfdep_p"):
                sys.modules.pop(name)
        importlib.invalidate_caches()
        registry.reset()
        os.environ.pop(_RAN, None)


def _background_import(which: str) -> str:
    module = sys.modules["webfetch_p"]
    module.which = which
    module.go.set()
    module.worker.join(30)
    assert not module.worker.is_alive()
    return str(module.seen[0])


@pytest.mark.long  # tens of seconds of plugin processes: started first (tests/conftest.py)
@settings(
    max_examples=16,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    which=st.sampled_from(["own", "dep", "added"]),
    when=st.sampled_from(["before", "during"]),
    thread=st.sampled_from(["handler", "background"]),
)
def test_changed_bytes_never_execute_here_whichever_file_when_and_thread(
    tmp_path, which, when, thread
):
    """Whichever file a release changes (the plugin's module, its dependency's, a module it
    adds), whenever it is installed (between the plugin's import and a call, or while a
    call waits in the reviewed code) and whichever thread then imports it (the handler, a
    thread the plugin started at import), the changed bytes never execute in this process:
    the import is refused (``plugin_code_changed``), or the call runs isolated."""
    with _Site(tmp_path) as site:
        assert "warm" in site.call("p_warm", {})  # the plugin imported here, its thread started
        if when == "before":
            _install(site.site, which)
            if thread == "handler":
                site.call("p_lazy", {"which": which})  # the pin fails first: isolated
                outcome = "isolated"
            else:
                outcome = _background_import(which)
        else:
            answer = site.site / "answer"
            os.mkfifo(answer)
            seen: list[str] = []

            def release_during_the_call() -> None:
                fd = os.open(answer, os.O_WRONLY)
                try:
                    _install(site.site, which)
                    if thread == "background":
                        seen.append(_background_import(which))
                    os.write(fd, b"the API's answer")
                finally:
                    os.close(fd)

            releaser = threading.Thread(target=release_during_the_call, daemon=True)
            releaser.start()
            arguments = {"which": which, "answer": str(answer), "background": thread != "handler"}
            result = site.call("p_lazy", arguments)
            releaser.join(30)
            outcome = seen[0] if seen else result
        assert os.environ.get(_RAN) is None, "a changed module ran in the site's process"
        assert "OTHER CODE" not in outcome
        if outcome != "isolated":
            assert "refused:plugin_code_changed" in outcome, outcome
        for name in ("webfetch_p.impl", "webfetch_p.extra", "wfdep_p.mod"):
            assert getattr(sys.modules.get(name), "ANSWER", None) != "OTHER CODE"


def test_a_background_threads_lazy_import_is_checked(tmp_path, caplog):
    """A thread the plugin started at its import imports a module at first use after a
    release was installed: refused, logged with its reason, nothing of it executed."""
    with _Site(tmp_path) as site:
        site.call("p_warm", {})
        _install(site.site, "own")
        assert _background_import("own") == "refused:plugin_code_changed"
        assert "webfetch_p.impl" not in sys.modules
        assert os.environ.get(_RAN) is None
    assert any("plugin_code_changed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("which", ["own", "dep"])
def test_unchanged_lazy_imports_still_work(tmp_path, which):
    """Nothing changed: a lazy import of the plugin's module or its dependency's, from the
    handler and from the plugin's thread, loads the reviewed code (through the pinned
    loader: no bytecode cache read or written)."""
    with _Site(tmp_path) as site:
        assert "reviewed" in site.call("p_lazy", {"which": which})
        assert _background_import(which) == "reviewed"
        name = "webfetch_p.impl" if which == "own" else "wfdep_p.mod"
        assert type(sys.modules[name].__spec__.loader).__name__ == "_PinnedSource"
        assert not list(site.site.rglob("*.pyc"))


def test_a_reload_after_a_release_is_refused(tmp_path):
    """``importlib.reload`` of a pinned module after a release: refused, the module keeps
    the reviewed code."""
    with _Site(tmp_path) as site:
        assert "reviewed" in site.call("p_lazy", {"which": "dep"})
        _install(site.site, "dep")
        module = sys.modules["wfdep_p.mod"]
        with pytest.raises(ImportError) as raised:
            importlib.reload(module)
        assert getattr(raised.value, "reason", "") == "plugin_code_changed"
        assert module.ANSWER == "reviewed"
        assert os.environ.get(_RAN) is None
