"""Plugin tools: a manifest's tool specs as assistant ``Tool``s.

A plugin tool's handler is called as ``handler(plugin, arguments)`` where ``plugin`` is a
``PluginHandle`` (``.http`` the host-owned client, ``.config`` the instance's config,
``.alias``).  It runs in a plugin process (``runtime``: no network of its own, ``http``
an RPC to the host-owned client), or, for an instance the operator marked ``trusted``,
here inside ``sandbox.plugin_scope``: the network is reachable only through
``plugin.http``.  What it returns goes to the model inside the untrusted-content
fence (a plugin relays what servers sent).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from django_webfetch.net.errors import EgressDenied, WebFetchError
from django_webfetch.net.policy import Scope
from django_webfetch.tools.base import Effect, Tool, ToolCallLike, ToolContext, ToolResult
from django_webfetch.tools.registry import unencodable_arguments

from .manifest import Manifest, ToolSpec, tool_group
from .sandbox import host_io, plugin_scope

__all__ = [
    "Contest",
    "PluginHandle",
    "PluginTool",
    "offered_when_installed",
    "plugin_tools",
    "registry_source",
    "served_specs",
    "tool_group",
    "tool_problems",
]

logger = logging.getLogger("django_webfetch.plugins")

#: A plugin's text result is bounded like a page's.
_MAX_RESULT_CHARS = 20_000

#: Trust found to hold, by (instance, recorded distribution), with the registry generation
#: it was found in: the distribution is looked up again (~4 ms: ``importlib.metadata`` scans
#: ``sys.path``) once per generation, before the first in-process import of that generation;
#: the code digest alone (``_pin_holds``) is compared at every call.
_trust_seen: dict[tuple[Any, Any], int] = {}


def _pin_holds(instance: Any) -> bool:
    """The code of the plugin's package where the registry serves it from, and of its
    installed dependencies, is the code trust was given to: ``closure.trust_digest`` (a
    walk and a ``stat`` per file, each file's hash memoized by its identity; the closure's
    distributions remembered by the identity of the directories and metadata they were
    found from, decision 0051) equals the instance's recorded digest."""
    from . import registry

    origin = registry.origin(instance.plugin)
    recorded = instance.trusted_record
    if origin is None or not recorded:
        return False
    # When it holds, what the plugin imports from then on is checked against the pin as
    # its bytes are read (``registry.pin_imports``, decision 0053): this comparison gives
    # the early, clear failure; that one covers what runs during and after the call.
    return registry.pin_imports(instance.plugin, origin, recorded)


def _trust_holds(instance: Any) -> bool:
    """``instance.trust_holds()``, looked up once per registry generation, and the pin
    (``_pin_holds``) compared again at every call: a module the handler imports at first
    use is imported from the code trust was given to (decision 0050)."""
    from . import loader, registry

    # Claims of pins no trusted instance records now (untrusted, deleted or confirmed for
    # another release in another process; this one's saves release them at once).
    release_stale_claims()
    if not instance.trusted:
        return False
    key = (instance.pk, instance.trusted_for())
    generation = registry.generation()
    if _trust_seen.get(key) == generation:
        if _pin_holds(instance):
            return _imports_what_was_pinned(instance)
        # Installed code changed since trust was found to hold (a reinstall under a
        # long-running process): this call runs isolated, and the registry loads again.
        _trust_seen.pop(key, None)
        registry.reset()
        return False
    if not instance.trust_holds():
        # The installed distribution is not the recorded one: none of the bytes the
        # claim made for the recorded pin holds is accepted any more (decision 0053).
        if instance.trusted_record:
            loader.release(instance.plugin, instance.trusted_record, "its trust no longer holds")
        return False
    if not _pin_holds(instance):  # its claim released (``registry.pin_imports``)
        return False
    if len(_trust_seen) > 1000:
        _trust_seen.clear()
    _trust_seen[key] = generation
    return _imports_what_was_pinned(instance)


