"""A lookup made for work that ends (``net.transport.Cancellation``) ends with it.

A cancel shuts the exchange's socket, UDP or TCP, so the wait on it wakes at once; no
question is sent after it; the lookup fails ``Interrupted`` with the cancellation's
sub-code (decision 0066, amended for round 27).  The lab DNS server counts the questions.

History: issue 30, round 27, finding 3.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import Any

import httpx
import pytest
from dnslib import DNSRecord

from django_webfetch.net import FetchError, ResolutionError
from django_webfetch.net.failures import Interrupted
from django_webfetch.net.guarded import GuardedTransport
from django_webfetch.net.resolve import DnsResolver
from django_webfetch.net.transport import Cancellation
from tests.settle import SAFETY_NET

pytestmark = pytest.mark.lab

_ENDED = "plugin_call_ended"
#: Far longer than the safety net: a lookup that ends before it was ended by its cancel.
_LONG = 10 * SAFETY_NET


def _asked(lab: Any, name: str) -> list[Any]:
    return [q for q in lab.dns.queries if q.name.rstrip(".") == name]


def _settled(lab: Any) -> None:
    """Every datagram sent before now is on the lab's record: a question of our own,
    answered, came after them."""
    lab.dns.set("marker.lab.example", a=["11.0.0.10"])
    DnsResolver(lab.nameservers).resolve("marker.lab.example", timeout=SAFETY_NET)
    assert lab.wait_for(lambda: _asked(lab, "marker.lab.example"), SAFETY_NET)


class _Lookup(threading.Thread):
    """``resolve`` in a thread of its own: what it returned or raised."""

    def __init__(self, resolver: DnsResolver, name: str, ending: Cancellation) -> None:
        super().__init__(daemon=True)
        self._resolver = resolver
        self._name = name
        self._ending = ending
        self.outcome: Any = None

    def run(self) -> None:
        try:
            self.outcome = self._resolver.resolve(
                self._name, timeout=_LONG, cancellation=self._ending
            )
        except Exception as exc:
            self.outcome = exc

    def ended(self) -> Any:
        self.join(SAFETY_NET)
        assert not self.is_alive(), "the lookup went on after its cancel"
        return self.outcome


def test_a_cancel_wakes_the_wait_on_a_nameserver_that_never_answers(lab):
    """Two nameservers, neither answering: the cancel ends the wait on the first at once
    and the second is never asked."""
    lab.dns.drop("silent.lab.example")
    ending = Cancellation()
    lookup = _Lookup(DnsResolver((lab.DNS_V4, lab.DNS_V6)), "silent.lab.example", ending)
    lookup.start()
    assert lab.wait_for(lambda: len(_asked(lab, "silent.lab.example")) == 2, SAFETY_NET)
    ending.cancel(_ENDED)
    outcome = lookup.ended()
    _settled(lab)
    assert isinstance(outcome, Interrupted), outcome
    assert outcome.failure == _ENDED
    asked = [(q.qtype, q.server) for q in _asked(lab, "silent.lab.example")]
    assert sorted(asked) == [("A", lab.DNS_V4), ("AAAA", lab.DNS_V4)], asked


def test_a_lookup_for_work_that_ended_asks_nothing(lab):
    lab.dns.set("late.lab.example", a=["11.0.0.10"])
    ending = Cancellation()
    ending.cancel(_ENDED)
    with pytest.raises(Interrupted) as info:
        DnsResolver(lab.nameservers).resolve(
            "late.lab.example", timeout=SAFETY_NET, cancellation=ending
        )
    assert info.value.failure == _ENDED
    _settled(lab)
    assert _asked(lab, "late.lab.example") == []


def test_a_request_of_work_that_ends_in_its_lookup_fails_with_the_works_sub_code(lab):
    """Through the guarded client: the hop's lookup ends with the request's work, and the
    request fails ``FetchError`` with the cancellation's sub-code, not a DNS failure."""
    lab.dns.drop("hop.lab.example")
    ending = Cancellation()
    outcome: list[BaseException] = []

    def request() -> None:
        policy = lab.policy(nameservers=(lab.DNS_V4, lab.DNS_V6))
        transport = GuardedTransport(policy, cancellation=ending)
        with httpx.Client(transport=transport) as client:
            try:
                client.get(lab.url("hop.lab.example", "/plain"))
            except Exception as exc:
                outcome.append(exc)

    thread = threading.Thread(target=request, daemon=True)
    thread.start()
    assert lab.wait_for(lambda: len(_asked(lab, "hop.lab.example")) == 2, SAFETY_NET)
    ending.cancel(_ENDED)
    thread.join(SAFETY_NET)
    assert not thread.is_alive(), "the request went on after its cancel"
    _settled(lab)
    assert len(outcome) == 1, outcome
    assert isinstance(outcome[0], FetchError), outcome
    assert outcome[0].failure == _ENDED
    assert len(_asked(lab, "hop.lab.example")) == 2


