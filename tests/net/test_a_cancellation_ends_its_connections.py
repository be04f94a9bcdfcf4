"""A ``Cancellation`` ends the connections of a guarded transport, in the lab (decision 0066).

A transport given a ``Cancellation`` (``net.transport``) opens no hop once cancelled (no DNS
question, no connect), and a ``cancel`` from another thread ends what is under way at once:
a connect to an address that never answers, a handshake the server never answers, a read
the server is silent on, a write the server does not read.  The fetch fails with the
cancellation's own sub-code (``failure_of``), on record too.  A connection its owner closes
leaves no descriptor behind, and an error that is not the cancellation's doing keeps its own
name.

What happened is read from the lab (its DNS log, its accept and request logs, the socket
audit hook) and from the kernel (``/proc/net/tcp``, ``/proc/self/fd``); the cause of each
ended wait is the shutdown, never its own timeout.  Every wait is a condition with a far
safety net (``SAFETY_NET``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from django_webfetch.net import FetchError, FetchTimeout
from django_webfetch.net.failures import FAILURES, Interrupted
from django_webfetch.net.guarded import GuardedTransport
from django_webfetch.net.transport import Cancellation
from tests.settle import SAFETY_NET

pytestmark = pytest.mark.lab

ENDED = "plugin_call_ended"
V4, V6 = "11.0.0.10", "2606:4700:10::10"
#: A lab address with no lab server on the ports below: the tests' own listeners bind there.
RAW = "11.0.0.20"
#: TCP states of ``/proc/net/tcp`` (include/net/tcp_states.h).
ESTABLISHED, SYN_SENT = "01", "02"
#: The fetches' own bounds (their budget, each wait's timeout): past the safety net, so a
#: wait that only a cancel can end fails the test (``_Fetch.failed``) if the cancel did not.
BEYOND = 2 * SAFETY_NET


def _hex(address: str) -> str:
    """``address`` as ``/proc/net/tcp{,6}`` spells it (32-bit words, host byte order)."""
    packed = socket.inet_pton(socket.AF_INET6 if ":" in address else socket.AF_INET, address)
    return "".join(packed[i : i + 4][::-1].hex() for i in range(0, len(packed), 4)).upper()


def _sockets_to(address: str, port: int) -> list[tuple[int, str, int]]:
    """(local port, state, inode) of every TCP socket of this namespace to address:port."""
    remote = f"{_hex(address)}:{port:04X}"
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in rows.read().splitlines()[1:]:
                fields = row.split()
                if fields[2] == remote:
                    found.append((int(fields[1].rsplit(":", 1)[1], 16), fields[3], int(fields[9])))
    return found


def _descriptors_to(address: str, port: int) -> int:
    """How many of this process's descriptors (``/proc/self/fd``) are on a connection to
    address:port: the owner's socket and, while a cancellation holds it, its duplicate."""
    inodes = {f"socket:[{inode}]" for _, _, inode in _sockets_to(address, port) if inode}
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # a descriptor closed meanwhile
            count += os.readlink(f"/proc/self/fd/{fd}") in inodes
    return count


def _wait(predicate: Any) -> Any:
    found = threading.Event()
    value: list[Any] = []

    def poll() -> None:
        while not found.is_set():
            if result := predicate():
                value.append(result)
                found.set()
            else:
                found.wait(0.01)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    settled = found.wait(SAFETY_NET)
    found.set()
    assert settled, "the condition never held"
    return value[0]