def release_stale_claims(**_signal: Any) -> list[str]:
    """Release each trusted plugin's claim (``loader.claim``) whose pin no trusted
    instance records now (``loader.release_all_but``): only bytes of a pin trust is given
    to now are executed here (issue 30, attack 16, finding 4).  One query, made only while
    this process holds a claim; run before each trusted call and, as a receiver of
    ``post_save`` and ``post_delete`` of ``PluginInstance`` (``apps.py``), at once when
    this process untrusts, confirms or deletes an instance.  The plugins whose claims were
    released."""
    from . import loader
    from .models import PluginInstance

    made, held = loader.held()
    if not held:
        return []
    rows = PluginInstance.objects.filter(trusted=True, plugin__in={p for p, _pin in held})
    live = set(rows.exclude(trusted_record="").values_list("plugin", "trusted_record"))
    return loader.release_all_but(live, made)


def _imports_what_was_pinned(instance: Any) -> bool:
    """Nothing the import system may load for the plugin in this call is code its pin
    leaves out (``registry.code_problem``, at every trusted call: a cached ``.pyc`` of
    other code, a stray module or namespace portion of a pinned dependency's name written
    since the plugin's import, which a handler's import at first use would load).  Else
    the call runs as for an untrusted instance (as a changed pin does; the registry is not
    loaded again: a load would find the same files), and the reason is logged."""
    from . import registry

    problem = registry.code_problem(instance.plugin)
    if problem is None:
        return True
    logger.error(
        "django_webfetch trusted plugin instance %r runs isolated (%s): %s",
        instance.alias,
        problem.reason,
        problem,
    )
    return False


class PluginHandle:
    """What a plugin's tool handler gets: never the model row, never a raw client."""

    __slots__ = ("alias", "config", "http", "plugin")

    def __init__(self, instance: Any, http: Any) -> None:
        self.plugin: str = instance.plugin
        self.alias: str = instance.alias
        self.config: Mapping[str, Any] = MappingProxyType(dict(instance.all_config()))
        self.http = http

    def __repr__(self) -> str:
        return f"<PluginHandle {self.plugin}:{self.alias}>"


class PluginTool(Tool):
    """One tool of an installed plugin."""

    plugin: str
    spec_: ToolSpec

    @classmethod
    def build(cls, manifest: Manifest, spec: ToolSpec) -> PluginTool:
        """A tool class for one spec (the ``Tool`` interface is class attributes)."""
        attributes = {
            "plugin": manifest.name,
            "spec_": spec,
            "name": spec.name,
            "group": tool_group(manifest, spec),
            "description": spec.description,
            "parameters": spec.parameters,
            # A plugin that declares destinations needs a network group; its egress is its
            # instance's grant, never the group's (egress.policy_for).
            "scope": Scope.EXTERNAL_FILTERED if manifest.egress else Scope.NONE,
            "effect": Effect.WRITE if spec.effect == "write" else Effect.READ,
        }
        tool_class: type[PluginTool] = type(f"PluginTool_{spec.name}", (cls,), attributes)
        return tool_class()

    def __repr__(self) -> str:
        return f"<PluginTool {self.plugin}:{self.name}>"

    def requires_approval(self, call: ToolCallLike, context: ToolContext | None = None) -> bool:
        """A networked plugin tool waits for a human unless the operator turned on the
        group's ``skip_approval_with_allowlist`` AND the instance grants something."""
        from django_webfetch.tools.approval import group_requires_approval, tool_group

        from .services import instance_for

        def granted() -> bool:
            instance = instance_for(self.plugin)
            return instance is not None and bool(instance.effective())

        network = self.scope is not Scope.NONE
        group = tool_group(self.group) if network else None
        return group_requires_approval(group, network=network, granted=granted)

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        from .client import PluginHttp, reported_failure, reported_refusal
        from .services import instance_for, record_violations

        instance = context.plugin_instance
        if instance is None:
            instance = instance_for(self.plugin)
        if instance is None or getattr(instance, "plugin", None) != self.plugin:
            return ToolResult.failure(
                "plugin_not_bound", "This plugin has no enabled instance to run with."
            )
        # Text no UTF-8 writer takes (a lone surrogate) is refused here, whoever called:
        # the same answer trusted or isolated, and nothing the channel cannot carry.
        unencodable = unencodable_arguments(arguments)
        if unencodable is not None:
            return unencodable
        # Not trusted, or for another distribution than the one the registry serves the
        # plugin from (W034), or this tool is not of the manifest it serves now (loaded
        # again since): run isolated.  Trust is decided from the served entry point only.
        if not _trust_holds(instance) or not self._served():
            from .isolated import run_isolated

            failed, value = run_isolated(self, instance, arguments, context)
            return value if failed else self._result(instance, value)
        http = PluginHttp(
            instance.pk,
            group=self.group,
            tool=self.name,
            call_id=context.call_id,
            user=context.user,
        )
        handle = PluginHandle(instance, http)
        outcome: Any = None
        error: ToolResult | None = None
        with plugin_scope(
            instance.reference,
            group=self.group,
            tool=self.name,
            call_id=context.call_id,
            user=context.user,
        ) as scope:
            try:
                outcome = self.spec_.handler(handle, dict(arguments))
            except EgressDenied as exc:
                error = reported_refusal(exc.reason)
            except WebFetchError as exc:
                error = reported_failure(exc.code)
            except Exception as exc:
                with host_io():
                    logger.warning(
                        "plugin tool %s:%s raised %s", self.plugin, self.name, type(exc).__name__
                    )
                error = ToolResult.failure("plugin_error", "The plugin's tool failed.")
        record_violations(instance, scope, tool=self.name, group=self.group, context=context)
        if scope.violations and error is None:
            error = ToolResult.from_exception(EgressDenied("unguarded_network"))
        if error is not None:
            return error
        return self._result(instance, outcome)

    def _served(self) -> bool:
        """This tool's spec is of the manifest the registry serves its plugin from now
        (the load whose distribution trust was compared with)."""
        from .registry import get_manifest

        manifest = get_manifest(self.plugin)
        return manifest is not None and any(spec is self.spec_ for spec in manifest.tools)

    def _result(self, instance: Any, outcome: Any) -> ToolResult:
        from django_webfetch.text import fence

        meta: dict[str, Any] = {}
        if isinstance(outcome, ToolResult):
            text = outcome.content
            if not outcome.ok:
                return ToolResult.failure(
                    "plugin_error", "The plugin's tool reported an error.", plugin_error=True
                )
        elif isinstance(outcome, str):
            text = outcome
        else:
            try:
                text = json.dumps(outcome, ensure_ascii=False, allow_nan=False)[:_MAX_RESULT_CHARS]
            except (TypeError, ValueError):
                return ToolResult.failure("plugin_error", "The plugin's tool returned no text.")
        content = fence(
            text[:_MAX_RESULT_CHARS],
            source_url=f"plugin://{instance.alias}/{self.name}",
            status_line=f"plugin {self.plugin} tool {self.name}",
            source="plugin",
        )
        return ToolResult(content=content, meta={**meta, "plugin": self.plugin})


