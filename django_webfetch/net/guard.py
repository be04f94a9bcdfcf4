"""The guard: the one place that decides "may this installation reach this URL".

``UrlGuard.check(url, policy)`` runs the ordered rules of DESIGN.md §3 and returns a
``ResolvedDestination`` — the host, port and the exact addresses that were checked.  The
transport connects only to those addresses; nothing downstream can do a fresh lookup.
``explain()`` runs the same code path with a trace and reports every step's verdict without
connecting.  Every refusal is an ``EgressDenied`` subclass carrying a stable reason code.
"""

from __future__ import annotations

import functools
import os
import re
import time
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote_to_bytes

from .errors import (
    AddressNotAllowed,
    EgressDenied,
    FetchTimeout,
    HostNotAllowed,
    InvalidURL,
    PolicyError,
    PortNotAllowed,
    ResolutionError,
    UnresolvableHost,
    WebFetchError,
)
from .hosts import EntryKind, Host, HostKind, HostList, ListEntry, spells_address
from .ipclass import PRIVATE_ALLOWABLE, PUBLIC, classifier_for, is_metadata
from .policy import EgressPolicy, Scope
from .resolve import DnsResolver
from .steps import Steps, drive, drive_async
from .urlparse import DEFAULT_PORTS, ParsedURL, parse_url

if TYPE_CHECKING:
    from .transport import Cancellation

__all__ = [
    "Explanation",
    "ResolvedDestination",
    "Step",
    "UrlGuard",
    "applicable_proxy",
    "explain",
]

IPAddress = IPv4Address | IPv6Address

#: The step names, in order; ``explain`` reports each of them.
STEPS: tuple[str, ...] = (
    "scope",
    "url",
    "own_site",
    "endpoint",
    "denylist",
    "allowlist",
    "port",
    "proxy",
    "resolve",
    "addresses",
)


@dataclass(frozen=True)
class ResolvedDestination:
    """What the guard checked: connect only to ``addresses``, speak to ``host``."""

    url: ParsedURL
    addresses: tuple[IPAddress, ...]
    proxy: str | None = None
    categories: tuple[str, ...] = ()
    #: The proxy's own addresses (resolved through dnspython), when ``proxy`` is set.
    proxy_addresses: tuple[IPAddress, ...] = ()

    @property
    def host(self) -> str:
        return self.url.host.name

    @property
    def port(self) -> int:
        return self.url.port

    @property
    def scheme(self) -> str:
        return self.url.scheme


@dataclass(frozen=True)
class Step:
    name: str
    verdict: str  # "pass" | "fail" | "skip"
    detail: str = ""


@dataclass(frozen=True)
class Explanation:
    url: str
    steps: tuple[Step, ...]
    allowed: bool
    reason: str | None
    destination: ResolvedDestination | None = None

    @property
    def resolved(self) -> bool:
        """Whether the addresses were decided (``False`` after ``resolve=False``)."""
        return not any(s.name == "addresses" and s.verdict == "skip" for s in self.steps)

    @property
    def verdict(self) -> str:
        """The last line: ``ALLOWED`` only once the addresses were decided; a name that was
        not looked up is allowed only so far, the addresses it resolves to decide later."""
        if not self.allowed:
            return f"DENIED ({self.reason})"
        if not self.resolved:
            return "ALLOWED SO FAR (not resolved: its addresses decide at fetch time)"
        return "ALLOWED"

    def as_text(self) -> str:
        lines = [f"{s.name:<10} {s.verdict:<5} {s.detail}".rstrip() for s in self.steps]
        lines.append(self.verdict)
        return "\n".join(lines)


_PROXY_SCHEMES = tuple(DEFAULT_PORTS)


