"""``policy_for``: the one place that turns models + settings into an ``EgressPolicy``.

Built from the database and the settings on every call, so an admin edit applies at the
next request.  Fail closed everywhere:

- a group that is missing, disabled, of an unknown scope, or not of the scope its tool
  needs gets a ``Scope.NONE`` policy (the guard refuses everything, reason ``scope``);
- anything that goes wrong while reading the database or the settings raises
  ``EgressDenied(reason="policy_unavailable")``;
- list entries are passed through raw: the guard validates them on every check and an
  invalid one refuses every request of the group (reason ``invalid_list``).

The guard decides each scope itself; nothing here re-implements one of its checks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from django.apps import apps
from django.conf import settings

from django_webfetch.conf import conf
from django_webfetch.net.errors import EgressDenied, HostNotAllowed, PolicyError
from django_webfetch.net.guard import Explanation, explain
from django_webfetch.net.hosts import HostList, parse_host, parse_list_entry
from django_webfetch.net.policy import DEFAULT_MEDIA_TYPES, EgressPolicy, Scope
from django_webfetch.values import PluginGrant

__all__ = [
    "ENDPOINT_MEDIA_TYPES",
    "PluginEgressGrant",
    "PluginGrant",
    "client_metadata_policy",
    "endpoint_policy",
    "endpoint_verdict",
    "own_site_base",
    "own_site_hosts",
    "policy_for",
    "site_domain_entry",
]

logger = logging.getLogger("django_webfetch.egress")

#: A configured endpoint (site search, retrieval API) may answer JSON.
ENDPOINT_MEDIA_TYPES: tuple[str, ...] = (*DEFAULT_MEDIA_TYPES, "application/json")


@runtime_checkable
class PluginEgressGrant(Protocol):
    """What ``policy_for(plugin_instance=...)`` needs from a plugin instance model."""

    def egress_grant(self) -> PluginGrant: ...


def policy_for(
    group: Any,
    *,
    user: Any = None,
    plugin_instance: Any = None,
    require_scope: Scope | str | None = None,
) -> EgressPolicy:
    """The live egress policy of ``group`` (a ``ToolGroup`` or its slug).

    ``require_scope``: the scope the calling tool is declared for; a group of any other
    scope gets no egress.  ``user`` is accepted for per-user narrowing (none yet) and the
    audit label.  With ``plugin_instance`` the group decides only whether there is egress at
    all (it must exist, be enabled and have a network scope) and its denylist still applies;
    the destinations are exactly the instance's effective grant (declaration ∩ operator
    grant), never the group's allowlist, endpoints or own hosts.
    Raises ``EgressDenied(reason="policy_unavailable")`` when the policy cannot be built.
    """
    slug = getattr(group, "slug", group)
    try:
        if not isinstance(slug, str):
            raise TypeError("group must be a ToolGroup or a slug")
        return _build(slug, user=user, plugin_instance=plugin_instance, require_scope=require_scope)
    except EgressDenied:
        raise
    except Exception as exc:
        logger.warning(
            "egress policy for group %r unavailable: %s",
            slug,
            type(exc).__name__,
            exc_info=True,
        )
        raise EgressDenied(
            "policy_unavailable",
            detail=f"policy for group {slug!r} unavailable: {type(exc).__name__}",
        ) from exc


def endpoint_policy(endpoint: Any) -> EgressPolicy:
    """The policy the guard would apply to ``endpoint`` (a ``ConfiguredEndpoint``, saved or
    not): its group's lists, this installation's hosts, and this endpoint with the values it
    has now, as if it and its group were enabled.  What the admin and the checks hold an
    endpoint to before it is used (``guard.explain(endpoint.base_url, ...)``).
    """
    from django_webfetch.models import HostListEntry, ListKind

    group = endpoint.group
    lists: dict[str, list[str]] = {ListKind.ALLOW: [], ListKind.DENY: []}
    if group.pk is not None:
        for kind, value in HostListEntry.objects.filter(group=group).values_list("list", "value"):
            lists.setdefault(kind, []).append(value)
    return EgressPolicy(
        scope=Scope.CONFIGURED_ENDPOINT,
        allowlist=tuple(lists[ListKind.ALLOW]),
        denylist=tuple(lists[ListKind.DENY]),
        own_site_hosts=own_site_hosts(),
        endpoints=(endpoint.base_url,),
        allow_private_hosts=(endpoint.host,) if endpoint.allow_private else (),
        allow_private_endpoints=(endpoint.base_url,) if endpoint.allow_private else (),
        media_types=ENDPOINT_MEDIA_TYPES,
        label=group.slug,
        **_settings_kwargs(),
    )


#: Media types of a client's metadata document (Client ID Metadata Document).
CLIENT_METADATA_MEDIA_TYPES: tuple[str, ...] = ("application/json",)
#: Seconds a metadata document may take (DNS included): it is fetched while an editor's
#: browser waits on the authorization page.
CLIENT_METADATA_TIMEOUT = 5.0


def client_metadata_policy(max_bytes: int) -> EgressPolicy:
    """The policy an OAuth client's metadata document (its ``client_id`` URL) is fetched
    under: ``external_filtered`` through the whole guard (this installation's hosts, private
    and metadata addresses refused), JSON only, ``max_bytes`` at most, no redirect followed,
    a 5 s bound on the whole fetch.  The operator's lists do not apply: no tool group owns
    this fetch."""
    base = _settings_kwargs()
    base["max_body_bytes"] = min(int(max_bytes), base["max_body_bytes"])
    base["max_redirects"] = 0
    base["total_timeout"] = min(CLIENT_METADATA_TIMEOUT, base["total_timeout"])
    base["connect_timeout"] = min(base["connect_timeout"], base["total_timeout"])
    return EgressPolicy(
        scope=Scope.EXTERNAL_FILTERED,
        own_site_hosts=own_site_hosts(),
        media_types=CLIENT_METADATA_MEDIA_TYPES,
        label="oauth-client-metadata",
        **base,
    )


def endpoint_verdict(endpoint: Any, *, resolve: bool = False) -> Explanation:
    """The guard's verdict on ``endpoint``'s base URL under :func:`endpoint_policy`
    (without a DNS lookup unless ``resolve``); never connects."""
    return explain(endpoint.base_url, policy=endpoint_policy(endpoint), resolve=resolve)


def _settings_kwargs() -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "nameservers": conf.WEBFETCH_DNS_NAMESERVERS,
        "dns_port": conf.WEBFETCH_DNS_PORT,
        "ca_file": conf.WEBFETCH_CA_FILE,
        "proxy": conf.WEBFETCH_PROXY,
        "nat64_prefixes": conf.WEBFETCH_NAT64_PREFIXES,
        "max_body_bytes": conf.WEBFETCH_MAX_RESPONSE_BYTES,
        "max_redirects": conf.WEBFETCH_MAX_REDIRECTS,
        "connect_timeout": conf.WEBFETCH_CONNECT_TIMEOUT,
        "total_timeout": conf.WEBFETCH_TIMEOUT,
    }
    user_agent = conf.WEBFETCH_USER_AGENT
    if user_agent:
        kwargs["user_agent"] = user_agent
    return kwargs


def _label(slug: str, plugin_instance: Any) -> str:
    if plugin_instance is None:
        return slug
    return f"{slug}:plugin:{getattr(plugin_instance, 'pk', '?')}"


def _build(
    slug: str,
    *,
    user: Any,
    plugin_instance: Any,
    require_scope: Scope | str | None,
) -> EgressPolicy:
    from django_webfetch.models import ConfiguredEndpoint, HostListEntry, ListKind, ToolGroup

    base = _settings_kwargs()
    label = _label(slug, plugin_instance)

    def nothing(why: str) -> EgressPolicy:
        logger.debug("group %r gets no egress: %s", slug, why)
        return EgressPolicy(scope=Scope.NONE, label=label, **base)

    row = ToolGroup.objects.filter(slug=slug).first()
    if row is None:
        return nothing("no such group")
    if not row.enabled:
        return nothing("group disabled")
    try:
        scope = Scope(row.scope)
    except ValueError:
        return nothing("unknown scope")
    if require_scope is not None and Scope(require_scope) is not scope:
        return nothing(f"group scope {scope.value} is not {Scope(require_scope).value}")
    if scope is Scope.NONE:
        return nothing("scope none")

    allow: list[str] = []
    deny: list[str] = []
    for kind, value in HostListEntry.objects.filter(group=row).values_list("list", "value"):
        if kind == ListKind.ALLOW:
            allow.append(value)
        elif kind == ListKind.DENY:
            deny.append(value)
        else:
            # A row of an unknown list kind: the lists cannot be trusted.
            raise ValueError("host list entry of unknown kind")

    endpoints: tuple[str, ...] = ()
    allow_private: tuple[str, ...] = ()
    private_endpoints: tuple[str, ...] = ()
    media_types = DEFAULT_MEDIA_TYPES
    if scope is Scope.CONFIGURED_ENDPOINT:
        rows = list(ConfiguredEndpoint.objects.filter(group=row, enabled=True).order_by("pk"))
        endpoints = tuple(ep.base_url for ep in rows)
        # The only source of private-address exemptions: an operator-configured endpoint.
        allow_private = tuple(dict.fromkeys(ep.host for ep in rows if ep.allow_private))
        private_endpoints = tuple(ep.base_url for ep in rows if ep.allow_private)
        media_types = ENDPOINT_MEDIA_TYPES

    if plugin_instance is not None:
        grant = _plugin_grant(plugin_instance)
        if grant is None:
            return nothing("plugin instance has no egress grant")
        return EgressPolicy(
            scope=Scope.EXTERNAL_FILTERED,
            allowlist=grant.hosts,
            denylist=tuple(deny),
            own_site_hosts=own_site_hosts(),
            allow_private_hosts=_private_within(grant),
            allow_via_proxy=row.allow_via_proxy,
            label=label,
            **base,
        )
    allowlist: tuple[str, ...] = tuple(allow)

    return EgressPolicy(
        scope=scope,
        allowlist=allowlist,
        denylist=tuple(deny),
        own_site_hosts=own_site_hosts(reach=scope is Scope.OWN_SITE),
        endpoints=endpoints,
        allow_private_hosts=allow_private if scope is not Scope.EXTERNAL_FILTERED else (),
        allow_private_endpoints=private_endpoints if scope is not Scope.EXTERNAL_FILTERED else (),
        # A site usually answers on loopback or a private address: the own_site scope may
        # reach its own hosts there (bounded by the own-host match in the guard; metadata
        # and mixed answers stay refused).
        allow_private_own_site=scope is Scope.OWN_SITE,
        allow_via_proxy=row.allow_via_proxy,
        media_types=media_types,
        label=label,
        **base,
    )


# -- own hosts ------------------------------------------------------------------------------


def _valid_entry(text: str) -> bool:
    try:
        parse_list_entry(text)
    except PolicyError:
        return False
    return True


def _split_domain(domain: str) -> str:
    """``host[:port]`` from a Sites domain; IPv6 kept in brackets.

    Domains are often written as URLs (``https://www.example.org/``): the scheme, any path
    and a trailing dot are dropped, so such a site still counts as this installation.
    """
    entry = domain.strip().lower()
    if "://" in entry:
        entry = entry.split("://", 1)[1]
    entry = entry.split("/", 1)[0]
    if entry.endswith(".") and not entry.endswith(".."):
        entry = entry[:-1]
    return entry


def own_site_hosts(*, reach: bool = False) -> tuple[str, ...]:
    """Every host of this installation as list entries, port-specific entries first.

    The one home of "the site's own hosts" (``SiteHost`` rows, ``django.contrib.sites``
    domains, ``ALLOWED_HOSTS``); ``own_site_base`` reads the same sources.

    ``SiteHost`` rows are passed raw (they are validated on save; one that is invalid in the
    database makes the guard refuse everything).  ``django.contrib.sites`` domains and
    ``ALLOWED_HOSTS`` are settings the guard did not write, so malformed ones are skipped
    (and flagged by a system check).  ``*`` contributes nothing.

    A ``.example.org`` ALLOWED_HOSTS entry is a wildcard: Django serves the apex and every
    subdomain.  As hosts to *refuse* (DESIGN.md §3 step 4, the default) it contributes the
    apex and ``*.example.org``, failing closed; as hosts the ``own_site`` scope may *reach*
    (``reach=True``, DESIGN.md §2: non-wildcard ``ALLOWED_HOSTS`` only) it contributes
    nothing, so a model cannot aim ``probe_url`` at any name under the domain.
    """
    from django_webfetch.models import SiteHost

    with_port: list[str] = []
    plain: list[str] = []

    def add(entry: str) -> None:
        target = with_port if _has_port(entry) else plain
        target.append(entry)

    for site_host in SiteHost.objects.all():
        for entry in site_host.list_entries():
            add(entry)

    if apps.is_installed("django.contrib.sites"):
        from django.contrib.sites.models import Site

        for domain in Site.objects.values_list("domain", flat=True):
            site_entry = site_domain_entry(domain)
            if site_entry is not None:
                add(site_entry)
                if _has_port(site_entry):
                    add(_strip_port(site_entry))

    for entry in _allowed_hosts(settings.ALLOWED_HOSTS, reach=reach):
        add(entry)

    return tuple(dict.fromkeys([*with_port, *plain]))


def own_site_base() -> str | None:
    """``scheme://host[:port]`` of this site's first host: the first ``SiteHost`` row, else
    the current ``django.contrib.sites`` domain, else the first ``ALLOWED_HOSTS`` entry the
    ``own_site`` scope may reach.  ``None`` when the installation names no host."""
    from django_webfetch.models import SiteHost

    row = SiteHost.objects.order_by("pk").first()
    if row is not None:
        return f"{row.scheme}://{row.list_entries()[0]}"
    if apps.is_installed("django.contrib.sites"):
        from django.contrib.sites.models import Site

        site_id: Any = getattr(settings, "SITE_ID", None)
        site = Site.objects.filter(pk=site_id).first() if site_id is not None else None
        entry = site_domain_entry(site.domain) if site is not None else None
        if entry is not None:
            return f"https://{entry}"
    for entry in _allowed_hosts(settings.ALLOWED_HOSTS, reach=True):
        return f"https://{entry}"
    return None


def site_domain_entry(domain: str) -> str | None:
    """A Sites domain as a list entry, ``None`` when the guard cannot read it as a host."""
    entry = _split_domain(domain)
    return entry if entry and _valid_entry(entry) else None


def _allowed_hosts(values: Iterable[str], *, reach: bool) -> Iterable[str]:
    """The valid ``ALLOWED_HOSTS`` entries as list entries (see ``own_site_hosts``)."""
    if isinstance(values, str):
        raise TypeError("ALLOWED_HOSTS must be a list")
    for value in values:
        entry = value.strip().lower()
        if not entry or "*" in entry:
            continue
        if entry.startswith("."):
            if reach:
                continue
            # Django serves the apex and every subdomain for ".example.org": both are
            # hosts of this installation.
            entry = entry[1:]
            if _valid_entry(entry):
                yield entry
                yield f"*.{entry}"
            continue
        if _valid_entry(entry):
            yield entry


def _has_port(entry: str) -> bool:
    if entry.startswith("["):
        return "]:" in entry
    return entry.count(":") == 1


def _strip_port(entry: str) -> str:
    if entry.startswith("["):
        return entry[: entry.index("]") + 1]
    return entry.partition(":")[0]


# -- plugin grants (DESIGN.md §8) -----------------------------------------------------------


def _plugin_grant(plugin_instance: Any) -> PluginGrant | None:
    """The instance's effective grant; ``None``: no egress (fail closed).

    An empty grant never means "no allowlist" (that would widen): it means no egress.
    """
    if not isinstance(plugin_instance, PluginEgressGrant):
        return None
    grant: Any = plugin_instance.egress_grant()
    if not isinstance(grant, PluginGrant) or not grant.hosts:
        return None
    for raw in grant.hosts:
        try:
            entry = parse_list_entry(raw)
        except PolicyError as exc:
            raise EgressDenied("invalid_list", detail=f"plugin grant: {exc}") from exc
        if entry.port is not None:
            raise EgressDenied("invalid_list", detail=f"plugin grant {raw!r} names a port")
    return grant


def _private_within(grant: PluginGrant) -> tuple[str, ...]:
    """The grant's private-address exemptions, kept only for exact hosts it also grants."""
    granted = HostList.parse(grant.hosts)
    result: list[str] = []
    for raw in grant.allow_private:
        try:
            host = parse_host(f"[{raw}]" if ":" in raw else raw)
        except HostNotAllowed:
            continue
        if granted.match_host(host, 443) is not None:
            result.append(host.name)
    return tuple(dict.fromkeys(result))
