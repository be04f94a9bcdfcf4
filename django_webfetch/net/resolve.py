"""Name resolution through dnspython only.

Never ``socket.getaddrinfo`` and never ``/etc/hosts``: the guard must decide on exactly the
addresses the transport will connect to, and a local hosts file or NSS module (mDNS,
myhostname, docker's embedded names) is a classic way to smuggle an internal address past a
check made on a different lookup path.  dnspython reads only ``resolv.conf`` (when no
nameservers are given), builds and parses the DNS messages; the two queries go out here.

A and AAAA are asked concurrently, on one connected UDP socket (as glibc's stub resolver
does), within one time budget: the lookup costs one round trip, not two.  A truncated
answer is asked again over TCP (RFC 7766).  A server that answers SERVFAIL, REFUSED or
anything but NOERROR/NXDOMAIN is skipped for the next one; when every server failed the
lookup fails closed (``ResolutionError``).

The decision is written once (``DnsResolver._resolution``, a generator of exchanges, see
``net.steps``): ``resolve`` waits on the socket with ``select``, ``resolve_async`` on the
running event loop (``anyio.wait_readable``: no thread, and no ``getaddrinfo`` anywhere).

One name is never asked: ``localhost`` and every name under it are the loopback addresses
``127.0.0.1`` and ``::1`` (RFC 6761 §6.3: resolvers "SHOULD always return the IP loopback
address" for them and not send the query on).  A fixed answer, not the hosts file: a DNS
server that answers ``localhost`` with another address cannot change it, and the guard then
refuses it as loopback everywhere except for an endpoint an operator let reach private
addresses (a model server on this machine).

A blocking lookup made for work that can end (a plugin call: ``net.transport.Cancellation``)
is part of that work's egress: each exchange's socket, UDP or TCP, is held by the
cancellation, whose ``cancel`` shuts it (waking the wait on it at once), and no exchange
starts after it; the lookup then fails ``Interrupted`` with the cancellation's sub-code.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import math
import secrets
import select
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from typing import TYPE_CHECKING, NamedTuple

import anyio
import dns.asyncquery
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.resolver

from .errors import ResolutionError, UnresolvableHost
from .steps import Steps, drive, drive_async

if TYPE_CHECKING:
    from .transport import Cancellation

__all__ = ["LOOPBACK_ANSWER", "DnsResolver", "Resolution"]

IPAddress = IPv4Address | IPv6Address

_QTYPES = (dns.rdatatype.A, dns.rdatatype.AAAA)
#: RFC 6761 §6.3: the answer for ``localhost`` and the names under it, never asked of DNS.
_LOCALHOST = dns.name.from_text("localhost", origin=dns.name.root)
LOOPBACK_ANSWER: tuple[IPv4Address | IPv6Address, ...] = (
    IPv4Address("127.0.0.1"),
    IPv6Address("::1"),
)
#: Per-server attempt when several servers are configured (resolv.conf's default).
_ATTEMPT = 2.0


@dataclass(frozen=True)
class Resolution:
    name: str
    addresses: tuple[IPAddress, ...]
    elapsed: float


@functools.lru_cache(maxsize=32)
def _servers(nameservers: tuple[str, ...] | None) -> tuple[str, ...]:
    if nameservers is not None:
        return nameservers  # validated as IP literals by EgressPolicy
    # Reads /etc/resolv.conf.  Search domains are never applied: every query below is for
    # an absolute name.
    return tuple(str(ns) for ns in dns.resolver.Resolver(configure=True).nameservers)


class _Query:
    """One question on the wire: a random id, RD set, QDCOUNT 1, no EDNS."""

    __slots__ = ("id", "name", "rdtype", "wire")

    def __init__(self, name: dns.name.Name, wire_name: bytes, rdtype: int) -> None:
        self.id = secrets.randbits(16)
        self.name = name
        self.rdtype = rdtype
        header = struct.pack("!HHHHHH", self.id, 0x0100, 1, 0, 0, 0)
        self.wire = header + wire_name + struct.pack("!HH", rdtype, dns.rdataclass.IN)

    def answered_by(self, response: dns.message.Message) -> bool:
        """The response's id, QR bit and question match ours (RFC 5452 §4)."""
        if response.id != self.id or not response.flags & dns.flags.QR:
            return False
        if len(response.question) != 1:
            return False
        question = response.question[0]
        return (
            question.name == self.name
            and question.rdtype == self.rdtype
            and question.rdclass == dns.rdataclass.IN
        )


