"""Plugin services: install, bind, upgrade, list, check, and the runner's helpers.

The CLI (``manage.py webfetch plugin ...``) and any other surface call these; they hold
every rule.  Errors are ``PluginServiceError`` with a stable ``code``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from django_webfetch.invocation import manage_command
from django_webfetch.net.errors import EgressDenied, WebFetchError

from .grants import difference, intersect
from .manifest import Manifest, tool_group
from .registry import get_manifest
from .registry import isolation as enforced_isolation
from .runtime.host import isolation_label
from .sandbox import PluginScope, host_io

__all__ = [
    "CallPlugin",
    "InstanceSummary",
    "PluginServiceError",
    "UpgradeReport",
    "bind",
    "call_plugin",
    "check",
    "confirm_trust",
    "confirm_trust_of",
    "declaration_fingerprint",
    "enabled_groups",
    "install",
    "instance_for",
    "list_instances",
    "provider_fingerprint",
    "record_violations",
    "trust_preview",
    "upgrade",
    "effective_now",
    "why_no_egress",
]


_NETWORK_EVENTS = frozenset(
    {
        "socket.connect",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
    }
)


class PluginServiceError(WebFetchError):
    code = "plugin_error"

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


def _manifest(name: str) -> Manifest:
    manifest = get_manifest(name)
    if manifest is None:
        from .registry import refusals

        # The refusals of this name (``Problem.names``), never one whose text quotes it:
        # another distribution's refusal can quote any name.
        refused = [p for p in refusals() if name in p.names]
        if refused:
            raise PluginServiceError("plugin_refused", refused[0].message)
        raise PluginServiceError("plugin_not_installed", f"no installed plugin named {name!r}")
    return manifest


def _defaults(manifest: Manifest) -> dict[str, Any]:
    return {n: f.default for n, f in manifest.config.items() if f.default is not None}


def _ensure_groups(manifest: Manifest) -> list[str]:
    """Create the plugin's tool groups that are missing (disabled); return their slugs."""
    from django_webfetch.models import EgressScope, ToolGroup

    slugs = list(dict.fromkeys(tool_group(manifest, spec) for spec in manifest.tools))
    scope = EgressScope.EXTERNAL_FILTERED if manifest.egress else EgressScope.NONE
    for slug in slugs:
        ToolGroup.objects.get_or_create(
            slug=slug,
            defaults={
                "name": f"Plugin {manifest.name}",
                "scope": scope,
                "enabled": False,
                "description": f"Tools of the plugin {manifest.name}.",
            },
        )
    return slugs


def enabled_groups(slugs: Iterable[str]) -> list[str]:
    """Those of ``slugs`` whose ``ToolGroup`` is enabled (in ``slugs``' order)."""
    from django_webfetch.models import ToolGroup

    wanted = list(slugs)
    on = set(ToolGroup.objects.filter(slug__in=wanted, enabled=True).values_list("slug", flat=True))
    return [slug for slug in wanted if slug in on]


def _create(manifest: Manifest, alias: str, egress: Iterable[str]) -> Any:
    from .models import PluginInstance

    if PluginInstance.objects.filter(alias=alias).exists():
        raise PluginServiceError("alias_taken", f"an instance with alias {alias!r} exists")
    with transaction.atomic():
        _ensure_groups(manifest)
        return PluginInstance.objects.create(
            plugin=manifest.name,
            alias=alias,
            version=manifest.version,
            declared_egress=list(manifest.egress),
            egress_hosts=list(egress),
            config=_defaults(manifest),
        )


def install(name: str, *, alias: str | None = None) -> Any:
    """Create an instance granted exactly what the package declares (printed by the CLI:
    the printout is the operator's record)."""
    manifest = _manifest(name)
    return _create(manifest, alias or manifest.name, manifest.egress)


def bind(name: str, *, alias: str, egress: str | None) -> Any:
    """Create an instance for a binding: ``egress`` is ``"declared"`` or ``"none"``; with a
    non-empty declaration one of them must be chosen."""
    manifest = _manifest(name)
    if egress not in (None, "declared", "none"):
        raise PluginServiceError("egress_choice", "--egress is 'declared' or 'none'")
    if egress is None and manifest.egress:
        raise PluginServiceError(
            "egress_choice_required",
            f"plugin {name!r} declares destinations; choose --egress declared or --egress none",
        )
    return _create(manifest, alias, manifest.egress if egress == "declared" else ())


