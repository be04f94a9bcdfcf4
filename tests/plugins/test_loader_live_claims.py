"""Issue 30, attack 16, finding 4 fixed: the pinned loader accepts a file's digest only from
a live claim, one made for a pin a trusted instance records now (``plugins/loader.py``,
decision 0053 as amended).

Two plugins ``a`` and ``b`` (distributions ``webfetch-<name>``) require one dependency
whose module ``lazy`` they import at first use; the dependency is upgraded and rolled back
as pip installs it, instances are trusted, confirmed, untrusted and deleted through the
models' own ``save`` and ``delete``; the registry, the loader, the models and the tools are
the real ones; nothing patched.  After each step, the dependency's module is imported in
this process as a plugin's thread imports it at first use, long after a trusted call.
"""

from __future__ import annotations

import importlib
import itertools
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import requires_metadata, wheel
from tests.plugins.test_loader_namespaces_and_vendored_libraries import _PLUGIN

pytestmark = pytest.mark.django_db

_count = itertools.count()

#: The dependency's two releases: what ``lazy`` answers is which bytes ran.
_RELEASES = ("old", "new")


class _World:
    """Plugins ``a`` and ``b`` (fresh names per example) trusted in a fresh directory first
    on ``sys.path``, both requiring dependency ``dep`` (release ``old``); ``pins`` models
    which release each instance's recorded pin was taken at (``None``: untrusted or
    deleted), ``disk`` the release installed now."""

    def __init__(self, base: Path) -> None:
        number = next(_count)
        self.site = base / f"site{number}"
        self.names = {who: f"fx16{who}{number}" for who in ("a", "b")}
        self.dist, self.package = f"wfx16-dep{number}", f"wfx16dep{number}"
        self.module = f"{self.package}.lazy"
        self.path = list(sys.path)
        self.pins: dict[str, str | None] = {}
        self.disk = "old"
        self.instances: dict[str, Any] = {}

    def __enter__(self) -> _World:
        from django_webfetch.plugins import registry
        from django_webfetch.plugins.models import PluginInstance

        self._install("old", first=True)
        for name in self.names.values():
            package = f"webfetch_{name}"
            wheel(self.site, f"webfetch-{name}", {name: f"{package}:manifest"},
                  {f"{package}/__init__.py": _PLUGIN.format(module=self.module, name=name),
                   f"{package}/extra.py": "ANSWER = 'extra'\n"},
                  requires_metadata(f"webfetch-{name}", [self.dist]))  # fmt: skip
        sys.path.insert(0, str(self.site))
        importlib.invalidate_caches()
        registry.reset()
        for who, name in self.names.items():
            instance = PluginInstance.objects.create(plugin=name, alias=name, trusted=True)
            assert instance.trust_holds(), instance.trust_problem()
            self.instances[who], self.pins[who] = instance, "old"
        return self

    def _install(self, release: str, first: bool = False) -> None:
        if not first:
            shutil.rmtree(self.site / f"{self.dist.replace('-', '_')}-1.0.dist-info")
        # The releases differ in size: a file rewritten within the clock's tick on a reused
        # inode is then never taken for the other release by the pin's memo of each
        # file's digest by its identity (``provenance``: device, inode, size, times).
        lazy = f"ANSWER = {release!r}\n" + ("# the fix\n" if release == "new" else "")
        files = {f"{self.package}/__init__.py": "", f"{self.package}/lazy.py": lazy}
        wheel(self.site, self.dist, {}, files)
        importlib.invalidate_caches()
        self.disk = release

    def holding(self) -> list[str]:
        """The instances whose pin holds now: trusted for the release installed now."""
        return [who for who, pin in self.pins.items() if pin == self.disk]

    def step(self, action: str, who: str) -> str | None:
        """One step; what a call of ``who`` answered (``None`` for other steps)."""
        instance = self.instances.get(who)
        if action in ("upgrade", "rollback"):
            self._install("new" if action == "upgrade" else "old")
        elif instance is None:
            return None  # deleted: nothing of it to call, confirm or untrust
        elif action == "call":
            return self.call(who)
        elif action == "confirm":
            if instance.trusted:
                instance.confirm_trust()
            instance.trusted = True  # trusting again records the release installed now
            instance.save()
            self.pins[who] = self.disk
        elif action == "untrust":
            instance.trusted = False
            instance.save()
            self.pins[who] = None
        else:
            assert action == "delete"
            instance.delete()
            del self.instances[who]
            self.pins[who] = None
        return None

    def call(self, who: str) -> str:
        from django_webfetch.plugins.tools import plugin_tools
        from django_webfetch.tools.base import ToolContext

        sys.modules.pop(self.module, None)
        name = self.names[who]
        tool = next(t for t in plugin_tools() if t.name == f"{name}_run")
        context = ToolContext(approved=True, call_id=tool.name, plugin_instance=self.instances[who])
        return str(tool.execute({}, context).content)

    def lazy_import(self, module: str = "") -> str:
        """The dependency's module (or ``module``) imported here, as a trusted plugin's
        thread imports it at first use: what it answers, or ``refused:<reason>``."""
        module = module or self.module
        sys.modules.pop(module, None)
        try:
            return str(importlib.import_module(module).ANSWER)
        except ImportError as exc:
            return f"refused:{getattr(exc, 'reason', type(exc).__name__)}"
        finally:
            sys.modules.pop(module, None)

    def __exit__(self, *exc: Any) -> None:
        from django_webfetch.plugins import registry

        for instance in self.instances.values():
            instance.delete()
        sys.path[:] = self.path
        tops = {self.package, *(f"webfetch_{name}" for name in self.names.values())}
        for name in list(sys.modules):
            if name.partition(".")[0] in tops:
                sys.modules.pop(name)
        importlib.invalidate_caches()
        registry.reset()