class _ServerFailed(Exception):
    """This server gave no usable answer: try the next one."""


class _Ask(NamedTuple):
    """One exchange with one server: A and AAAA for ``qname``, answered by ``deadline``."""

    qname: dns.name.Name
    server: str
    deadline: float


class _Exchange:
    """The two questions of one exchange and their answers: the wire rules (ids, matching,
    truncation, usable rcodes) once, for the blocking and the async socket loop."""

    def __init__(self, qname: dns.name.Name) -> None:
        # The two queries are built by hand (RFC 1035 §4.1: header with RD, one question):
        # dnspython's make_query + to_wire cost as much as the round trip on a LAN.
        wire_name = qname.to_wire() or b""  # absolute names always give bytes
        self.qname = qname
        self.queries = [_Query(qname, wire_name, rdtype) for rdtype in _QTYPES]
        self._answers: list[dns.message.QueryMessage | None] = [None, None]

    def open(self, server: str, port: int) -> socket.socket:
        """A connected, non-blocking UDP socket, nothing sent yet (``send``)."""
        family = socket.AF_INET6 if ":" in server else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            # Connected: the kernel drops datagrams from any other source.
            sock.connect((server, port))
        except OSError as exc:  # no route to the server (ENETUNREACH)
            sock.close()
            raise _ServerFailed(f"connect: {exc.strerror or exc}") from exc
        return sock

    def send(self, sock: socket.socket) -> None:
        """Both questions, on the socket ``open`` gave."""
        try:
            for query in self.queries:
                sock.send(query.wire)
        except OSError as exc:
            raise _ServerFailed(f"send: {exc.strerror or exc}") from exc

    @property
    def pending(self) -> bool:
        return None in self._answers

    def feed(self, wire: bytes) -> _Query | None:
        """Take one datagram: an answer is kept; a truncated one returns its question, to
        be asked again over TCP (RFC 7766) and handed to ``answer``; garbage is ignored."""
        try:
            response = dns.message.from_wire(wire, ignore_trailing=True)
        except dns.exception.DNSException:
            return None  # garbage: ignore, keep waiting
        for index, query in enumerate(self.queries):
            if self._answers[index] is None and query.answered_by(response):
                if response.flags & dns.flags.TC:
                    return query
                self._answers[index] = _usable(response)
                return None
        return None

    def answer(self, query: _Query, response: dns.message.Message) -> None:
        self._answers[self.queries.index(query)] = _usable(response)

    def answers(self) -> tuple[dns.message.QueryMessage, ...]:
        return tuple(a for a in self._answers if a is not None)


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has data within ``timeout`` seconds.  ``poll``, not ``select``:
    ``select`` refuses a descriptor numbered 1024 or above, which a busy process has."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(math.ceil(timeout * 1000)))