class _Fetch(threading.Thread):
    """One request through a guarded transport under ``cancellation``, in its own thread
    (the cancel comes from the test's)."""

    def __init__(
        self,
        lab: Any,
        url: str,
        cancellation: Cancellation,
        *,
        policy: Any = None,
        events: list[Any] | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(daemon=True)
        self.events: list[Any] = [] if events is None else events
        self.error: BaseException | None = None
        self.response: httpx.Response | None = None
        self._url = url
        self._kw = kw
        self._transport = GuardedTransport(
            policy or lab.policy(),
            observer=self.events.append,
            cancellation=cancellation,
            timeout=BEYOND,
        )

    def run(self) -> None:
        try:
            with httpx.Client(transport=self._transport, timeout=BEYOND) as client:
                self.response = client.request(self._kw.pop("method", "GET"), self._url, **self._kw)
        except BaseException as exc:
            self.error = exc

    def failed(self) -> FetchError:
        """The fetch's error, once the thread ended (a far safety net)."""
        self.join(SAFETY_NET)
        assert not self.is_alive(), "the fetch did not end"
        assert isinstance(self.error, FetchError), self.error
        assert self.events[-1].decision == "failed"
        assert self.events[-1].failure == self.error.failure
        return self.error


def _ended_by_the_cancel(error: FetchError) -> None:
    """The fetch failed with the cancellation's sub-code, ``Interrupted`` under it."""
    assert (error.failure, str(error)) == (ENDED, FAILURES[ENDED])
    assert isinstance(error.__cause__, Interrupted), error.__cause__


@contextlib.contextmanager
def _listener(port: int, *, backlog: int = 8) -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((RAW, port))
    server.listen(backlog)
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def _never_answers(port: int) -> Iterator[list[int]]:
    """A listener whose accept queue is full: the kernel drops further SYNs, so a connect
    to it waits in ``SYN_SENT`` (an address that never answers).  Yields the fillers' local
    ports."""
    with _listener(port, backlog=0), contextlib.ExitStack() as stack:
        ports = []
        for _ in range(3):
            filler = stack.enter_context(socket.socket())
            filler.setblocking(False)
            filler.connect_ex((RAW, port))
            ports.append(filler.getsockname()[1])
        yield ports


@contextlib.contextmanager
def _silent_reader(port: int) -> Iterator[tuple[threading.Event, list[socket.socket]]]:
    """A listener that reads one byte of each connection (the event is set then) and
    nothing after: neither a TLS handshake nor a request body gets an answer."""
    read = threading.Event()
    accepted: list[socket.socket] = []
    with _listener(port) as server:

        def serve() -> None:
            with contextlib.suppress(OSError):
                conn, _ = server.accept()
                accepted.append(conn)
                if conn.recv(1):
                    read.set()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield read, accepted
        finally:
            server.shutdown(socket.SHUT_RDWR)
            thread.join(SAFETY_NET)
            for conn in accepted:
                conn.close()


def _tcp(lab: Any) -> list[tuple[str, int]]:
    return [
        (c.address, c.port)
        for c in lab.connects
        if c.event == "connect" and c.proto == "tcp" and c.port != 53
    ]


class _CancelOn(list[Any]):
    """An audit log that cancels the work when a record of ``decision`` arrives."""

    def __init__(self, decision: str, cancellation: Cancellation) -> None:
        super().__init__()
        self._decision = decision
        self._cancellation = cancellation

    def append(self, event: Any) -> None:
        super().append(event)
        if event.decision == self._decision:
            self._cancellation.cancel(ENDED)


# -- before a connection --------------------------------------------------------------------


@pytest.mark.parametrize("failure", [ENDED, "cancelled"])
def test_a_cancelled_transport_asks_no_dns_question_and_connects_nowhere(lab, failure):
    lab.dns.set("before.lab.example", a=[V4])
    cancellation = Cancellation()
    cancellation.cancel(failure)
    fetch = _Fetch(lab, "http://before.lab.example/plain", cancellation)
    fetch.start()
    error = fetch.failed()
    # The cancellation's own sub-code, whatever it is (``failure_of``), and our sentence.
    assert (error.failure, str(error)) == (failure, FAILURES[failure])
    assert [(e.decision, e.failure) for e in fetch.events] == [("failed", failure)]
    assert lab.dns.queries == []
    assert _tcp(lab) == [] and lab.accepts() == []


def test_a_second_cancel_keeps_the_first_failure(lab):
    lab.dns.set("twice.lab.example", a=[V4])
    cancellation = Cancellation()
    cancellation.cancel(ENDED)
    cancellation.cancel("cancelled")
    assert cancellation.failure == ENDED
    fetch = _Fetch(lab, "http://twice.lab.example/plain", cancellation)
    fetch.start()
    assert fetch.failed().failure == ENDED
    assert lab.dns.queries == []


def test_a_cancel_after_the_dns_answer_opens_no_connection(lab):
    """Cancelled once the guard's DNS question was answered (the hop's ``allowed`` record):
    no connect follows it, and the socket made for it is gone."""
    lab.dns.set("answered.lab.example", a=[V4])
    cancellation = Cancellation()
    events = _CancelOn("allowed", cancellation)
    fetch = _Fetch(lab, "http://answered.lab.example/plain", cancellation, events=events)
    fetch.start()
    error = fetch.failed()
    assert error.failure == ENDED
    assert [(e.decision, e.failure) for e in fetch.events] == [("allowed", ""), ("failed", ENDED)]
    assert lab.dns.lookups("answered.lab.example", "A") == 1
    assert _tcp(lab) == [] and lab.accepts() == []
    assert _descriptors_to(V4, 80) == 0


# -- during a connection --------------------------------------------------------------------


def test_a_cancel_ends_a_connect_to_an_address_that_never_answers(lab):
    port = 7101
    policy = lab.policy(allowlist=(f"{RAW}:{port}",))
    with _never_answers(port) as fillers:
        cancellation = Cancellation()
        fetch = _Fetch(lab, f"http://{RAW}:{port}/", cancellation, policy=policy)
        fetch.start()
        # The fetch's own SYN is unanswered (not a filler's): its connect waits.
        ((ours, _, _),) = _wait(
            lambda: [s for s in _sockets_to(RAW, port) if s[1] == SYN_SENT and s[0] not in fillers]
        )
        cancellation.cancel(ENDED)
        # The shutdown aborted the connect in the kernel before ``cancel`` returned (its
        # own timeout is seconds away).
        assert [s for s in _sockets_to(RAW, port) if s[0] == ours] == []
        _ended_by_the_cancel(fetch.failed())
        assert _descriptors_to(RAW, port) == len(fillers)


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("address", [V4, V6])
def test_a_cancel_ends_a_read_the_server_is_silent_on(lab, scheme, address):
    """The lab's ``/late`` stays silent for 10 s: the cancel ends the read at once, the
    server sees the client close before it answered, and no descriptor is left."""
    port = 443 if scheme == "https" else 80
    cancellation = Cancellation()
    fetch = _Fetch(lab, lab.url(address, "/late?seconds=10", scheme), cancellation)
    fetch.start()
    (request,) = _wait(lambda: lab.requests)
    # The owner's socket and the cancellation's duplicate of it.
    assert _descriptors_to(address, port) == 2
    cancellation.cancel(ENDED)
    error = fetch.failed()
    assert error.failure == ENDED
    assert isinstance(error.__cause__, Interrupted)
    assert request.done.wait(SAFETY_NET)
    assert request.aborted and request.bytes_sent == 0, request
    assert _descriptors_to(address, port) == 0


def test_a_cancel_ends_a_write_the_server_does_not_read(lab):
    port = 7102
    policy = lab.policy(allowlist=(f"{RAW}:{port}",))
    with _silent_reader(port) as (read, _):
        cancellation = Cancellation()
        body = bytes(64 << 20)  # far more than the socket buffers hold: the send waits
        fetch = _Fetch(
            lab, f"http://{RAW}:{port}/", cancellation, policy=policy, method="POST", content=body
        )
        fetch.start()
        assert read.wait(SAFETY_NET)  # the request is being sent
        ((ours, state, _),) = _sockets_to(RAW, port)
        assert state == ESTABLISHED
        cancellation.cancel(ENDED)
        # Shut before ``cancel`` returned: the FIN is queued behind the unsent bytes.
        ((_, state, _),) = [s for s in _sockets_to(RAW, port) if s[0] == ours]
        assert state != ESTABLISHED
        _ended_by_the_cancel(fetch.failed())
        assert _descriptors_to(RAW, port) == 0


def test_a_cancel_ends_a_tls_handshake_the_server_never_answers(lab):
    port = 7103
    policy = lab.policy(allowlist=(f"{RAW}:{port}",))
    with _silent_reader(port) as (read, accepted):
        cancellation = Cancellation()
        fetch = _Fetch(lab, f"https://{RAW}:{port}/", cancellation, policy=policy)
        fetch.start()
        assert read.wait(SAFETY_NET)  # the ClientHello arrived: the handshake waits
        cancellation.cancel(ENDED)
        _ended_by_the_cancel(fetch.failed())
        # The server's side reads the rest of the ClientHello, then the client's FIN.
        (conn,) = accepted
        conn.settimeout(SAFETY_NET)
        while conn.recv(1 << 16):
            pass
        assert _descriptors_to(RAW, port) == 0


# -- a connection its owner closes, and errors that are not the cancellation's ------------


@pytest.mark.parametrize("address", [V4, V6])
def test_a_connection_closed_by_its_owner_leaves_no_descriptor(lab, address):
    cancellation = Cancellation()
    transport = GuardedTransport(lab.policy(), cancellation=cancellation)
    with httpx.Client(transport=transport, timeout=SAFETY_NET) as client:
        with client.stream("GET", lab.url(address, "/page")) as response:
            assert response.status_code == 200
            # Held while open: the owner's socket and the cancellation's duplicate.
            assert _descriptors_to(address, 80) == 2
            body = response.read()
        assert len(body) > 40_000
        assert _descriptors_to(address, 80) == 0
        # A cancel after the work ended ends nothing, and the next request is refused.
        cancellation.cancel(ENDED)
        with pytest.raises(FetchError) as info:
            client.get(lab.url(address, "/page"))
    assert info.value.failure == ENDED
    assert len(lab.requests) == 1


def test_a_refused_port_under_a_cancellation_is_connect_refused(lab):
    port = 7104  # nothing listens
    cancellation = Cancellation()
    policy = lab.policy(allowlist=(f"{RAW}:{port}",))
    fetch = _Fetch(lab, f"http://{RAW}:{port}/", cancellation, policy=policy)
    fetch.start()
    error = fetch.failed()
    assert error.failure == "connect_refused"
    assert not isinstance(error, FetchTimeout)
    assert cancellation.failure == ""
    assert _descriptors_to(RAW, port) == 0


def test_a_connect_timeout_under_a_cancellation_is_connect_timeout(lab):
    port = 7105
    policy = lab.policy(allowlist=(f"{RAW}:{port}",), connect_timeout=0.5)
    with _never_answers(port) as fillers:
        cancellation = Cancellation()
        fetch = _Fetch(lab, f"http://{RAW}:{port}/", cancellation, policy=policy)
        fetch.start()
        error = fetch.failed()
        assert error.failure == "connect_timeout"
        assert cancellation.failure == ""
        assert _descriptors_to(RAW, port) == len(fillers)