@dataclass(frozen=True)
class UpgradeReport:
    alias: str
    old_version: str
    new_version: str
    added: tuple[str, ...]
    covered: tuple[str, ...]  # new entries the existing grant already covers
    widened: bool
    changed: bool
    #: ``declaration_fingerprint`` of the manifest this report was made from: what
    #: ``upgrade(confirm=...)`` takes to grant what the report shows.
    fingerprint: str = ""


def declaration_fingerprint(manifest: Manifest) -> str:
    """What an ``upgrade`` report shows of a manifest (its plugin, version and declared
    destinations), as 32 hex digits (128 bits of SHA-256: no two declarations an author
    could craft share one)."""
    shown = {
        "plugin": manifest.name,
        "version": manifest.version,
        "egress": sorted(manifest.egress),
    }
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:32]


def upgrade(name: str, *, confirm: str = "") -> list[UpgradeReport]:
    """Move every instance of ``name`` to the installed version.

    Entries the new version declares beyond what was acknowledged are reported (with the
    declaration's fingerprint); the grant is widened by them only with ``confirm``, the
    fingerprint of the report the operator reviewed.  The manifest is read again here (its
    code computes it: it can differ from the one shown), so a ``confirm`` that is not the
    fingerprint of what is declared now changes nothing (``upgrade_not_shown``): what is
    granted is what was shown.  Without ``confirm`` nothing of an instance whose
    declaration grew changes (its grant, recorded declaration and version stay).
    """
    from .models import PluginInstance

    manifest = _manifest(name)
    fingerprint = declaration_fingerprint(manifest)
    if confirm and not hmac.compare_digest(confirm.strip().lower(), fingerprint):
        again = manage_command("webfetch", "plugin", "upgrade", name)
        raise PluginServiceError(
            "upgrade_not_shown",
            f"plugin {name!r} {manifest.version} declares {', '.join(manifest.egress) or 'nothing'}"
            f" now, not what the reviewed upgrade showed (fingerprint {confirm[:40]!r}, now "
            f"{fingerprint}); nothing was changed: run '{again}' again and review",
        )
    reports: list[UpgradeReport] = []
    with transaction.atomic():
        for instance in PluginInstance.objects.select_for_update().filter(plugin=name):
            added = difference(manifest.egress, instance.declared_egress)
            covered = tuple(a for a in added if intersect(instance.egress_hosts, [a]) == (a,))
            old_version = instance.version
            if added and not confirm:
                reports.append(
                    UpgradeReport(
                        instance.alias,
                        old_version,
                        manifest.version,
                        added,
                        covered,
                        False,
                        False,
                        fingerprint,
                    )
                )
                continue
            widen = [a for a in added if a not in covered]
            instance.egress_hosts = [*instance.egress_hosts, *widen]
            instance.declared_egress = list(manifest.egress)
            instance.version = manifest.version
            instance.save()
            reports.append(
                UpgradeReport(
                    instance.alias,
                    old_version,
                    manifest.version,
                    added,
                    covered,
                    bool(widen),
                    True,
                    fingerprint,
                )
            )
    return reports


@dataclass(frozen=True)
class InstanceSummary:
    alias: str
    plugin: str
    version: str
    enabled: bool
    installed: bool
    declared: tuple[str, ...]
    granted: tuple[str, ...]
    effective: tuple[str, ...]
    allow_private: tuple[str, ...]
    has_secrets: bool
    isolation: str = ""
    #: Why a ``trusted`` instance is not trusted now ("" when it is): W034.
    trust: str = ""
    #: Why ``effective`` is empty though the grant is not ("" when it is the grant): the
    #: instance or its group is off, as ``check`` decides (tests/plugins/test_cli.py).
    no_egress: str = ""


def list_instances() -> list[InstanceSummary]:
    from .models import PluginInstance

    result = []
    for instance in PluginInstance.objects.order_by("plugin", "alias"):
        grant = instance.egress_grant()
        off = why_no_egress(instance) if instance.egress_hosts else ""
        result.append(
            InstanceSummary(
                alias=instance.alias,
                plugin=instance.plugin,
                version=instance.version,
                enabled=instance.enabled,
                installed=get_manifest(instance.plugin) is not None,
                declared=instance.declared(),
                granted=tuple(instance.egress_hosts),
                effective=() if off else grant.hosts,
                allow_private=() if off else grant.allow_private,
                has_secrets=bool(instance.secret_config),
                # A plugin that is not installed runs nowhere, whatever this host offers;
                # one that is runs in what its own process enforced (Landlock included).
                isolation=isolation_label(
                    instance.trust_holds(), enforced_isolation(instance.plugin)
                )
                if get_manifest(instance.plugin) is not None
                else "none (not installed)",
                trust=instance.trust_problem(),
                no_egress=off,
            )
        )
    return result