def _recv(sock: socket.socket) -> bytes | None:
    """One datagram, or ``None`` when the readable socket had none after all (a race)."""
    try:
        return sock.recv(65535)
    except BlockingIOError:  # pragma: no cover - readable, then gone (a race)
        return None
    except OSError as exc:  # pragma: no cover - usually reported by send()
        # ICMP port unreachable on a connected socket: nobody serves DNS there.
        raise _ServerFailed(f"recv: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def _held(ending: Cancellation | None, sock: socket.socket) -> Iterator[None]:
    """``sock`` held by ``ending`` while its exchange lasts: ``ending.cancel`` shuts it,
    which wakes a wait on it at once; a failure of the exchange after the cancel is the
    cancellation's (``Interrupted``), not the server's.  Once cancelled, ``hold`` refuses:
    no question is sent."""
    if ending is None:
        yield
        return
    held = ending.hold(sock)
    try:
        yield
    except (_ServerFailed, TimeoutError) as exc:
        ending.check(exc)  # the cancellation's doing: ``Interrupted``
        raise
    finally:
        held.release()


def _check(ending: Cancellation | None) -> None:
    """``Interrupted`` once ``ending`` was cancelled (its shutdown made the socket readable)."""
    if ending is not None:
        ending.check()


def _tcp_exchange(
    query: dns.message.Message,
    server: str,
    port: int,
    timeout: float,
    ending: Cancellation | None,
) -> dns.message.Message:
    """``query`` over TCP on a socket of our own, so that ``ending`` can hold it."""
    family = socket.AF_INET6 if ":" in server else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock, _held(ending, sock):
        sock.setblocking(False)
        # The connect goes on in the background; dnspython's first send waits for it (up
        # to ``timeout``) and reports its failure (refused, reset) as an OSError.
        sock.connect_ex((server, port))
        return dns.query.tcp(query, server, timeout=timeout, port=port, sock=sock)


def _tcp_query(
    rdtype: int, qname: dns.name.Name, deadline: float
) -> tuple[dns.message.Message, float]:
    remaining = deadline - time.monotonic()
    if remaining <= 0:  # pragma: no cover - the budget ran out between two statements
        raise TimeoutError
    return dns.message.make_query(qname, dns.rdatatype.RdataType(rdtype)), remaining


@contextlib.contextmanager
def _tcp_errors() -> Iterator[None]:
    try:
        yield
    except dns.exception.Timeout as exc:
        raise TimeoutError from exc
    except (OSError, EOFError, dns.exception.DNSException) as exc:
        # EOFError: the server closed the TCP connection without an answer.
        raise _ServerFailed(f"tcp: {type(exc).__name__}") from exc


def _usable(response: dns.message.Message) -> dns.message.QueryMessage:
    if not isinstance(response, dns.message.QueryMessage):  # pragma: no cover
        raise _ServerFailed("not a query response")  # from_wire of a QUERY answer is one
    rcode = response.rcode()
    if rcode not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
        # SERVFAIL, REFUSED, YXDOMAIN, FORMERR...: fail closed on this server.
        raise _ServerFailed(dns.rcode.to_text(rcode))
    return response


class DnsResolver:
    """Resolve A and AAAA for one absolute name within a time budget.

    ``resolve`` waits on the sockets with blocking calls, ``resolve_async`` awaits them on
    the running event loop (no thread); both run the one decision ``_resolution``.
    """

    def __init__(
        self,
        nameservers: tuple[str, ...] | None = None,
        port: int = 53,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._nameservers = nameservers
        self._port = port
        self._clock = clock

    def resolve(
        self, name: str, *, timeout: float, cancellation: Cancellation | None = None
    ) -> Resolution:
        """``cancellation``: the work the lookup is for can end (see the module)."""
        ask = functools.partial(self._ask_server, cancellation)
        return drive(self._resolution(name, timeout), ask)

    async def resolve_async(self, name: str, *, timeout: float) -> Resolution:
        return await drive_async(self._resolution(name, timeout), self._ask_server_async)

    def _resolution(
        self, name: str, timeout: float
    ) -> Steps[_Ask, tuple[dns.message.QueryMessage, ...], Resolution]:
        start = self._clock()
        if timeout <= 0:
            raise ResolutionError("no time left to resolve the host", detail=name)
        try:
            qname = dns.name.from_text(name, origin=dns.name.root)
        except (dns.exception.DNSException, ValueError) as exc:
            raise UnresolvableHost(detail=f"invalid DNS name: {exc}") from exc
        if qname.is_subdomain(_LOCALHOST):
            return Resolution(name=name, addresses=LOOPBACK_ANSWER, elapsed=self._clock() - start)
        try:
            servers = _servers(self._nameservers)
        except dns.exception.DNSException as exc:  # pragma: no cover - needs a broken resolv.conf
            raise ResolutionError("no DNS server is configured", detail=repr(exc)) from exc
        if not servers:
            raise ResolutionError("no DNS server is configured", detail=name)

        remaining = timeout - (self._clock() - start)
        responses = yield from self._ask(qname, servers, remaining)
        elapsed = self._clock() - start
        if elapsed > timeout:
            raise ResolutionError("DNS resolution ran out of time", detail=name).failing(
                "dns_timeout"
            )
        addresses: list[IPAddress] = []
        for response in responses:
            try:
                chain = response.resolve_chaining()
            except dns.exception.DNSException as exc:
                raise ResolutionError("DNS resolution failed", detail=repr(exc)) from exc
            if response.rcode() == dns.rcode.NXDOMAIN:
                raise UnresolvableHost(detail=f"NXDOMAIN for {name}")
            if chain.answer is not None:
                addresses.extend(ipaddress.ip_address(rd.address) for rd in chain.answer)
        if not addresses:
            raise UnresolvableHost(detail=f"no A or AAAA records for {name}")
        # Deduplicate, keep order (A first: most hosts answer on IPv4).
        unique = tuple(dict.fromkeys(addresses))
        return Resolution(name=name, addresses=unique, elapsed=elapsed)

    def _ask(
        self, qname: dns.name.Name, servers: tuple[str, ...], budget: float
    ) -> Steps[_Ask, tuple[dns.message.QueryMessage, ...], tuple[dns.message.QueryMessage, ...]]:
        """A and AAAA responses from the first server that answers both usably."""
        deadline = time.monotonic() + budget
        live = list(servers)
        failures: list[str] = []
        while live:
            for server in list(live):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ResolutionError("DNS resolution timed out", detail=str(qname)).failing(
                        "dns_timeout"
                    )
                attempt = remaining if len(live) == 1 else min(_ATTEMPT, remaining)
                try:
                    return (yield _Ask(qname, server, time.monotonic() + attempt))
                except _ServerFailed as exc:
                    failures.append(f"{server}: {exc}")
                    live.remove(server)
                except TimeoutError:
                    continue
        raise ResolutionError("no DNS server could answer", detail="; ".join(failures)).failing(
            "dns_failure"
        )

    def _ask_server(
        self, ending: Cancellation | None, ask: _Ask
    ) -> tuple[dns.message.QueryMessage, ...]:
        exchange = _Exchange(ask.qname)
        with exchange.open(ask.server, self._port) as sock, _held(ending, sock):
            exchange.send(sock)
            while exchange.pending:
                remaining = ask.deadline - time.monotonic()
                if remaining <= 0:  # pragma: no cover - a race with the select below
                    raise TimeoutError
                readable = _readable(sock, remaining)
                _check(ending)
                if not readable:
                    raise TimeoutError
                wire = _recv(sock)
                truncated = None if wire is None else exchange.feed(wire)
                if truncated is not None:
                    query, left = _tcp_query(truncated.rdtype, ask.qname, ask.deadline)
                    with _tcp_errors():
                        response = _tcp_exchange(query, ask.server, self._port, left, ending)
                    exchange.answer(truncated, response)
        return exchange.answers()

    async def _ask_server_async(self, ask: _Ask) -> tuple[dns.message.QueryMessage, ...]:
        exchange = _Exchange(ask.qname)
        with exchange.open(ask.server, self._port) as sock:
            exchange.send(sock)
            while exchange.pending:
                remaining = ask.deadline - time.monotonic()
                if remaining <= 0:  # pragma: no cover - a race with the wait below
                    raise TimeoutError
                with anyio.move_on_after(remaining) as waiting:
                    await anyio.wait_readable(sock)
                if waiting.cancelled_caught:
                    raise TimeoutError
                wire = _recv(sock)
                truncated = None if wire is None else exchange.feed(wire)
                if truncated is not None:
                    query, left = _tcp_query(truncated.rdtype, ask.qname, ask.deadline)
                    with _tcp_errors():
                        response = await dns.asyncquery.tcp(
                            query, ask.server, timeout=left, port=self._port
                        )
                    exchange.answer(truncated, response)
        return exchange.answers()