def test_a_lookup_under_a_live_cancellation_answers_as_any(lab):
    """Not cancelled, the held exchanges answer as they would without: over UDP, over
    TCP after a truncated answer, and a server's failure stays the server's."""
    many = [f"11.0.1.{i}" for i in range(1, 61)]  # no 512-byte UDP answer holds 60
    lab.dns.set("few.lab.example", a=["11.0.0.10"])
    lab.dns.set("many.lab.example", a=many)
    lab.dns.servfail("failing.lab.example")
    ending = Cancellation()
    resolver = DnsResolver(lab.nameservers)
    few = resolver.resolve("few.lab.example", timeout=SAFETY_NET, cancellation=ending)
    assert [str(a) for a in few.addresses] == ["11.0.0.10"]
    resolved = resolver.resolve("many.lab.example", timeout=SAFETY_NET, cancellation=ending)
    assert sorted(str(a) for a in resolved.addresses) == sorted(many)
    assert "tcp" in {q.transport for q in _asked(lab, "many.lab.example")}
    with pytest.raises(ResolutionError) as info:
        resolver.resolve("failing.lab.example", timeout=SAFETY_NET, cancellation=ending)
    assert info.value.failure == "dns_failure"


def test_a_nameserver_without_a_route_fails_before_any_question_is_held(lab):
    """The exchange's socket is connected before the cancellation holds it: a server the
    namespace has no route to fails there, the server's failure (the next one is asked)."""
    lab.dns.set("routed.lab.example", a=["11.0.0.10"])
    resolver = DnsResolver(("192.0.2.53", *lab.nameservers))
    resolved = resolver.resolve(
        "routed.lab.example", timeout=SAFETY_NET, cancellation=Cancellation()
    )
    assert [str(a) for a in resolved.addresses] == ["11.0.0.10"]
    with pytest.raises(ResolutionError) as info:
        DnsResolver(("192.0.2.53",)).resolve("routed.lab.example", timeout=SAFETY_NET)
    assert info.value.failure == "dns_failure"
    assert "192.0.2.53: connect: " in info.value.detail


_SILENT_TCP = ("11.0.0.19", 5395)


class _TruncatingSilentDns:
    """UDP: every answer truncated.  TCP: the connection accepted, the question read, no
    answer ever (until ``close``)."""

    def __init__(self) -> None:
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(_SILENT_TCP)
        self.tcp = socket.socket()
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(_SILENT_TCP)
        self.tcp.listen(4)
        self.asked_over_tcp = threading.Event()
        self.closing = threading.Event()
        self.udp_questions = 0
        self.threads = [
            threading.Thread(target=self._udp, daemon=True),
            threading.Thread(target=self._tcp, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _udp(self) -> None:
        while True:
            data, peer = self.udp.recvfrom(4096)
            if self.closing.is_set():
                return
            self.udp_questions += 1
            reply = DNSRecord.parse(data).reply()
            reply.header.tc = 1
            self.udp.sendto(reply.pack(), peer)

    def _tcp(self) -> None:
        conn, _ = self.tcp.accept()
        with conn:
            if self.closing.is_set():
                return
            length = struct.unpack("!H", conn.recv(2))[0]
            data = b""
            while len(data) < length:
                data += conn.recv(length - len(data))
            self.asked_over_tcp.set()
            self.closing.wait()

    def close(self) -> None:
        self.closing.set()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as waker:
            waker.sendto(b"", _SILENT_TCP)
        with contextlib.suppress(OSError):
            socket.create_connection(_SILENT_TCP, timeout=SAFETY_NET).close()
        for thread in self.threads:
            thread.join(SAFETY_NET)
        self.udp.close()
        self.tcp.close()


def test_a_cancel_ends_the_tcp_exchange_after_a_truncated_answer(lab):
    server = _TruncatingSilentDns()
    try:
        ending = Cancellation()
        resolver = DnsResolver((_SILENT_TCP[0],), _SILENT_TCP[1])
        lookup = _Lookup(resolver, "tc.lab.example", ending)
        lookup.start()
        assert server.asked_over_tcp.wait(SAFETY_NET), "no question over TCP"
        ending.cancel(_ENDED)
        outcome = lookup.ended()
    finally:
        server.close()
    assert isinstance(outcome, Interrupted), outcome
    assert outcome.failure == _ENDED
    assert server.udp_questions == 2  # A and AAAA, once: no exchange after the cancel
