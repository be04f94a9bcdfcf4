"""A real DNS server for the lab (dnslib for the wire format, socketserver for UDP/TCP).

It answers from a mutable table that the ``lab`` fixture resets before every test::

    table.set("a.lab.example", a=["11.0.0.10"], aaaa=["2606:4700:10::10"], ttl=0)
    table.cname("www.lab.example", "a.lab.example")
    table.sequence("rebind.lab.example", [{"a": ["11.0.0.10"]}, {"a": ["10.0.0.10"]}])
    table.nxdomain(name); table.nodata(name); table.servfail(name); table.drop(name)

Unknown names get NXDOMAIN.  A sequence hands out its entries one lookup at a time, counted
separately per query type (so an A+AAAA lookup advances both by one); its last entry
repeats.  Every query is recorded (``table.queries``).

Each reset starts a new epoch, and a query belongs to the epoch in which the server took it
off its socket.  A query of an earlier test that the server takes afterwards (the second of
an A+AAAA pair whose first answer already ended that test's lookup, still queued on the
socket or in its handler thread) is dropped: neither recorded nor answered, nor advancing a
sequence.  ``reset`` first sends a barrier through every server's socket and waits until the
serving loop took it, so every datagram and connection sent before the reset is stamped
with the old epoch (a socket's queue and a listen backlog are first in, first out).
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import socketserver
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dnslib import AAAA, CNAME, QTYPE, RCODE, RR, SOA, A, DNSRecord

__all__ = ["DnsTable", "Query", "make_servers"]

_KINDS = ("answer", "cname", "nxdomain", "nodata", "servfail", "drop", "refused", "yxdomain")


def _norm(name: str) -> str:
    return name.rstrip(".").lower()


def _v4(addresses: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(ipaddress.IPv4Address(a)) for a in addresses)


def _v6(addresses: Iterable[str]) -> tuple[str, ...]:
    # Any notation (also "::ffff:11.0.0.10"); dnslib itself only parses plain hex groups.
    return tuple(str(ipaddress.IPv6Address(a)) for a in addresses)


@dataclass(frozen=True)
class Entry:
    kind: str = "answer"
    a: tuple[str, ...] = ()
    aaaa: tuple[str, ...] = ()
    target: str = ""
    ttl: int = 0

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Entry:
        spec = dict(spec)
        ttl = int(spec.pop("ttl", 0))
        if "cname" in spec:
            return cls("cname", target=_norm(spec.pop("cname")), ttl=ttl)
        for kind in ("nxdomain", "nodata", "servfail", "drop", "refused", "yxdomain"):
            if spec.pop(kind, False):
                return cls(kind, ttl=ttl)
        if "rcode" in spec:
            kind = spec.pop("rcode")
            if kind not in _KINDS:
                raise ValueError(f"unknown DNS scenario {kind!r}")
            return cls(kind, ttl=ttl)
        entry = cls("answer", _v4(spec.pop("a", ())), _v6(spec.pop("aaaa", ())), ttl=ttl)
        if spec:
            raise ValueError(f"unknown DNS entry keys {sorted(spec)}")
        return entry


@dataclass(frozen=True)
class Query:
    name: str
    qtype: str
    transport: str  # "udp" | "tcp"
    server: str
    client: str
    time: float = field(compare=False)


class DnsTable:
    """The answers the lab DNS server gives; thread-safe; reset per test."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, list[Entry]] = {}
        self._cursor: dict[tuple[str, str], int] = {}
        self._queries: list[Query] = []
        self._errors: list[str] = []
        self._epoch = 0
        self._servers: list[tuple[str, str, int]] = []  # (transport, address, port)
        self._barrier_lock = threading.Lock()  # one reset at a time
        self._barrier_peers: set[Any] = set()
        self._barrier_reached = threading.Condition(self._lock)

    @property
    def epoch(self) -> int:
        return self._epoch

    # -- configuration ------------------------------------------------------------------
    def reset(self) -> None:
        with self._barrier_lock:
            self._drain()
            with self._lock:
                self._epoch += 1
                self._entries.clear()
                self._cursor.clear()
                self._queries.clear()
                self._errors.clear()

    def serve(self, transport: str, address: str, port: int) -> None:
        """Register a server of this table (``reset`` drains it)."""
        self._servers.append((transport, address, port))

    def _drain(self) -> None:
        """Send a barrier through every server and wait until its loop took each one."""
        held: list[socket.socket] = []
        try:
            for transport, address, port in self._servers:
                family = socket.AF_INET6 if ":" in address else socket.AF_INET
                kind = socket.SOCK_DGRAM if transport == "udp" else socket.SOCK_STREAM
                sock = socket.socket(family, kind)
                held.append(sock)
                sock.bind((address, 0))
                peer = sock.getsockname()[:2]
                with self._lock:
                    self._barrier_peers.add(peer)
                if transport == "udp":
                    sock.sendto(_BARRIER, (address, port))
                else:
                    sock.connect((address, port))
            with self._lock:
                if not self._barrier_reached.wait_for(lambda: not self._barrier_peers, 10):
                    raise RuntimeError(f"lab DNS servers took no barrier: {self._barrier_peers}")
        finally:
            for sock in held:
                sock.close()
            with self._lock:
                self._barrier_peers.clear()

    def took_barrier(self, peer: Any) -> bool:
        """Called by the serving loop for each datagram/connection: whether it was a barrier."""
        with self._lock:
            if tuple(peer[:2]) not in self._barrier_peers:
                return False
            self._barrier_peers.discard(tuple(peer[:2]))
            self._barrier_reached.notify_all()
            return True

    def _put(self, name: str, entries: list[Entry]) -> None:
        with self._lock:
            self._entries[_norm(name)] = entries
            for key in [k for k in self._cursor if k[0] == _norm(name)]:
                del self._cursor[key]

    def set(self, name: str, a: Iterable[str] = (), aaaa: Iterable[str] = (), ttl: int = 0) -> None:
        """A/AAAA records; with neither, the name exists without addresses (NODATA)."""
        self._put(name, [Entry("answer", _v4(a), _v6(aaaa), ttl=ttl)])

    def cname(self, name: str, target: str, ttl: int = 0) -> None:
        self._put(name, [Entry("cname", target=_norm(target), ttl=ttl)])

    def sequence(self, name: str, specs: Sequence[Mapping[str, Any]]) -> None:
        """One entry per lookup (``{"a": [...], "aaaa": [...], "ttl": 0}``, ``{"cname": t}``,
        ``{"nxdomain": True}``, ``{"servfail": True}``, ``{"drop": True}``...)."""
        if not specs:
            raise ValueError("a sequence needs at least one entry")
        self._put(name, [Entry.from_spec(spec) for spec in specs])

    def nxdomain(self, name: str) -> None:
        self._put(name, [Entry("nxdomain")])

    def nodata(self, name: str) -> None:
        self._put(name, [Entry("nodata")])

    def servfail(self, name: str) -> None:
        self._put(name, [Entry("servfail")])

    def refused(self, name: str) -> None:
        self._put(name, [Entry("refused")])

    def yxdomain(self, name: str) -> None:
        """Answer with rcode YXDOMAIN (an unusual error a resolver must still survive)."""
        self._put(name, [Entry("yxdomain")])

    def drop(self, name: str) -> None:
        """Never answer: the client runs into its timeout."""
        self._put(name, [Entry("drop")])

    # -- observation --------------------------------------------------------------------
    @property
    def queries(self) -> list[Query]:
        with self._lock:
            return list(self._queries)

    def lookups(self, name: str, qtype: str = "A") -> int:
        """How many queries of ``qtype`` for ``name`` the server received."""
        name = _norm(name)
        return sum(1 for q in self.queries if q.name == name and q.qtype == qtype)

    # -- answering ----------------------------------------------------------------------
    @property
    def errors(self) -> list[str]:
        """Internal errors of the server (a lab bug, never a scenario)."""
        with self._lock:
            return list(self._errors)

    def safe_answer(
        self, request: DNSRecord, transport: str, server: str, client: str, epoch: int
    ) -> bytes | None:
        try:
            return self.answer(request, transport, server, client, epoch)
        except Exception as exc:
            with self._lock:
                self._errors.append(repr(exc))
            reply = request.reply()
            reply.header.rcode = RCODE.SERVFAIL
            return bytes(reply.pack())

    def _entry(self, name: str, qtype: str) -> Entry | None:
        entries = self._entries.get(name)
        if entries is None:
            return None
        key = (name, qtype)
        index = self._cursor.get(key, 0)
        self._cursor[key] = index + 1
        return entries[min(index, len(entries) - 1)]

    def answer(
        self, request: DNSRecord, transport: str, server: str, client: str, epoch: int
    ) -> bytes | None:
        """The packed reply to ``request``, or ``None`` to drop it."""
        reply = request.reply()
        if not request.questions:
            reply.header.rcode = RCODE.FORMERR
            return bytes(reply.pack())
        question = request.q
        qname = str(question.qname)
        qtype = QTYPE.get(question.qtype, str(question.qtype))
        with self._lock:
            if epoch != self._epoch:
                return None  # taken before the last reset: an earlier test's query
            self._queries.append(
                Query(_norm(qname), str(qtype), transport, server, client, time.monotonic())
            )
            name = _norm(qname)
            owner = qname
            for _ in range(8):  # follow CNAME chains, as a recursive resolver would
                entry = self._entry(name, str(qtype))
                if entry is None:
                    reply.header.rcode = RCODE.NXDOMAIN
                    break
                if entry.kind == "drop":
                    return None
                if entry.kind in ("servfail", "refused"):
                    servfail = entry.kind == "servfail"
                    reply.header.rcode = RCODE.SERVFAIL if servfail else RCODE.REFUSED
                    reply.rr = []
                    break
                if entry.kind == "nxdomain":
                    reply.header.rcode = RCODE.NXDOMAIN
                    break
                if entry.kind == "yxdomain":
                    reply.header.rcode = RCODE.YXDOMAIN
                    break
                if entry.kind == "cname":
                    if qtype == "CNAME":
                        reply.add_answer(
                            RR(owner, QTYPE.CNAME, rdata=CNAME(entry.target + "."), ttl=entry.ttl)
                        )
                        break
                    reply.add_answer(
                        RR(owner, QTYPE.CNAME, rdata=CNAME(entry.target + "."), ttl=entry.ttl)
                    )
                    name = entry.target
                    owner = entry.target + "."
                    continue
                if entry.kind == "answer" and qtype == "A":
                    for addr in entry.a:
                        reply.add_answer(RR(owner, QTYPE.A, rdata=A(addr), ttl=entry.ttl))
                elif entry.kind == "answer" and qtype == "AAAA":
                    for addr in entry.aaaa:
                        packed = tuple(ipaddress.IPv6Address(addr).packed)
                        reply.add_answer(RR(owner, QTYPE.AAAA, rdata=AAAA(packed), ttl=entry.ttl))
                break
            if reply.header.rcode == RCODE.NOERROR and not any(
                rr.rtype == question.qtype for rr in reply.rr
            ):
                # NODATA (or only a CNAME chain): an SOA lets resolvers cache the negative.
                reply.add_auth(
                    RR(
                        "lab.example.",
                        QTYPE.SOA,
                        ttl=0,
                        rdata=SOA("ns.lab.example.", "hostmaster.lab.example.", (1, 60, 60, 60, 0)),
                    )
                )
        return bytes(reply.pack())


