"""``EgressPolicy``: everything the guard needs to decide, as one frozen value.

``net/`` never reads Django settings; the Django layer (``django_webfetch.egress``) builds a
policy per request and passes it in.  ``EgressPolicy()`` with no arguments is the
``external_filtered`` policy with the DESIGN.md defaults and the system's DNS configuration.

Bounds may be lowered, never raised past the hard ceilings below: a policy asking for more
raises ``PolicyError`` rather than silently widening.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import PolicyError, WebFetchError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .hosts import Host, HostList, ListEntry

__all__ = [
    "DEFAULT_MEDIA_TYPES",
    "HARD_LIMITS",
    "EgressPolicy",
    "Scope",
]


class Scope(str, enum.Enum):
    """Egress scope of a tool group (DESIGN.md §2).  There is no "any host" scope."""

    NONE = "none"
    OWN_SITE = "own_site"
    CONFIGURED_ENDPOINT = "configured_endpoint"
    EXTERNAL_FILTERED = "external_filtered"


DEFAULT_MEDIA_TYPES: tuple[str, ...] = ("text/html", "application/xhtml+xml", "text/plain")

#: name -> (default, hard ceiling)
HARD_LIMITS: Mapping[str, tuple[float, float]] = {
    "max_body_bytes": (2 * 1024 * 1024, 2 * 1024 * 1024),
    "max_redirects": (3, 3),
    "connect_timeout": (5.0, 5.0),
    "total_timeout": (20.0, 20.0),
}


@dataclass(frozen=True)
class EgressPolicy:
    """One request's egress rules.  Hashable, immutable, safe to share between threads."""

    scope: Scope = Scope.EXTERNAL_FILTERED
    #: Raw list entries (host names, ``*.suffix`` patterns, IP literals, optional ``:port``).
    #: They are validated by the guard on every check; one invalid entry makes the whole
    #: list invalid and every request is refused (reason ``invalid_list``).
    allowlist: tuple[str, ...] = ()
    denylist: tuple[str, ...] = ()
    #: Hosts of this installation (``host`` or ``host:port``).  Refused for every scope but
    #: ``own_site``; the only hosts ``own_site`` may reach.
    own_site_hosts: tuple[str, ...] = ()
    #: Base URLs (``https://search.internal/api/``) for the ``configured_endpoint`` scope.
    endpoints: tuple[str, ...] = ()
    #: Host names (exact, lower case) whose addresses may be private (RFC 1918, loopback,
    #: CGNAT, ULA).  Metadata addresses stay refused, and a mixed public/private answer
    #: stays refused.  Empty for ``external_filtered`` in the built-in configuration.
    allow_private_hosts: tuple[str, ...] = ()
    #: ``configured_endpoint`` scope: the base URLs (each one of ``endpoints``) the
    #: exemption is for.  It holds for a URL under one of them only, never for another
    #: endpoint on the same host: an operator decides per endpoint.  Required there when
    #: ``allow_private_hosts`` is set; setting it on any other scope raises ``PolicyError``.
    allow_private_endpoints: tuple[str, ...] = ()
    #: ``own_site`` scope only: a host that matches ``own_site_hosts`` may resolve to a
    #: private address (loopback, RFC 1918, CGNAT, ULA) -- a site usually answers on one.
    #: The exemption is bounded by the own-site host match, never by the address alone;
    #: metadata addresses and mixed public/private answers stay refused.  Setting it on any
    #: other scope raises ``PolicyError``.
    allow_private_own_site: bool = False
    #: Operator-declared NAT64 prefixes (``64:ff9b::/96``); when set, embedded IPv4 is
    #: decoded and classified instead of the prefix being refused whole.
    nat64_prefixes: tuple[str, ...] = ()
    #: DNS servers (IP literals).  ``None``: the system's resolv.conf, read by dnspython.
    nameservers: tuple[str, ...] | None = None
    dns_port: int = 53
    #: A proxy configured for the app.  When it (or a proxy in ``proxy_env``) applies to a
    #: destination, the request is refused unless ``allow_via_proxy`` and a non-empty
    #: allowlist: a proxy would resolve names itself and defeat the address checks.
    proxy: str | None = None
    allow_via_proxy: bool = False
    #: Proxy environment (``HTTP_PROXY``... ``NO_PROXY``).  ``None``: read ``os.environ`` at
    #: check time.  The transport itself never uses the environment (``trust_env=False``).
    proxy_env: tuple[tuple[str, str], ...] | None = None
    #: CA bundle (PEM file) for certificate verification; ``None``: the system trust store.
    #: Certificates are always verified against the URL's host name.
    ca_file: str | None = None
    media_types: tuple[str, ...] = DEFAULT_MEDIA_TYPES
    max_body_bytes: int = 2 * 1024 * 1024
    max_redirects: int = 3
    connect_timeout: float = 5.0
    total_timeout: float = 20.0
    user_agent: str = "django-webfetch (+https://github.com/django-webfetch)"
    #: Free-form label for audit events ("web", "plugin:acme#3"); never used to decide.
    label: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        scope: object = self.scope
        if not isinstance(scope, Scope):
            try:
                object.__setattr__(self, "scope", Scope(self.scope))
            except ValueError as exc:
                raise PolicyError(f"unknown egress scope {self.scope!r}") from exc
        for name in (
            "allowlist",
            "denylist",
            "own_site_hosts",
            "endpoints",
            "allow_private_hosts",
            "allow_private_endpoints",
            "nat64_prefixes",
            "media_types",
        ):
            value: object = getattr(self, name)
            if not isinstance(value, (tuple, list)) or not all(isinstance(v, str) for v in value):
                raise PolicyError(f"{name} must be a tuple of strings")
            object.__setattr__(self, name, tuple(value))
        nameservers: object = self.nameservers
        if nameservers is not None:
            if not isinstance(nameservers, (tuple, list)):
                raise PolicyError("nameservers must be a tuple of IP literals")
            try:
                canonical = tuple(str(ipaddress.ip_address(ns)) for ns in nameservers)
            except ValueError as exc:
                raise PolicyError("nameservers must be IP literals") from exc
            object.__setattr__(self, "nameservers", canonical)
        for name, (_default, ceiling) in HARD_LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PolicyError(f"{name} must be a number")
            if not 0 <= value <= ceiling:
                raise PolicyError(f"{name}={value!r} is outside 0..{ceiling!r} (hard ceiling)")
        if not isinstance(self.allow_private_own_site, bool):
            raise PolicyError("allow_private_own_site must be True or False")
        if self.allow_private_own_site and self.scope is not Scope.OWN_SITE:
            raise PolicyError("allow_private_own_site is only valid with the own_site scope")
        if not 0 < self.dns_port < 65536:
            raise PolicyError("dns_port must be 1..65535")
        self._check_private_exemptions()

    def _check_private_exemptions(self) -> None:
        """``allow_private_hosts`` is bounded by a grant (an invariant, not a convention).

        Each exempted host must also be matched by a grant of this scope: an allowlist
        entry, a configured endpoint's host (``configured_endpoint``) or a host of this
        installation (``own_site``).  An exemption nothing else grants would open a private
        address to whatever the scope lets through, so it is a ``PolicyError``.
        """
        endpoint_scope = self.scope is Scope.CONFIGURED_ENDPOINT
        if self.allow_private_endpoints and not endpoint_scope:
            raise PolicyError("allow_private_endpoints is only valid with configured_endpoint")
        for raw in self.allow_private_endpoints:
            if raw not in self.endpoints:
                raise PolicyError(f"allow_private_endpoints entry {raw[:100]!r} is no endpoint")
        if not self.allow_private_hosts:
            if self.allow_private_endpoints:
                raise PolicyError("allow_private_endpoints without allow_private_hosts")
            return
        if endpoint_scope and not self.allow_private_endpoints:
            raise PolicyError(
                "configured_endpoint: name the endpoints the private-address exemption is "
                "for (allow_private_endpoints)"
            )
        from .hosts import HostList, parse_host
        from .urlparse import parse_url

        def entries(raw: tuple[str, ...]) -> HostList:
            try:
                return HostList.parse(raw)
            except PolicyError:
                return HostList()  # an invalid list grants nothing (it refuses everything)

        # configured_endpoint: bounded by an exempt endpoint only; a host no exempt endpoint
        # names is exempt for nothing, whatever else of the scope (its allowlist) matches it.
        allow = HostList() if endpoint_scope else entries(self.allowlist)
        own = entries(self.own_site_hosts) if self.scope is Scope.OWN_SITE else HostList()
        endpoint_hosts: set[str] = set()
        if endpoint_scope:
            for raw in self.allow_private_endpoints:
                try:
                    endpoint_hosts.add(parse_url(raw).host.name)
                except WebFetchError:
                    continue
        for raw in self.allow_private_hosts:
            try:
                host = parse_host(raw)
            except WebFetchError as exc:
                raise PolicyError(f"allow_private_hosts entry {raw[:100]!r} is not a host") from exc
            if host.name != raw:
                raise PolicyError(f"allow_private_hosts entry {raw[:100]!r} is not canonical")
            bounded = (
                host.name in endpoint_hosts
                or next(_matching(allow, host), None) is not None
                or next(_matching(own, host), None) is not None
            )
            if not bounded:
                raise PolicyError(
                    f"allow_private_hosts entry {raw[:100]!r} is not granted by the allowlist, "
                    "a configured endpoint or this installation's hosts"
                )

    @property
    def has_allowlist(self) -> bool:
        return bool(self.allowlist)


def _matching(entries: HostList, host: Host) -> Iterator[ListEntry]:
    """Entries of ``entries`` that match ``host`` on some port (names, suffixes, addresses)."""
    for entry in entries.entries:
        if type(entries)((entry,)).match_host(host, entry.port or 1) is not None:
            yield entry