class Contest(NamedTuple):
    """A tool name (``what`` "tool name") or group ("tool group") claimed by tools of more
    than one plugin: served by none of them."""

    what: str
    name: str
    plugins: tuple[str, ...]
    reason: str

    def __str__(self) -> str:
        claimed = ", ".join(map(repr, self.plugins))
        if self.what == "tool name":
            return (
                f"tool name {self.name!r} refused ({self.reason}): claimed by tools of the "
                f"plugins {claimed}; served by neither"
            )
        return (
            f"tool group {self.name!r} refused ({self.reason}): joined by tools of the "
            f"plugins {claimed}; its tools are served by neither"
        )


def served_specs(
    manifests: Iterable[Manifest], installed: Iterable[str] | None = None
) -> tuple[list[tuple[Manifest, ToolSpec]], list[Contest]]:
    """The tools that may be served, and each contested name: a tool name claimed by tools
    of two plugins, or a group joined by tools of two plugins (``acme-admin`` of plugin
    ``acme`` and plugin ``acme-admin``'s own), is served by neither plugin (reasons
    ``tool_name_claimed_twice``, ``tool_group_claimed_twice``).  Decided from every loaded
    manifest at once, so the order in which plugins load (or are installed) changes
    nothing (tests/plugins/test_owned_tool_names_and_groups.py).  ``installed``: the plugins that
    have an instance; a plugin without one never takes a name away from one that has one
    (its own tool of that name is not served; it is contested once it is installed,
    tests/plugins/test_plugin_dirs_pyc_and_pin_memo_routes.py).  ``None``: every plugin counts as
    installed.  A name a built-in tool (or an app's, or a tool entry point's) has is the built-in's:
    the tool registry adds plugin tools last and keeps the first registration."""
    loaded = sorted(manifests, key=lambda m: m.name)
    chosen = {m.name for m in loaded} if installed is None else set(installed)
    names: dict[str, set[str]] = {}
    groups: dict[str, set[str]] = {}
    for manifest in loaded:
        for spec in manifest.tools:
            names.setdefault(spec.name, set()).add(manifest.name)
            groups.setdefault(tool_group(manifest, spec), set()).add(manifest.name)

    def contested(owners: set[str], plugin: str) -> bool:
        """``plugin`` does not get a name these plugins claim: another installed plugin
        claims it too, or ``plugin`` is not installed and any other plugin claims it."""
        if plugin in chosen:
            return len(owners & chosen) > 1
        return len(owners) > 1

    def claimants(owners: set[str]) -> tuple[str, ...]:
        """The plugins a contest of a name ``owners`` claim names: the installed ones (an
        uninstalled one is told when it is installed), or all when none is installed;
        ``()`` when the name is not contested."""
        counted = (owners & chosen) or owners
        return tuple(sorted(counted)) if len(counted) > 1 else ()

    contests = [
        Contest("tool name", name, claimants(owners), "tool_name_claimed_twice")
        for name, owners in sorted(names.items())
        if claimants(owners)
    ] + [
        Contest("tool group", group, claimants(owners), "tool_group_claimed_twice")
        for group, owners in sorted(groups.items())
        if claimants(owners)
    ]
    kept = [
        (manifest, spec)
        for manifest in loaded
        for spec in manifest.tools
        if not contested(names[spec.name], manifest.name)
        and not contested(groups[tool_group(manifest, spec)], manifest.name)
    ]
    return kept, contests


