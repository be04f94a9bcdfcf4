"""Name resolution through dnspython only.

Never ``socket.getaddrinfo`` and never ``/etc/hosts``: the guard must decide on exactly the
addresses the transport will connect to, and a local hosts file or NSS module (mDNS,
myhostname, docker's embedded names) is a classic way to smuggle an internal address past a
check made on a different lookup path.  dnspython reads only ``resolv.conf`` (when no
nameservers are given) and talks DNS.
"""

from __future__ import annotations

import functools
import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

import dns.exception
import dns.name
import dns.rdatatype
import dns.resolver

from .errors import ResolutionError, UnresolvableHost

__all__ = ["DnsResolver", "Resolution"]

IPAddress = IPv4Address | IPv6Address


@dataclass(frozen=True)
class Resolution:
    name: str
    addresses: tuple[IPAddress, ...]
    elapsed: float


@functools.lru_cache(maxsize=32)
def _make_resolver(nameservers: tuple[str, ...] | None, port: int) -> dns.resolver.Resolver:
    if nameservers is None:
        # Reads /etc/resolv.conf (nameservers, timeout options).  Search domains are
        # never applied: every query below is for an absolute name.
        resolver = dns.resolver.Resolver(configure=True)
    else:
        # Validated as IP literals by EgressPolicy.
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = list(nameservers)
    resolver.port = port
    # No resolver-level cache: a cache would make a later lookup differ from the checked
    # one only in our favour, but it also hides TTL-0 rebinding from the tests.  Pinning
    # already guarantees we connect to what we checked.
    resolver.cache = None
    return resolver


class DnsResolver:
    """Resolve A and AAAA for one absolute name within a time budget."""

    def __init__(
        self,
        nameservers: tuple[str, ...] | None = None,
        port: int = 53,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._resolver = _make_resolver(nameservers, port)
        self._clock = clock

    def resolve(self, name: str, *, timeout: float) -> Resolution:
        start = self._clock()
        if timeout <= 0:
            raise ResolutionError("no time left to resolve the host", detail=name)
        try:
            qname = dns.name.from_text(name, origin=dns.name.root)
        except (dns.exception.DNSException, ValueError) as exc:
            raise UnresolvableHost(detail=f"invalid DNS name: {exc}") from exc

        addresses: list[IPAddress] = []
        nxdomain = False
        for rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
            remaining = timeout - (self._clock() - start)
            if remaining <= 0:
                raise ResolutionError("DNS resolution ran out of time", detail=name)
            try:
                answer = self._resolver.resolve(
                    qname, rdtype, search=False, lifetime=remaining, raise_on_no_answer=False
                )
            except dns.resolver.NXDOMAIN:
                nxdomain = True
                break
            except dns.resolver.NoNameservers as exc:
                # SERVFAIL/REFUSED from every server: fail closed.
                raise ResolutionError("no DNS server could answer", detail=str(exc)) from exc
            except dns.exception.Timeout as exc:
                raise ResolutionError("DNS resolution timed out", detail=name) from exc
            except dns.exception.DNSException as exc:
                raise ResolutionError("DNS resolution failed", detail=repr(exc)) from exc
            if answer.rrset is None:
                continue
            for rdata in answer.rrset:
                addresses.append(ipaddress.ip_address(rdata.address))
        elapsed = self._clock() - start
        if nxdomain:
            raise UnresolvableHost(detail=f"NXDOMAIN for {name}")
        if not addresses:
            raise UnresolvableHost(detail=f"no A or AAAA records for {name}")
        # Deduplicate, keep order (A first: most hosts answer on IPv4).
        unique = tuple(dict.fromkeys(addresses))
        return Resolution(name=name, addresses=unique, elapsed=elapsed)