_STEPS = st.one_of(
    st.tuples(st.sampled_from(["call", "confirm", "untrust", "delete"]), st.sampled_from("ab")),
    st.tuples(st.sampled_from(["upgrade", "rollback"]), st.just("")),
)

#: Finding 4's route: both called, the dependency upgraded, trust confirmed for b only,
#: b called, the old release put back.
_ROUTE = [("call", "a"), ("call", "b"), ("upgrade", ""), ("confirm", "b"), ("call", "b"),
          ("rollback", "")]  # fmt: skip


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(_STEPS, min_size=1, max_size=7))
@example(steps=_ROUTE)
@example(steps=[("call", "a"), ("call", "b"), ("upgrade", ""), ("confirm", "b"),
                ("rollback", ""), ("call", "a")])  # fmt: skip
@example(steps=[("call", "a"), ("call", "b"), ("untrust", "a"), ("upgrade", ""),
                ("confirm", "b"), ("call", "b"), ("rollback", ""), ("delete", "b")])  # fmt: skip
def test_a_lazy_import_runs_only_bytes_of_a_pin_that_holds_then(tmp_path, steps):
    """Whatever sequence of trusted calls of ``a`` and ``b``, upgrades and rollbacks of
    their shared dependency, confirmations, untrusting and deletions: after each step, a
    lazy import of the dependency's module in this process runs a release only when some
    instance's pin holds for it at that moment (trusted, for the release installed now),
    else it is refused (``plugin_code_changed``); and right after a trusted call whose pin
    holds, it runs that release (nothing a live pin holds is refused)."""
    with _World(tmp_path) as world:
        loaded = False  # whether a trusted call imported a plugin's code here yet
        for action, who in steps:
            answered = world.step(action, who)
            trusted_call = answered is not None and who in world.holding()
            loaded = loaded or trusted_call
            ran = world.lazy_import()
            if not loaded:
                continue  # no plugin's code here: the site's own import, unclaimed
            if ran in _RELEASES:
                assert ran == world.disk
                assert world.holding(), f"{ran!r} ran after {steps}: no pin holds it now"
            else:
                assert ran == "refused:plugin_code_changed", ran
            if trusted_call:
                # Its pin was found to hold before the call and claimed (the call itself
                # may run isolated once: a tool taken before the registry loaded again).
                assert ran == world.disk, f"{steps}: a holding pin's import was refused"


def test_an_instance_untrusted_by_another_process_loses_its_claim_at_the_next_trusted_call(
    tmp_path,
):
    """Another process untrusts ``a`` (a queryset update here: no signal reaches this
    process).  Until a trusted call runs here, ``a``'s claim stays: its module not yet
    imported still loads, from the reviewed bytes only (the window, documented).  The next
    trusted call of any plugin here (``b``) releases it: that module is refused from then
    on, though its bytes are unchanged (its names stay claimed, no pin holds them)."""
    from django_webfetch.plugins.models import PluginInstance

    with _World(tmp_path) as world:
        extra = f"webfetch_{world.names['a']}.extra"
        assert "old" in world.call("a")
        PluginInstance.objects.filter(pk=world.instances["a"].pk).update(
            trusted=False, trusted_record=""
        )
        assert world.lazy_import(extra) == "extra"
        assert "old" in world.call("b")
        assert world.lazy_import(extra) == "refused:plugin_code_changed"
        assert world.lazy_import() == "old"  # b's pin holds the dependency's bytes
