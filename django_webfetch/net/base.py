"""The transport base: one guard → pin → record path for every way out of the app.

``net.fetch`` (the hop loop), the guarded httpx transports (plugins' clients, the LLM SDKs)
and the plugin client are all built on ``EgressTransport``.  A hop goes through three named
hooks, in this order, and nothing else reaches the network:

``check(url, policy)``
    the whole guard (``UrlGuard.check``) on the caller's URL string: scope, syntax, lists,
    DNS through dnspython, address classes.  A refusal is recorded and raised.
``connect(destination, policy)``
    a ``PinnedTransport`` (``net.transport``) for that one destination: TCP only to the
    checked addresses, the checked name for SNI and certificates.
``record(event, observer)``
    one ``GuardEvent`` per decision: ``allowed`` when the guard passed, then exactly one of
    ``fetched`` or ``failed`` when the hop ends.  A hop is never left open: ``PinnedHop``
    closes its record (``failed``) and its connection even when the caller forgets.

Every foreign exception raised on the way is renamed by the one table in ``net.foreign``.

``open_hop_async`` is the same path on an event loop: ``check_async`` runs the same guard
(one generator of rules, its DNS exchange awaited), ``connect_async`` the same pin on
httpcore's async pool, and the hop (``AsyncPinnedHop``) keeps the same record.  Only the
waiting differs; no rule is written twice.
A new transport (another client library, another plugin runtime) subclasses
``EgressTransport`` and calls ``open_hop``; it does not copy any step.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

import httpx

from .errors import EgressDenied, FetchError, InvalidURL, WebFetchError
from .foreign import foreign_errors, translate
from .guard import ResolvedDestination, UrlGuard
from .policy import EgressPolicy
from .rawurl import same_origin
from .transport import AsyncPinnedTransport, Cancellation, PinnedTransport
from .urlparse import parse_url

__all__ = [
    "AsyncPinnedHop",
    "EgressTransport",
    "GuardEvent",
    "HopRecord",
    "Observer",
    "PinnedHop",
    "refusal_event",
]


@dataclass(frozen=True)
class GuardEvent:
    """One audit record: a guard decision, a completed hop, or a failure."""

    hop: int
    url_host: str
    port: int
    decision: str  # "allowed" | "denied" | "fetched" | "failed"
    reason: str
    addresses: tuple[str, ...] = ()
    bytes: int = 0
    duration: float = 0.0
    status: int | None = None
    detail: str = ""
    #: What failed, in our words (a ``net.failures`` sub-code), for ``decision="failed"``.
    failure: str = ""


Observer = Callable[[GuardEvent], None]


def _ignore(event: GuardEvent) -> None:
    return None


def refusal_event(hop: int, url: str, exc: WebFetchError, duration: float) -> GuardEvent:
    """The audit record of a hop that never reached a server: refused or failed early."""
    host, port = _host_port(url)
    address = getattr(exc, "address", "")
    return GuardEvent(
        hop=hop,
        url_host=host,
        port=port,
        decision="denied" if isinstance(exc, EgressDenied) else "failed",
        reason=getattr(exc, "reason", exc.code),
        addresses=(address,) if address else (),
        duration=duration,
        detail=exc.detail,
        failure=exc.failure,
    )


def _host_port(url: str) -> tuple[str, int]:
    """Best-effort host/port for the audit log of a refused URL (never raises)."""
    try:
        parsed = parse_url(url)
    except EgressDenied:
        return "", 0
    return parsed.host.name, parsed.port


class EgressTransport:
    """The base of every egress path: ``check`` → ``connect`` → ``record`` (see above)."""

    def __init__(
        self,
        guard: UrlGuard | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        cancellation: Cancellation | None = None,
    ) -> None:
        self._guard = guard or UrlGuard()
        self._clock = clock
        #: Ends this transport's connections from another thread (``net.transport``): the
        #: work they were for ended.  A cancelled transport starts no hop either.
        self.cancellation = cancellation

    def clock(self) -> float:
        """The monotonic clock every duration of this transport's records is read from."""
        return self._clock()

    # -- the hooks -------------------------------------------------------------------------

    def check(
        self, url: str, policy: EgressPolicy, *, deadline: float, hop: int = 0
    ) -> ResolvedDestination:
        """The guard's verdict on ``url`` (the caller's string, as written)."""
        if self.cancellation is not None:
            self.cancellation.check()  # its work ended: not even a DNS question
        # A lookup under way when the work ends ends with it (``DnsResolver.resolve``).
        return self._guard.check(
            url, policy, deadline=deadline, hop=hop, cancellation=self.cancellation
        )

    async def check_async(
        self, url: str, policy: EgressPolicy, *, deadline: float, hop: int = 0
    ) -> ResolvedDestination:
        """``check`` on the running event loop (the same rules; no thread)."""
        return await self._guard.check_async(url, policy, deadline=deadline, hop=hop)

    def connect(
        self,
        destination: ResolvedDestination,
        policy: EgressPolicy,
        *,
        deadline: float,
        on_connect: Callable[[str], None],
    ) -> PinnedTransport:
        """The pinned connection to the checked destination only."""
        return _pinned(
            PinnedTransport, destination, policy, deadline, on_connect, self.cancellation
        )

    def connect_async(
        self,
        destination: ResolvedDestination,
        policy: EgressPolicy,
        *,
        deadline: float,
        on_connect: Callable[[str], None],
    ) -> AsyncPinnedTransport:
        """``connect`` for the event loop: the same pin, httpcore's async pool."""
        return _pinned(AsyncPinnedTransport, destination, policy, deadline, on_connect)

    def verify(self, destination: ResolvedDestination, sent: httpx.URL | None) -> None:
        """Refuse a request whose URL (as httpx built it) names another origin than the
        one the guard checked: a parser differential is never resolved in httpx's favour."""
        if sent is not None and not same_origin(
            sent, destination.scheme, destination.host, destination.port
        ):
            raise InvalidURL(detail="the request's URL names another origin than the checked one")

    def record(self, event: GuardEvent, observer: Observer | None) -> None:
        """Hand one audit record to ``observer``; an observer's error propagates (a hop is
        never made unaudited)."""
        (observer or _ignore)(event)

    def refuse(
        self, url: str, exc: WebFetchError, observer: Observer | None, *, hop: int = 0
    ) -> WebFetchError:
        """Record a refusal decided before the guard could run (a URL no client can even
        build a request for) and return ``exc`` to raise."""
        self.record(refusal_event(hop, url, exc, 0.0), observer)
        return exc

    # -- the one path ----------------------------------------------------------------------

    def open_hop(
        self,
        url: str,
        policy: EgressPolicy,
        *,
        deadline: float,
        observer: Observer | None,
        hop: int = 0,
        sent: httpx.URL | None = None,
    ) -> PinnedHop:
        """Guard ``url``, record the decision and return the hop, pinned and not yet sent.

        ``sent``: the URL httpx built from ``url`` (when a client sends it); it must name
        the checked origin (``verify``).
        """
        start = self._clock()
        with self._recorded(url, hop, start, observer):
            destination = self.check(url, policy, deadline=deadline, hop=hop)
            self.verify(destination, sent)
        return PinnedHop(self, destination, policy, deadline, hop, start, observer)

    async def open_hop_async(
        self,
        url: str,
        policy: EgressPolicy,
        *,
        deadline: float,
        observer: Observer | None,
        hop: int = 0,
        sent: httpx.URL | None = None,
    ) -> AsyncPinnedHop:
        """``open_hop`` on the running event loop: the same guard, record and pin."""
        start = self._clock()
        with self._recorded(url, hop, start, observer):
            destination = await self.check_async(url, policy, deadline=deadline, hop=hop)
            self.verify(destination, sent)
        return AsyncPinnedHop(self, destination, policy, deadline, hop, start, observer)

    @contextlib.contextmanager
    def _recorded(
        self, url: str, hop: int, start: float, observer: Observer | None
    ) -> Iterator[None]:
        """Foreign errors renamed; a refusal or failure on record before it propagates."""
        try:
            with foreign_errors():
                yield
        except WebFetchError as exc:
            # Refused, or the resolver / budget failed: on record before it propagates.
            self.record(refusal_event(hop, url, exc, self._clock() - start), observer)
            raise
        except asyncio.CancelledError:
            # An async request cancelled while its name resolved (an abandoned SDK call, a
            # timeout above it): the attempted hop is on record too, then the cancellation
            # goes on.
            cancelled = FetchError("the request was cancelled").failing("cancelled")
            self.record(refusal_event(hop, url, cancelled, self._clock() - start), observer)
            raise