# -- servers ------------------------------------------------------------------------------
_BARRIER = b"lab-barrier"
_stamp = threading.local()  # the epoch a handler thread's request was taken in


class _LabThreads(socketserver.ThreadingMixIn):
    daemon_threads = True
    block_on_close = False
    lab_kind = "dns"
    table: DnsTable

    def process_request(self, request: Any, client_address: Any) -> None:
        # The serving loop's thread: stamp the epoch now, in socket order.
        if self.table.took_barrier(client_address):
            self.shutdown_request(request)
            return
        epoch = self.table.epoch

        def run() -> None:
            _stamp.epoch = epoch
            self.process_request_thread(request, client_address)

        thread = threading.Thread(
            target=run,
            name=f"lab-{self.lab_kind}",
            daemon=True,
        )
        thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away is no failure of the lab


class _UDPHandler(socketserver.BaseRequestHandler):
    server: _UDPServer

    def handle(self) -> None:
        data, sock = self.request
        try:
            request = DNSRecord.parse(data)
        except Exception:
            return
        reply = self.server.table.safe_answer(
            request, "udp", self.server.lab_address, self.client_address[0], _stamp.epoch
        )
        if reply is None:
            return
        if len(reply) > 512:
            truncated = request.reply()
            truncated.header.tc = 1
            reply = truncated.pack()
        sock.sendto(reply, self.client_address)


