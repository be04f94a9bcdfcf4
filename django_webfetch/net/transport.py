"""An httpx transport that connects only to a ``ResolvedDestination``'s addresses.

httpx keeps the URL's host for SNI, certificate verification and the ``Host`` header; the
network backend below ignores name resolution entirely and opens TCP connections only to
the addresses the guard checked.  One transport serves one destination (one hop): it is
never reused for another host, so a pooled connection can never carry a request to a
destination that was not checked.  Every socket operation's timeout is clamped to the
fetch's overall deadline, so a server trickling one byte per second (slow-loris) cannot
stretch the fetch past its budget.

``AsyncPinnedTransport`` is the same transport on the event loop (httpcore's async pool on
anyio): the same pin, destination check and clamp (shared code, not a copy), and no thread.

A ``Cancellation`` given to a sync transport ends its connections from another thread at
once (a connect under way, a blocked read or write, the TLS handshake): its owner's work
ended (a plugin call past its bound, its process gone), and no request of that work may
outlive it.  A connection it ended fails with its ``failure`` sub-code.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import ssl
import threading
import time
import typing
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator

import anyio
import httpcore
import httpx
from httpcore._backends.sync import SyncStream

from .failures import Interrupted
from .foreign import foreign_errors
from .guard import IPAddress, ResolvedDestination
from .urlparse import DEFAULT_PORTS, parse_url

__all__ = [
    "AsyncDeadlineStream",
    "AsyncPinnedBackend",
    "AsyncPinnedTransport",
    "AsyncResponseStream",
    "Cancellation",
    "DeadlineStream",
    "PinnedBackend",
    "PinnedTransport",
    "ResponseStream",
    "ssl_context",
]


@functools.lru_cache(maxsize=8)
def ssl_context(ca_file: str | None) -> ssl.SSLContext:
    """One shared context per trust store: building one costs tens of milliseconds."""
    if ca_file is None:
        import certifi

        context = ssl.create_default_context(cafile=certifi.where())
    else:
        context = ssl.create_default_context(cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _clamp(deadline: float, timeout: float | None, exc: type[Exception]) -> float:
    """``timeout`` cut to what is left of the budget; none left raises ``exc``."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise exc("fetch budget exhausted")
    return remaining if timeout is None else min(timeout, remaining)


class _Held:
    """One connection a ``Cancellation`` holds: a duplicate of its socket's descriptor,
    so that a shutdown reaches the connection whatever its owner did with its own
    descriptor (TLS detaches it) and never a descriptor the process reused."""

    def __init__(self, cancellation: Cancellation, sock: socket.socket) -> None:
        self._cancellation = cancellation
        self.sock = sock.dup()

    def release(self) -> None:
        """The connection closed by its owner: the duplicate goes too."""
        self._cancellation.release(self)


class Cancellation:
    """Ends every connection opened under it, from any thread, and refuses any opened
    after (``cancel``).  ``shutdown`` on a socket wakes a ``connect``, ``recv`` or
    ``send`` blocked on it in another thread, and sends the peer its FIN: the connection
    ends at once, not at its deadline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[_Held] = []
        #: Why it was cancelled (a ``net.failures`` sub-code; "" until then).
        self.failure = ""

    def cancel(self, failure: str) -> None:
        """End every connection held (once; a later call changes nothing)."""
        with self._lock:
            if self.failure:
                return
            self.failure = failure
            held, self._held = self._held, []
            for one in held:  # under the lock: no owner's ``release`` closes it meanwhile
                with contextlib.suppress(OSError):
                    one.sock.shutdown(socket.SHUT_RDWR)
                one.sock.close()

    def check(self, exc: BaseException | None = None) -> None:
        """Raise ``Interrupted`` once cancelled: a connection's error (``exc``) or end of
        stream after ``cancel`` is this cancellation's doing, whatever the socket said."""
        if self.failure:
            raise Interrupted(self.failure) from exc

    def hold(self, sock: socket.socket) -> _Held:
        """Hold ``sock``'s connection until ``release``; once cancelled: ``Interrupted``."""
        with self._lock:
            if not self.failure:
                held = _Held(self, sock)
                self._held.append(held)
                return held
        raise Interrupted(self.failure)

    def release(self, held: _Held) -> None:
        with self._lock:
            if held in self._held:  # not when ``cancel`` closed it already
                self._held.remove(held)
                held.sock.close()