_P = TypeVar("_P", PinnedTransport, AsyncPinnedTransport)


def _pinned(
    kind: type[_P],
    destination: ResolvedDestination,
    policy: EgressPolicy,
    deadline: float,
    on_connect: Callable[[str], None],
    cancellation: Cancellation | None = None,
) -> _P:
    return kind(
        destination,
        ca_file=policy.ca_file,
        connect_timeout=policy.connect_timeout,
        deadline=deadline,
        on_connect=on_connect,
        cancellation=cancellation,
    )


class HopRecord:
    """What a checked hop is, however it waits: its record (opened ``allowed``, closed
    exactly once ``fetched`` or ``failed``) and its pinned connection (``_connect``)."""

    connection: PinnedTransport | AsyncPinnedTransport

    def __init__(
        self,
        base: EgressTransport,
        destination: ResolvedDestination,
        policy: EgressPolicy,
        deadline: float,
        hop: int,
        start: float,
        observer: Observer | None,
    ) -> None:
        self.destination = destination
        self.hop = hop
        self.addresses = tuple(str(a) for a in destination.addresses)
        self.connected: list[str] = []
        self._base = base
        self._observer = observer
        self.start = start
        self._finished = False
        self._closed = False
        self._event("allowed", "allowed", self.addresses)
        self._connect(base, destination, policy, deadline)

    def _connect(
        self,
        base: EgressTransport,
        destination: ResolvedDestination,
        policy: EgressPolicy,
        deadline: float,
    ) -> None:
        raise NotImplementedError  # pragma: no cover - each kind of hop names its own

    @property
    def address(self) -> str | None:
        """The address the connection was made to (``None`` before it connected)."""
        return self.connected[-1] if self.connected else None

    @property
    def closed(self) -> bool:
        """Whether the record is closed and the connection released."""
        return self._closed

    def _addressed(self, request: httpx.Request) -> httpx.Request:
        # From the checked A-label: httpx would IDNA-decode the host, and a caller-set Host
        # would pick another virtual host behind the same address.
        request.headers["Host"] = self.destination.url.authority
        return request

    def fetched(self, *, status: int, size: int = 0, reason: str = "ok") -> None:
        """Close the record: the hop completed."""
        self._finish()
        self._event(
            "fetched",
            reason,
            (self.address,) if self.address else self.addresses,
            status=status,
            size=size,
        )

    def failed(self, exc: WebFetchError, *, status: int | None = None, size: int = 0) -> None:
        """Close the record: the hop failed with ``exc``."""
        self._finish()
        self._event(
            "failed",
            exc.code,
            (self.address,) if self.address and status is not None else self.addresses,
            status=status,
            size=size,
            detail=exc.detail,
            failure=exc.failure,
        )

    def _closing(self) -> bool:
        """Close the record if it is still open; whether the connection is still to be
        released (true once)."""
        if not self._finished:
            self.failed(FetchError(detail="the hop ended before its response was read"))
        if self._closed:
            return False
        self._closed = True
        return True

    def _failed_by(self, exc: BaseException | None) -> None:
        """An exception leaving the hop's block closes its record (renamed by the table)."""
        if exc is not None and not self._finished:
            mapped = translate(exc)
            self.failed(mapped if mapped is not None else FetchError(detail=type(exc).__name__))

    def _finish(self) -> None:
        if self._finished:
            raise RuntimeError("a hop's record is closed once")
        self._finished = True

    def _event(
        self,
        decision: str,
        reason: str,
        addresses: tuple[str, ...],
        *,
        status: int | None = None,
        size: int = 0,
        detail: str = "",
        failure: str = "",
    ) -> None:
        self._base.record(
            GuardEvent(
                hop=self.hop,
                url_host=self.destination.host,
                port=self.destination.port,
                decision=decision,
                reason=reason,
                addresses=addresses,
                bytes=size,
                duration=self._base.clock() - self.start,
                status=status,
                detail=detail,
                failure=failure,
            ),
            self._observer,
        )