class _TCPHandler(socketserver.BaseRequestHandler):
    server: _TCPServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(30)
        while True:
            try:
                head = self._read(sock, 2)
                if head is None:
                    return
                data = self._read(sock, int.from_bytes(head, "big"))
                if data is None:
                    return
                request = DNSRecord.parse(data)
            except Exception:
                return
            reply = self.server.table.safe_answer(
                request, "tcp", self.server.lab_address, self.client_address[0], _stamp.epoch
            )
            if reply is None:
                # Hold the connection without answering until the client gives up.
                try:
                    while sock.recv(4096):
                        pass
                except OSError:
                    pass
                return
            try:
                sock.sendall(len(reply).to_bytes(2, "big") + reply)
            except OSError:
                return

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf


class _UDPServer(_LabThreads, socketserver.UDPServer):
    allow_reuse_address = True

    def __init__(self, address: str, port: int, table: DnsTable) -> None:
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.table = table
        self.lab_address = address
        super().__init__((address, port), _UDPHandler)


class _TCPServer(_LabThreads, socketserver.TCPServer):
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: str, port: int, table: DnsTable) -> None:
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.table = table
        self.lab_address = address
        super().__init__((address, port), _TCPHandler)


def make_servers(
    addresses: Iterable[str], table: DnsTable, port: int = 53
) -> list[socketserver.TCPServer]:
    """UDP and TCP servers on ``port`` of every address (bound, not yet serving)."""
    servers: list[socketserver.TCPServer] = []
    for address in addresses:
        servers.append(_UDPServer(address, port, table))
        servers.append(_TCPServer(address, port, table))
        table.serve("udp", address, port)
        table.serve("tcp", address, port)
    return servers


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m tests.lab.dns ADDRESS[:PORT] NAME=IP[,IP...] ...``: serve the table on
    UDP and TCP until interrupted (README, "Try a web fetch on a machine without outside
    DNS").  Every other name gets NXDOMAIN."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.lab.dns", description=main.__doc__)
    parser.add_argument("listen", help="the address to serve on, e.g. 11.0.0.53 or 11.0.0.53:5353")
    parser.add_argument("names", nargs="+", metavar="NAME=IP[,IP...]")
    args = parser.parse_args(argv)
    # IPv4 with an optional :PORT; an IPv6 address is given bare (port 53).
    address, port = args.listen, "53"
    if args.listen.count(":") == 1:
        address, port = args.listen.split(":")
    table = DnsTable()
    for spec in args.names:
        name, sep, ips = spec.partition("=")
        if not sep or not name or not ips:
            parser.error(f"not NAME=IP[,IP...]: {spec!r}")
        found = [ipaddress.ip_address(ip.strip()) for ip in ips.split(",") if ip.strip()]
        table.set(
            name,
            a=[str(ip) for ip in found if ip.version == 4],
            aaaa=[str(ip) for ip in found if ip.version == 6],
        )
    servers = make_servers([address], table, port=int(port))
    for server in servers[1:]:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"DNS on {address} port {port} (UDP, TCP): {' '.join(args.names)}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        servers[0].serve_forever()


if __name__ == "__main__":
    main()