def _instances() -> tuple[set[str], set[str]]:
    """The plugins that have an instance, and those of them with an enabled one."""
    from .models import PluginInstance

    with host_io():
        rows = list(PluginInstance.objects.values_list("plugin", "enabled"))
    return {plugin for plugin, _ in rows}, {plugin for plugin, enabled in rows if enabled}


def _installed_plugins() -> tuple[set[str], set[str]] | None:
    """``_instances()``, or ``None`` when the instances cannot be read (before ``migrate``,
    or in a check run without a database): every plugin then counts as installed (the
    offer, ``offered_when_installed``, reads them again and offers nothing if it cannot)."""
    try:
        return _instances()
    except Exception:  # no database (yet): decided as if every plugin were installed
        return None


def plugin_tools() -> list[PluginTool]:
    """Every tool of every installed, valid plugin that no other plugin contests
    (``served_specs``; contests among the plugins installed now)."""
    from .registry import manifests

    found = _installed_plugins()
    kept, _problems = served_specs(manifests(), None if found is None else found[0])
    return [PluginTool.build(manifest, spec) for manifest, spec in kept]


def tool_problems(plugin: str | None = None) -> list[str]:
    """Why tools of valid plugins (of ``plugin`` only, when given) are served by no plugin
    (``served_specs``)."""
    from .registry import manifests

    found = _installed_plugins()
    return [
        str(contest)
        for contest in served_specs(manifests(), None if found is None else found[0])[1]
        if plugin is None or plugin in contest.plugins
    ]


def offered_when_installed(tools: list[Tool]) -> list[Tool]:
    """``tools`` without the plugin tools of a plugin with no enabled instance: a package on
    ``sys.path`` offers nothing (its descriptions reach no model) before the operator
    installs it (``webfetch plugin install``), nor a tool contested among the plugins
    installed now (``served_specs``).  The tool registry applies this to what it offers
    (``apps.py``), looked up at each offer, so an install in another process counts at
    once."""
    plugins = {t.plugin for t in tools if isinstance(t, PluginTool)}
    if not plugins:
        return tools
    from .registry import manifests

    installed, enabled = _instances()  # raises when unreadable: nothing is offered
    served = {(m.name, spec.name) for m, spec in served_specs(manifests(), installed)[0]}
    return [
        t
        for t in tools
        if not isinstance(t, PluginTool) or (t.plugin in enabled and (t.plugin, t.name) in served)
    ]


def registry_source() -> Iterable[tuple[Tool, str]]:
    """The tools of every valid manifest as a tool-registry source (DESIGN.md §8); added to
    the default registry by ``apps.py``."""
    for plugin_tool in plugin_tools():
        yield plugin_tool, f"plugin {plugin_tool.plugin}"