class PinnedHop(HopRecord):
    """One checked hop: its record (opened ``allowed``) and its pinned connection.

    Use it as a context manager: leaving it closes the connection and, when neither
    ``fetched`` nor ``failed`` was recorded, records ``failed`` (an exception leaving the
    block is renamed by the foreign-error table and recorded with its code).
    """

    connection: PinnedTransport

    def _connect(
        self,
        base: EgressTransport,
        destination: ResolvedDestination,
        policy: EgressPolicy,
        deadline: float,
    ) -> None:
        self.connection = base.connect(
            destination, policy, deadline=deadline, on_connect=self.connected.append
        )

    def send(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` on the pinned connection, addressed to the checked name."""
        with foreign_errors():
            return self.connection.handle_request(self._addressed(request))

    def close(self) -> None:
        """Release the connection and close the record if it is still open."""
        if self._closing():
            self.connection.close()

    def __enter__(self) -> PinnedHop:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._failed_by(exc)
        finally:
            self.close()


class AsyncPinnedHop(HopRecord):
    """``PinnedHop`` on the event loop: the same record, an ``AsyncPinnedTransport``.

    Use it as an async context manager; ``aclose`` releases the connection.
    """

    connection: AsyncPinnedTransport

    def _connect(
        self,
        base: EgressTransport,
        destination: ResolvedDestination,
        policy: EgressPolicy,
        deadline: float,
    ) -> None:
        self.connection = base.connect_async(
            destination, policy, deadline=deadline, on_connect=self.connected.append
        )

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` on the pinned connection, addressed to the checked name."""
        with foreign_errors():
            return await self.connection.handle_async_request(self._addressed(request))

    async def aclose(self) -> None:
        """Release the connection and close the record if it is still open."""
        if self._closing():
            await self.connection.aclose()

    async def __aenter__(self) -> AsyncPinnedHop:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._failed_by(exc)
        finally:
            await self.aclose()