def effective_now(instance: Any) -> tuple[tuple[str, ...], str]:
    """The destinations ``instance`` reaches now, and why none though it has a grant (""
    otherwise): one answer for ``plugin list``, ``install`` and the admin."""
    off = why_no_egress(instance) if instance.egress_hosts else ""
    return (() if off else tuple(instance.effective())), off


def why_no_egress(instance: Any) -> str:
    """Why ``instance`` has no egress now whatever its grant ("" when it has): what
    ``check`` answers ``egress_not_granted`` for, said precisely (``plugin list`` and
    ``install``: tests/plugins/test_cli.py)."""
    from django_webfetch.egress import policy_for
    from django_webfetch.models import ToolGroup
    from django_webfetch.net.policy import Scope

    if not instance.enabled:
        return "the instance is disabled"
    if get_manifest(instance.plugin) is None:
        return (
            f"plugin {instance.plugin!r} is not installed here (is its directory in "
            "WEBFETCH_PLUGIN_DIRS of this process?)"
        )
    group = instance.default_group()
    row = ToolGroup.objects.filter(slug=group).first()
    if row is None:
        return f"group {group!r} does not exist"
    if not row.enabled:
        return f"group {group!r} is disabled: an admin enables it (admin: Web fetch > Tool groups)"
    try:
        policy = policy_for(group, plugin_instance=instance)
    except EgressDenied as exc:
        return f"no policy for group {group!r} ({exc.reason})"
    if policy.scope is Scope.NONE:
        return f"group {group!r} has no network scope"
    return ""


@dataclass(frozen=True)
class CallPlugin:
    """What an approver is told about the plugin a waiting call runs: every string shown
    (``shown``: the plugin chose its name and declared its hosts)."""

    plugin: str
    #: The alias of the instance the call runs with ("" when no enabled one is bound).
    instance: str
    #: Where the call may reach if approved now: the instance's effective destinations.
    destinations: tuple[str, ...]
    #: Why none, though the instance has a grant ("" otherwise).
    no_egress: str
    #: Its code runs in the site's own processes (``trusted``, and the trust holds).
    trusted: bool


def call_plugin(tool: Any) -> CallPlugin | None:
    """The plugin behind ``tool`` as an approval card shows it (``None``: not a plugin's
    tool).  Read when the card is shown, so it says what approving would run now."""
    from .shown import shown

    plugin = getattr(tool, "plugin", None)
    if not isinstance(plugin, str) or not plugin:
        return None
    instance = instance_for(plugin)
    if instance is None:
        return CallPlugin(shown(plugin), "", (), "", trusted=False)
    with host_io():
        destinations, off = effective_now(instance)
        trusted = instance.trust_holds()
    return CallPlugin(
        plugin=shown(plugin),
        instance=shown(instance.alias),
        destinations=tuple(shown(host) for host in destinations),
        no_egress=shown(off),
        trusted=trusted,
    )


def instance_for(plugin: str) -> Any:
    """The instance a plugin's tools run with: its only enabled instance, or the enabled
    one whose alias is the plugin's name; ``None`` otherwise (fail closed)."""
    from .models import PluginInstance

    with host_io():
        rows = list(PluginInstance.objects.filter(plugin=plugin, enabled=True)[:50])
    if len(rows) == 1:
        return rows[0]
    for row in rows:
        if row.alias == plugin:
            return row
    return None


def get_instance(alias: str) -> Any:
    from .models import PluginInstance

    instance = PluginInstance.objects.filter(alias=alias).first()
    if instance is None:
        raise PluginServiceError("no_such_instance", f"no plugin instance with alias {alias!r}")
    return instance


def provider_fingerprint(provider: Any) -> str:
    """What ``trust`` shows of a distribution (``provenance.Provider``: name, version,
    digest of its plugin's code and of its installed dependencies, decision 0051) as 32
    hex digits; "" for none."""
    if provider is None:
        return ""
    shown = [provider.name, provider.version, provider.digest]
    return hashlib.sha256(json.dumps(shown).encode()).hexdigest()[:32]