class DeadlineStream(httpcore.NetworkStream):
    """Clamp every read/write timeout to the remaining budget; under a ``Cancellation``,
    a read or write it ended fails ``Interrupted``."""

    def __init__(
        self,
        inner: httpcore.NetworkStream,
        deadline: float,
        held: _Held | None = None,
        cancellation: Cancellation | None = None,
    ) -> None:
        self._inner = inner
        self._deadline = deadline
        self._held = held
        self._cancellation = cancellation

    def _check(self, exc: BaseException | None = None) -> None:
        """``Interrupted`` when the cancellation ended the connection (``exc``: its error)."""
        if self._cancellation is not None:
            self._cancellation.check(exc)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            data = self._inner.read(
                max_bytes, _clamp(self._deadline, timeout, httpcore.ReadTimeout)
            )
        except Exception as exc:
            self._check(exc)
            raise
        if not data:  # the end of the stream: the server's, or the cancellation's
            self._check()
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._inner.write(buffer, _clamp(self._deadline, timeout, httpcore.WriteTimeout))
        except Exception as exc:
            self._check(exc)
            raise

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            if self._held is not None:
                self._held.release()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        try:
            inner = self._inner.start_tls(
                ssl_context,
                server_hostname,
                _clamp(self._deadline, timeout, httpcore.ConnectTimeout),
            )
        except Exception as exc:
            self._check(exc)
            raise
        return DeadlineStream(inner, self._deadline, self._held, self._cancellation)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class AsyncDeadlineStream(httpcore.AsyncNetworkStream):
    """``DeadlineStream`` for the event loop: the same clamp on every read/write."""

    def __init__(self, inner: httpcore.AsyncNetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        clamped = _clamp(self._deadline, timeout, httpcore.ReadTimeout)
        return await self._inner.read(max_bytes, clamped)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, _clamp(self._deadline, timeout, httpcore.WriteTimeout))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            inner = await self._inner.start_tls(
                ssl_context,
                server_hostname,
                _clamp(self._deadline, timeout, httpcore.ConnectTimeout),
            )
        except BaseException:
            # httpcore closes the socket on an error of the handshake but not when the task
            # is cancelled in it (a BaseException): the connection never reached the pool,
            # so nothing else would close it.
            with anyio.CancelScope(shield=True):
                await self._inner.aclose()
            raise
        return AsyncDeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


_S = typing.TypeVar("_S")


class _Pin:
    """Where a pinned backend may connect: one host:port, only the addresses given."""

    def __init__(
        self,
        destination: ResolvedDestination,
        *,
        connect_timeout: float,
        deadline: float,
        on_connect: Callable[[str], None] | None,
        target: tuple[str, int, tuple[IPAddress, ...]] | None = None,
        cancellation: Cancellation | None = None,
    ) -> None:
        # ``target`` (host, port, addresses) overrides the destination: the operator's
        # proxy, resolved by the guard through dnspython like every other name.
        self._host, self._port, self._addresses = target or (
            destination.host,
            destination.port,
            destination.addresses,
        )
        self._connect_timeout = connect_timeout
        self._deadline = deadline
        self._on_connect = on_connect
        self._cancellation = cancellation

    def attempts(self, host: str, port: int) -> Iterator[tuple[str, float]]:
        """Each checked address with its connect budget, in order."""
        wanted = self._host.strip("[]")
        if host.strip("[]").lower() != wanted or port != self._port:
            # Defence in depth: the transport was built for one destination only.
            raise httpcore.ConnectError("connection target differs from the checked one")
        for address in self._addresses:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise httpcore.ConnectTimeout("fetch budget exhausted")
            # The address is an IP literal: no name lookup happens on connect.
            yield str(address), min(self._connect_timeout, remaining)

    def connected(self, address: str, stream: _S) -> _S:
        """``stream``, now open to ``address``: reported to ``on_connect``."""
        if self._on_connect is not None:
            self._on_connect(address)
        return stream


#: A failed attempt on one address: try the next one.
_ATTEMPT_FAILED = (httpcore.ConnectError, httpcore.ConnectTimeout)


class PinnedBackend(_Pin, httpcore.NetworkBackend):
    """Connects to one host:port only, and only to the addresses given for it."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        last: Exception | None = None
        for address, budget in self.attempts(host, port):
            try:
                if self._cancellation is not None:
                    # The pool is built here without ``socket_options``: none to set.
                    return self._cancellable(address, port, budget)
                stream = _SYNC.connect_tcp(
                    address, port, timeout=budget, socket_options=socket_options
                )
                return DeadlineStream(self.connected(address, stream), self._deadline)
            except _ATTEMPT_FAILED as exc:
                last = exc
        assert last is not None
        raise last

    def _cancellable(self, address: str, port: int, budget: float) -> httpcore.NetworkStream:
        """``_SYNC.connect_tcp``'s connection, held by the cancellation from before its
        ``connect``: a cancel ends a connect under way too, and a cancelled one refuses
        the hop before any (``hold``)."""
        assert self._cancellation is not None
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            held = self._cancellation.hold(sock)
        except BaseException:
            sock.close()
            raise
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(budget)
            try:
                sock.connect((address, port))
            except OSError as exc:
                self._cancellation.check(exc)  # its shutdown ended the connect
                kind = httpcore.ConnectTimeout if isinstance(exc, TimeoutError) else None
                raise (kind or httpcore.ConnectError)(str(exc)) from exc
            self._cancellation.check()
        except BaseException:
            sock.close()
            held.release()
            raise
        # httpcore's own stream on the connected socket, as ``_SYNC.connect_tcp`` makes.
        stream = SyncStream(sock)
        return DeadlineStream(
            self.connected(address, stream), self._deadline, held, self._cancellation
        )

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are never used")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class AsyncPinnedBackend(_Pin, httpcore.AsyncNetworkBackend):
    """``PinnedBackend`` on the event loop (anyio: an IP literal needs no ``getaddrinfo``,
    so no worker thread is ever used)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        last: Exception | None = None
        for address, budget in self.attempts(host, port):
            try:
                return AsyncDeadlineStream(
                    self.connected(
                        address,
                        await _ASYNC.connect_tcp(
                            address, port, timeout=budget, socket_options=socket_options
                        ),
                    ),
                    self._deadline,
                )
            except _ATTEMPT_FAILED as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are never used")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