def applicable_proxy(policy: EgressPolicy, scheme: str, host: Host, port: int) -> str | None:
    """The proxy that would carry a request to ``host``, if any.

    ``policy.proxy`` always applies.  Otherwise the environment (``policy.proxy_env`` or
    ``os.environ``) is read the way requests/httpx/curl read it, so that a deployment that
    routes egress through a proxy is noticed: a proxy resolves names itself, which would
    defeat every address check made here.
    """
    if policy.proxy:
        return policy.proxy
    env: Mapping[str, str] = (
        dict(policy.proxy_env) if policy.proxy_env is not None else dict(os.environ)
    )
    lowered: dict[str, str] = {}
    for key, value in env.items():
        # Lower case wins (curl's rule), upper case fills in.
        if (
            value
            and key.lower() in {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
            and (key.islower() or key.lower() not in lowered)
        ):
            lowered[key.lower()] = value
    proxy = lowered.get(f"{scheme}_proxy") or lowered.get("all_proxy")
    if not proxy:
        return None
    no_proxy = lowered.get("no_proxy", "")
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return None
        entry_host, _, entry_port = (
            entry.rpartition(":")
            if entry.count(":") == 1
            else (
                entry,
                "",
                "",
            )
        )
        if entry_port and not entry_port.isdigit():
            entry_host, entry_port = entry, ""
        if entry_port and int(entry_port) != port:
            continue
        entry_host = entry_host.strip("[]").lstrip(".")
        if entry_host.startswith("*."):
            entry_host = entry_host[2:]
        if host.name == entry_host or host.name.endswith("." + entry_host):
            return None
    return proxy


class _Trace:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.steps: list[Step] = []

    def ok(self, name: str, detail: str = "") -> None:
        if self.enabled:
            self.steps.append(Step(name, "pass", detail))

    def skip(self, name: str, detail: str = "") -> None:
        if self.enabled:
            self.steps.append(Step(name, "skip", detail))


@functools.lru_cache(maxsize=256)
def _cached_list(entries: tuple[str, ...]) -> HostList:
    return HostList.parse(entries)


def _parse_list(entries: tuple[str, ...], which: str) -> HostList:
    # Policies are immutable, so parsed lists are cached by their entries; an invalid list
    # raises every time (exceptions are not cached).
    try:
        return _cached_list(entries)
    except PolicyError as exc:
        # One invalid entry makes the whole list invalid, and an invalid list refuses
        # every request (fail closed).
        raise EgressDenied("invalid_list", detail=f"{which}: {exc}") from exc


def _endpoint_match(url: ParsedURL, endpoints: tuple[str, ...]) -> tuple[str, ParsedURL] | None:
    """``(raw, base)`` of the most specific configured endpoint ``url`` lies under (the
    longest base path: an endpoint nested in another is its own), or None.

    Compared on the *decoded* path (``scoped_path``): a server that decodes before it
    normalises must not serve anything outside the base either.
    """
    path = scoped_path(url)
    best: tuple[int, str, ParsedURL] | None = None
    for raw in endpoints:
        try:
            base = parse_url(raw)
            base_path = scoped_path(base)
        except EgressDenied as exc:
            raise EgressDenied("invalid_list", detail=f"endpoint {raw!r}: {exc.reason}") from exc
        if (base.scheme, base.host.name, base.port) != (url.scheme, url.host.name, url.port):
            continue
        if base_path.endswith("/"):
            under = path.startswith(base_path) or path == base_path.rstrip("/")
        else:
            under = path == base_path or path.startswith(base_path + "/")
        if under and (best is None or len(base_path.rstrip("/")) > best[0]):
            best = (len(base_path.rstrip("/")), raw, base)
    return None if best is None else (best[1], best[2])


#: Escapes refused in a path-scoped scope (configured_endpoint, own_site): an encoded "/"
#: or "\" is a separator to servers that decode before routing (Tomcat, IIS, many
#: proxies), an encoded "%" is a second round of decoding, an encoded "." or NUL ends or
#: steps segments for some.  Any case (``%2F``, ``%2f``).
_SCOPED_ESCAPES = re.compile(r"%(?:2f|5c|25|2e|00)", re.IGNORECASE)
#: Characters that some servers fold into "/", "\" or "." after decoding.
_DOTS_AND_SPACES = frozenset(". ")
_SEPARATOR_LOOKALIKES = frozenset("\u2215\u2044\u29f8\u29f9\uff0f\uff3c\u2024\uff0e\u3002")


def scoped_path(url: ParsedURL) -> str:
    """The decoded, normalised path of ``url`` for a scope that is bounded by a path.

    Refused (``path_encoding``): ``%2f``, ``%5c``, ``%25``, ``%2e``, ``%00`` in any case,
    ``;`` path parameters (Tomcat/Jetty strip ``;…`` from a segment before routing, so
    ``/..;/`` is ``/../``), a path that is not UTF-8 once decoded (overlong forms such as
    ``%c0%af``), controls, and characters that NFKC or a server folds into a separator or
    a dot, and segments of dots and spaces only (``..%20``, ``...``: ``..`` to Windows
    servers).  What is left decodes to a path with the same segments; it must be
    normalised already (no dot segment appears only after decoding).
    """
    path = url.path
    if ";" in path or _SCOPED_ESCAPES.search(path):
        raise InvalidURL("path_encoding", detail="encoded separator or path parameter")
    try:
        decoded = unquote_to_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidURL("path_encoding", detail="path is not UTF-8 once decoded") from exc
    if ";" in decoded or "\\" in decoded or "%" in decoded:
        # Encoded forms of what is refused above (``%3b`` is ``;``: ``..%3b`` is ``..;``).
        raise InvalidURL("path_encoding", detail="encoded path parameter or separator")
    if (
        any(ord(c) < 0x20 or ord(c) == 0x7F or c in _SEPARATOR_LOOKALIKES for c in decoded)
        or unicodedata.normalize("NFKC", decoded) != decoded
    ):
        raise InvalidURL("path_encoding", detail="control or look-alike character in path")
    if any(segment and set(segment) <= _DOTS_AND_SPACES for segment in decoded.split("/")):
        # A segment of dots and spaces only ("..%20", "...", ".%20.", "%20.."): Windows
        # path handling (IIS, NTFS-backed servers) drops trailing dots and spaces from a
        # segment, so "..%20" and "..." step up like "..".  ("." and ".." themselves were
        # removed by parse_url, and %2e is refused above.)
        raise InvalidURL("path_encoding", detail="dot segment after decoding")
    return decoded


def _names_port(entries: HostList, host: Host, port: int) -> bool:
    """Whether an entry matching ``host`` names ``port`` explicitly (``host:port``)."""
    return any(
        entry.port == port and HostList((entry,)).match_host(host, port) is not None
        for entry in entries.entries
    )


class UrlGuard:
    """Decide on resolved addresses.  Stateless apart from the DNS resolver factory."""

    def __init__(
        self,
        *,
        resolver_factory: Callable[[EgressPolicy], DnsResolver] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._resolver_factory = resolver_factory or (
            lambda p: DnsResolver(p.nameservers, p.dns_port)
        )
        self._clock = clock

    def check(
        self,
        url: str,
        policy: EgressPolicy,
        *,
        deadline: float | None = None,
        hop: int = 0,
        cancellation: Cancellation | None = None,
    ) -> ResolvedDestination:
        """Return the checked destination or raise ``EgressDenied`` (or ``ResolutionError``).

        ``cancellation``: the work the check is for can end; its DNS lookups end with it
        (``DnsResolver.resolve``)."""
        lookup = functools.partial(_lookup, cancellation=cancellation)
        try:
            return drive(self._evaluate(url, policy, deadline, _Trace(False), resolve=True), lookup)
        except EgressDenied as exc:
            _name_refusal(exc, url, hop)
            raise

    async def check_async(
        self,
        url: str,
        policy: EgressPolicy,
        *,
        deadline: float | None = None,
        hop: int = 0,
    ) -> ResolvedDestination:
        """``check`` on the running event loop: the same rules (one generator), the DNS
        exchange awaited (``DnsResolver.resolve_async``), no thread."""
        try:
            return await drive_async(
                self._evaluate(url, policy, deadline, _Trace(False), resolve=True), _lookup_async
            )
        except EgressDenied as exc:
            _name_refusal(exc, url, hop)
            raise

    def explain(self, url: str, policy: EgressPolicy, *, resolve: bool = True) -> Explanation:
        trace = _Trace(True)
        destination: ResolvedDestination | None = None
        reason: str | None = None
        try:
            destination = drive(self._evaluate(url, policy, None, trace, resolve=resolve), _lookup)
        except EgressDenied as exc:
            reason = exc.reason
            trace.steps.append(Step(STEPS[len(trace.steps)], "fail", _describe(exc)))
        except ResolutionError as exc:
            reason = exc.code
            trace.steps.append(Step(STEPS[len(trace.steps)], "fail", str(exc)))
        for name in STEPS[len(trace.steps) :]:
            trace.skip(name)
        return Explanation(
            url=_clip(url),
            steps=tuple(trace.steps),
            allowed=reason is None,
            reason=reason,
            destination=destination,
        )

    # -- the rules, in order -------------------------------------------------------------

    def _evaluate(
        self,
        url: str,
        policy: EgressPolicy,
        deadline: float | None,
        trace: _Trace,
        *,
        resolve: bool,
    ) -> Steps[_Lookup, tuple[IPAddress, ...], ResolvedDestination]:
        """The rules, in order: a generator that yields each DNS lookup it needs (``_Lookup``)
        and is sent the addresses (``net.steps``), so that both drivers run this one copy."""
        self._check_budget(deadline)

        # 1. The group's scope.
        if policy.scope is Scope.NONE:
            raise EgressDenied("scope", detail="this group has no egress")
        trace.ok("scope", policy.scope.value)

        # 2.-3. + 9. URL shape, userinfo, host syntax, IDN, legacy numeric host forms.
        parsed = parse_url(url)
        trace.ok("url", f"{parsed.scheme}://{parsed.authority}")
        host = parsed.host

        if policy.scope in (Scope.OWN_SITE, Scope.CONFIGURED_ENDPOINT):
            # A scope bounded by a path: refuse what servers would decode into a way out.
            scoped_path(parsed)

        # 4. Hosts of this installation: the only hosts of own_site, refused for the rest.
        own = _parse_list(policy.own_site_hosts, "own_site_hosts")
        own_match = own.match_host(host, parsed.port) if own else None
        # A self-hosted endpoint: the host is the operator's choice (a configured endpoint
        # with the private-address exemption), never the model's, so it may be an own host
        # (a model server on localhost).  Every other scope keeps the own-site rule.
        # The most specific endpoint the URL lies under decides: an unticked endpoint
        # nested in a ticked one is not exempt.
        matched = (
            _endpoint_match(parsed, policy.endpoints)
            if policy.scope is Scope.CONFIGURED_ENDPOINT and host.name in policy.allow_private_hosts
            else None
        )
        self_hosted = matched is not None and matched[0] in policy.allow_private_endpoints
        if policy.scope is Scope.OWN_SITE:
            if own_match is None:
                raise HostNotAllowed("not_own_site", detail=host.name)
            trace.ok("own_site", f"own host {own_match.raw}")
        elif own_match is not None and self_hosted:
            trace.ok("own_site", f"own host {own_match.raw}: self-hosted endpoint (operator)")
        else:
            if own_match is not None:
                raise HostNotAllowed("own_site", detail=host.name)
            trace.ok("own_site", "not a host of this installation")

        # configured_endpoint: only URLs under an operator-configured endpoint.
        endpoint: ParsedURL | None = None
        if policy.scope is Scope.CONFIGURED_ENDPOINT:
            # Matched above already when the host is exempt; the lists are the same.
            matched = matched or _endpoint_match(parsed, policy.endpoints)
            if matched is None:
                raise HostNotAllowed("not_configured_endpoint", detail=host.name)
            endpoint = matched[1]
            trace.ok("endpoint", endpoint.geturl())
        else:
            trace.skip("endpoint", f"scope {policy.scope.value}")

        # 5. Denylist (names and addresses; resolved addresses are checked again below).
        deny = _parse_list(policy.denylist, "denylist")
        if deny and deny.match_host(host, parsed.port) is not None:
            raise HostNotAllowed("denylist", detail=host.name)
        trace.ok("denylist", "not listed" if deny else "empty")

        # 6. Allowlist: narrows, never widens.  A name entry (or an address entry for an
        # IP literal) decides now; address entries for names are checked on the resolved
        # addresses (every one must be listed).
        allow = _parse_list(policy.allowlist, "allowlist")
        allow_match = allow.match_host(host, parsed.port) if allow else None
        deferred_allow = False
        if allow and allow_match is None:
            # Names, and IP literals that may be a NAT64 form of a listed IPv4 address.
            if any(e.address is not None for e in allow.entries):
                deferred_allow = True
            else:
                raise HostNotAllowed("not_allowlisted", detail=host.name)
        if not allow:
            trace.ok("allowlist", "no allowlist")
        elif deferred_allow:
            trace.ok("allowlist", "decided on the resolved addresses")
        else:
            trace.ok("allowlist", f"listed as {allow_match.raw}" if allow_match else "")

        # 7. Ports: the scheme's default port, unless an entry names host:port.
        if not parsed.default_port:
            named = (
                _names_port(allow, host, parsed.port)
                or (policy.scope is Scope.OWN_SITE and _names_port(own, host, parsed.port))
                or (endpoint is not None and endpoint.explicit_port)
            )
            if not named and not deferred_allow:
                raise PortNotAllowed("port", detail=str(parsed.port))
        trace.ok("port", str(parsed.port))

        # 8. Proxies: a proxy resolves names itself, which would defeat the address checks.
        proxy = applicable_proxy(policy, parsed.scheme, host, parsed.port)
        if proxy is not None and not (policy.allow_via_proxy and allow):
            raise EgressDenied("proxy", detail="a proxy applies to this destination")
        proxy_addresses: tuple[IPAddress, ...] = ()
        if proxy is not None:
            proxy, proxy_addresses = yield from self._resolve_proxy(
                proxy, policy, deadline, resolve
            )
        trace.ok("proxy", "via the configured proxy (allowlisted)" if proxy else "no proxy")

        # 10. Resolve through DNS (never getaddrinfo, never /etc/hosts).
        if host.kind is HostKind.NAME:
            if not resolve:
                trace.skip("resolve", "resolution not requested")
                trace.skip("addresses")
                return ResolvedDestination(
                    url=parsed, addresses=(), proxy=proxy, proxy_addresses=proxy_addresses
                )
            remaining = self._remaining(deadline, policy)
            addresses = yield _Lookup(self._resolver_factory(policy), host.name, remaining)
            self._check_budget(deadline)
            trace.ok("resolve", ", ".join(str(a) for a in addresses))
        else:
            assert host.address is not None
            addresses = (host.address,)
            trace.ok("resolve", "IP literal, no lookup")

        # A ``*.suffix`` grant covers names under the suffix, not the address a name spells
        # (``1.2.3.4.1u.ms``, ``01020304.05060708.rbndr.us``: wildcard DNS by another name).
        if (
            allow_match is not None
            and allow_match.kind is EntryKind.SUFFIX
            and any(spells_address(host.name, address) for address in addresses)
        ):
            raise HostNotAllowed("host_spells_address", detail=host.name)

        # The private-address exemption holds only for a host that a grant of this scope
        # also matches (EgressPolicy checks it when it is built; checked again here).
        # configured_endpoint: only a URL under an endpoint the operator exempted.
        granted = (
            self_hosted
            if policy.scope is Scope.CONFIGURED_ENDPOINT
            else allow_match is not None
            or (policy.scope is Scope.OWN_SITE and own_match is not None)
        )
        categories = self._check_addresses(
            policy,
            host,
            parsed.port,
            addresses,
            own if policy.scope is not Scope.OWN_SITE and not self_hosted else HostList(),
            deny,
            allow if deferred_allow else None,
            deferred_port=deferred_allow and not parsed.default_port,
            granted=granted,
            # Bounded by the own-site host match above (own_site scope refuses any other
            # host before this point), never by the address alone.
            own_site_private=(
                policy.allow_private_own_site
                and policy.scope is Scope.OWN_SITE
                and own_match is not None
            ),
        )
        trace.ok(
            "addresses", ", ".join(f"{a}={c}" for a, c in zip(addresses, categories, strict=True))
        )
        return ResolvedDestination(
            url=parsed,
            addresses=addresses,
            proxy=proxy,
            categories=categories,
            proxy_addresses=proxy_addresses,
        )

    def _resolve_proxy(
        self, proxy: str, policy: EgressPolicy, deadline: float | None, resolve: bool
    ) -> Steps[_Lookup, tuple[IPAddress, ...], tuple[str, tuple[IPAddress, ...]]]:
        """The operator's proxy, parsed strictly and resolved through dnspython.

        Its addresses are not held to the public-only rule (a site's egress proxy usually
        sits on a private network), but a metadata address is refused in every mode.
        """
        try:
            proxy_url = parse_url(proxy)
        except EgressDenied as exc:
            raise EgressDenied("proxy", detail="the proxy URL is not usable") from exc
        if not resolve:
            return proxy_url.geturl(), ()
        if proxy_url.host.address is not None:
            addresses: tuple[IPAddress, ...] = (proxy_url.host.address,)
        else:
            remaining = self._remaining(deadline, policy)
            resolver = self._resolver_factory(policy)
            addresses = yield _Lookup(resolver, proxy_url.host.name, remaining)
            self._check_budget(deadline)
        for address in addresses:
            if is_metadata(address):
                raise AddressNotAllowed(
                    "address_class:metadata", address=str(address), category="metadata"
                )
        return proxy_url.geturl(), addresses

    def _check_addresses(
        self,
        policy: EgressPolicy,
        host: Host,
        port: int,
        addresses: tuple[IPAddress, ...],
        own: HostList,
        deny: HostList,
        deferred_allow: HostList | None,
        *,
        deferred_port: bool,
        granted: bool = False,
        own_site_private: bool = False,
    ) -> tuple[str, ...]:
        try:
            classifier = classifier_for(policy.nat64_prefixes)
        except PolicyError as exc:
            raise EgressDenied("invalid_list", detail=f"nat64_prefixes: {exc}") from exc
        categories = tuple(classifier.classify(a) for a in addresses)
        # The private exemption holds only where a grant matched this URL:
        # an allowlist entry, the endpoint, or the own-site host match.
        private_ok = own_site_private or (granted and host.name in policy.allow_private_hosts)

        def listed(entries: HostList, address: IPAddress) -> ListEntry | None:
            # The address itself and every IPv4 address the classifier decodes from it
            # (NAT64 under each declared prefix): one destination, one decision.
            for form in (address, *classifier.embedded(address)):
                entry = entries.match_address(form, port)
                if entry is not None:
                    return entry
            return None

        for address, category in zip(addresses, categories, strict=True):
            if category == "metadata":
                # Refused in every mode, even where private access is granted.
                raise AddressNotAllowed(
                    "address_class:metadata", address=str(address), category=category
                )
            if own and listed(own, address) is not None:
                # Another name for this installation (DESIGN.md §3: an address entry
                # matches every address a name resolves to).
                raise AddressNotAllowed("own_site", address=str(address), category=category)
            if deny and listed(deny, address) is not None:
                raise AddressNotAllowed("denylist", address=str(address), category=category)
        public = [c == PUBLIC for c in categories]
        if private_ok:
            acceptable = [c == PUBLIC or c in PRIVATE_ALLOWABLE for c in categories]
            mixed = any(public) and not all(public)
        else:
            acceptable = public
            mixed = any(public) and not all(public)
        if mixed:
            bad = next(a for a, p in zip(addresses, public, strict=True) if not p)
            raise AddressNotAllowed(
                "mixed_answer",
                address=str(bad),
                category=categories[addresses.index(bad)],
                detail="the answer mixes public and non-public addresses",
            )
        for address, category, ok in zip(addresses, categories, acceptable, strict=True):
            if not ok:
                raise AddressNotAllowed(
                    f"address_class:{category}", address=str(address), category=category
                )
        if deferred_allow is not None:
            for address in addresses:
                entry = listed(deferred_allow, address)
                if entry is None:
                    raise AddressNotAllowed(
                        "not_allowlisted", address=str(address), category="unlisted"
                    )
                if deferred_port and entry.port != port:
                    raise PortNotAllowed("port", detail=str(port))
        return categories

    # -- budget ------------------------------------------------------------------------

    def _remaining(self, deadline: float | None, policy: EgressPolicy) -> float:
        if deadline is None:
            return policy.total_timeout
        return deadline - self._clock()

    def _check_budget(self, deadline: float | None) -> None:
        if deadline is not None and self._clock() >= deadline:
            raise FetchTimeout().failing("budget_exhausted")


class _Lookup(NamedTuple):
    """A lookup the rules need: the addresses of ``name`` from ``resolver``."""

    resolver: DnsResolver
    name: str
    timeout: float


def _lookup(lookup: _Lookup, cancellation: Cancellation | None = None) -> tuple[IPAddress, ...]:
    resolution = lookup.resolver.resolve(
        lookup.name, timeout=lookup.timeout, cancellation=cancellation
    )
    return resolution.addresses


async def _lookup_async(lookup: _Lookup) -> tuple[IPAddress, ...]:
    resolution = await lookup.resolver.resolve_async(lookup.name, timeout=lookup.timeout)
    return resolution.addresses


def _name_refusal(exc: EgressDenied, url: str, hop: int) -> None:
    """A refusal names the hop and (clipped) the URL it was made on."""
    exc.hop = hop
    if not exc.url:
        exc.url = _clip(url)


def _clip(value: object) -> str:
    """At most 500 characters of a caller-supplied URL, for errors and audit records."""
    return value[:500] if isinstance(value, str) else ""


def _describe(exc: WebFetchError) -> str:
    """A short, human description of a refusal for ``explain`` (operator-facing)."""
    if isinstance(exc, AddressNotAllowed) and exc.address:
        return f"{exc.reason} ({exc.address})"
    if isinstance(exc, UnresolvableHost):
        return "no A/AAAA answer"
    return exc.reason if isinstance(exc, EgressDenied) else str(exc)


_DEFAULT_GUARD = UrlGuard()


def explain(url: str, *, policy: EgressPolicy, resolve: bool = True) -> Explanation:
    """Every guard step for ``url`` under ``policy`` with its verdict.  Never connects."""
    return _DEFAULT_GUARD.explain(url, policy, resolve=resolve)