def trust_preview(alias: str) -> tuple[Any, Any, str]:
    """What ``trust ALIAS`` shows before anything is trusted: the instance, the
    distribution that provides its plugin now (``None`` when none or several do) and its
    ``provider_fingerprint``."""
    from .provenance import installed_provider

    instance = get_instance(alias)
    found = installed_provider(instance.plugin)
    return instance, found, provider_fingerprint(found)


def confirm_trust(alias: str, *, shown: str) -> Any:
    """Mark instance ``alias`` trusted for the distribution that provides its plugin now
    (turning trust on, or confirming it again after the package changed: W034), when it
    is the one the operator was shown (``shown``: its ``provider_fingerprint``, printed by
    ``trust_preview``)."""
    instance = get_instance(alias)
    if confirm_trust_of(instance, shown=shown) is None:
        raise PluginServiceError(
            "plugin_not_installed",
            f"no single installed distribution provides plugin {instance.plugin!r}; "
            "nothing was trusted",
        )
    return instance


def confirm_trust_of(instance: Any, *, shown: str) -> Any:
    """Record the installed distribution on ``instance`` and save it trusted, when it is
    the one the operator was shown (``shown``: its ``provider_fingerprint``); the
    distribution (``None``, and nothing saved, when none or several provide it).  Another
    distribution than the one shown (installed since, or a manifest read anew) is refused
    (``trust_not_shown``) and nothing is saved: what is trusted is what was reviewed."""
    from .closure import unpinnable
    from .provenance import installed_dependencies

    found = instance.confirm_trust()
    if found is None:
        return None
    cannot = unpinnable(installed_dependencies(instance.plugin))
    if cannot:
        instance.refresh_from_db()
        raise PluginServiceError(
            "plugin_dependency_unpinnable",
            f"plugin {instance.plugin!r} requires an installed distribution whose code "
            f"cannot be pinned ({cannot}); nothing was trusted (decision 0051)",
        )
    now = provider_fingerprint(found)
    if not hmac.compare_digest(str(shown).strip().lower(), now):
        instance.refresh_from_db()
        # Said as it is: a mistyped fingerprint is as likely as a changed package.
        again = manage_command("webfetch", "plugin", "trust", instance.alias)
        raise PluginServiceError(
            "trust_not_shown",
            f"fingerprint {str(shown).strip()[:40]!r} is not the one shown for {found} "
            f"(fingerprint {now}); nothing was trusted: run `{again}` and confirm what it shows",
        )
    instance.trusted = True
    instance.save()
    return found


def check(url: str, *, alias: str, resolve: bool = True) -> tuple[Any, Any]:
    """What the instance's live policy decides for ``url``: ``(policy or None,
    Explanation or EgressDenied)``.  Looks up DNS, never connects."""
    from django_webfetch.egress.preflight import live_verdict
    from django_webfetch.net.policy import Scope

    instance = get_instance(alias)
    if not instance.enabled:
        return None, EgressDenied("egress_not_granted", detail="the instance is disabled")
    if not instance.effective():
        why = (why_no_egress(instance) if instance.egress_hosts else "") or "no effective grant"
        return None, EgressDenied("egress_not_granted", detail=why)
    group = instance.default_group()
    try:
        # Under a policy without egress the guard stops at its first step (scope), before
        # any DNS lookup.
        policy, explanation = live_verdict(url, group, plugin_instance=instance, resolve=resolve)
    except EgressDenied as exc:
        return None, exc
    if policy.scope is Scope.NONE:
        # The exact cause, as ``plugin list`` says it (tests/plugins/test_cli.py).
        why = why_no_egress(instance) or f"group {group!r} has no network scope"
        return policy, EgressDenied("egress_not_granted", detail=why)
    return policy, explanation


def record_violations(
    instance: Any, scope: PluginScope, *, tool: str, group: str, context: Any
) -> None:
    """Write one ``EgressEvent`` per operation the sandbox refused."""
    from django_webfetch.egress import EgressRecorder

    if not scope.violations:
        return
    recorder = EgressRecorder(
        tool=tool,
        group=group,
        user=getattr(context, "user", None),
        plugin_instance=instance,
        call_id=getattr(context, "call_id", ""),
    )
    with host_io():
        for violation in scope.violations[:100]:
            is_path = violation.target.startswith("/") or violation.event not in _NETWORK_EVENTS
            recorder.record(
                decision="denied",
                reason="unguarded_network",
                url_host="" if is_path else violation.target,
                port=violation.port,
                detail=f"{violation.event} outside the host-owned client: {violation.target}",
            )