_SYNC = httpcore.SyncBackend()
_ASYNC = httpcore.AnyIOBackend()


class ResponseStream(httpx.SyncByteStream):
    def __init__(self, inner: Iterable[bytes]) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        with foreign_errors():
            yield from self._inner

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


class AsyncResponseStream(httpx.AsyncByteStream):
    def __init__(self, inner: AsyncIterable[bytes]) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with foreign_errors():
            async for chunk in self._inner:
                yield chunk

    async def aclose(self) -> None:
        aclose = getattr(self._inner, "aclose", None)
        if aclose is not None:
            await aclose()


class _PinnedPool:
    """The one-destination pool of a pinned transport, sync or async (``_kinds``):
    HTTP/1.1, one connection, no keep-alive, no retries, no proxies, no environment."""

    _kinds: typing.ClassVar[tuple[type[typing.Any], type[typing.Any], type[typing.Any]]]

    def __init__(
        self,
        destination: ResolvedDestination,
        *,
        ca_file: str | None = None,
        connect_timeout: float = 5.0,
        deadline: float,
        on_connect: Callable[[str], None] | None = None,
        cancellation: Cancellation | None = None,
    ) -> None:
        backend_kind, pool_kind, proxy_kind = self._kinds
        self.destination = destination
        if destination.proxy is not None:
            # Only reachable when the policy has allow_via_proxy AND a non-empty allowlist:
            # the proxy resolves the destination itself, so the allowlist is what bounds
            # egress.  The proxy's own name was resolved by the guard (dnspython), and the
            # connection is pinned to those addresses.
            proxy_url = parse_url(destination.proxy)
            proxy_backend = backend_kind(
                destination,
                connect_timeout=connect_timeout,
                deadline=deadline,
                on_connect=on_connect,
                cancellation=cancellation,
                target=(proxy_url.host.name, proxy_url.port, destination.proxy_addresses),
            )
            self._pool = proxy_kind(
                proxy_url=proxy_url.geturl(),
                ssl_context=ssl_context(ca_file),
                max_connections=1,
                max_keepalive_connections=0,
                retries=0,
                network_backend=proxy_backend,
            )
            return
        backend = backend_kind(
            destination,
            connect_timeout=connect_timeout,
            deadline=deadline,
            on_connect=on_connect,
            cancellation=cancellation,
        )
        self._pool = pool_kind(
            ssl_context=ssl_context(ca_file),
            max_connections=1,
            max_keepalive_connections=0,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )

    def _core_request(self, request: httpx.Request, content: typing.Any) -> httpcore.Request:
        """``request`` for httpcore, refused unless it names the checked destination."""
        if (
            request.url.scheme != self.destination.scheme
            # raw_host: the A-label as sent (``.host`` would IDNA-decode "xn--" names).
            or request.url.raw_host.decode("ascii").lower() != self.destination.host.strip("[]")
            or (request.url.port or DEFAULT_PORTS[request.url.scheme]) != self.destination.port
        ):
            raise httpx.ConnectError("request does not match the checked destination")
        return httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=content,
            extensions=request.extensions,
        )


class PinnedTransport(_PinnedPool, httpx.BaseTransport):
    """A one-destination transport: HTTP/1.1, no retries, no proxies, no environment."""

    _kinds = (PinnedBackend, httpcore.ConnectionPool, httpcore.HTTPProxy)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` (to the checked destination only); errors are the project's."""
        with foreign_errors():
            return self._handle(request)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        response = self._pool.handle_request(self._core_request(request, request.stream))
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=ResponseStream(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


class AsyncPinnedTransport(_PinnedPool, httpx.AsyncBaseTransport):
    """``PinnedTransport`` on the event loop: the same checks, no worker thread."""

    _kinds = (AsyncPinnedBackend, httpcore.AsyncConnectionPool, httpcore.AsyncHTTPProxy)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` (to the checked destination only); errors are the project's."""
        with foreign_errors():
            assert isinstance(request.stream, httpx.AsyncByteStream)
            core = self._core_request(request, request.stream)
            response = await self._pool.handle_async_request(core)
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=AsyncResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
