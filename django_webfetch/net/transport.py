"""An httpx transport that connects only to a ``ResolvedDestination``'s addresses.

httpx keeps the URL's host for SNI, certificate verification and the ``Host`` header; the
network backend below ignores name resolution entirely and opens TCP connections only to
the addresses the guard checked.  One transport serves one destination (one hop): it is
never reused for another host, so a pooled connection can never carry a request to a
destination that was not checked.  Every socket operation's timeout is clamped to the
fetch's overall deadline, so a server trickling one byte per second (slow-loris) cannot
stretch the fetch past its budget.
"""

from __future__ import annotations

import functools
import ssl
import time
import typing
from collections.abc import Callable, Iterable, Iterator

import httpcore
import httpx

from .foreign import foreign_errors
from .guard import IPAddress, ResolvedDestination
from .urlparse import DEFAULT_PORTS, parse_url

__all__ = ["DeadlineStream", "PinnedBackend", "PinnedTransport", "ResponseStream", "ssl_context"]


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


class DeadlineStream(httpcore.NetworkStream):
    """Clamp every read/write timeout to the remaining budget."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def _timeout(self, timeout: float | None, exc: type[Exception]) -> float:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise exc("fetch budget exhausted")
        return remaining if timeout is None else min(timeout, remaining)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._timeout(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._timeout(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, self._timeout(timeout, httpcore.ConnectTimeout)
        )
        return DeadlineStream(inner, self._deadline)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
    """Connects to one host:port only, and only to the addresses given for it."""

    def __init__(
        self,
        destination: ResolvedDestination,
        *,
        connect_timeout: float,
        deadline: float,
        on_connect: Callable[[str], None] | None,
        target: tuple[str, int, tuple[IPAddress, ...]] | None = None,
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
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        wanted = self._host.strip("[]")
        if host.strip("[]").lower() != wanted or port != self._port:
            # Defence in depth: the transport was built for one destination only.
            raise httpcore.ConnectError("connection target differs from the checked one")
        last: Exception | None = None
        for address in self._addresses:
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise httpcore.ConnectTimeout("fetch budget exhausted")
            budget = min(self._connect_timeout, remaining)
            try:
                # The address is an IP literal: no name lookup happens here.
                stream = self._inner.connect_tcp(
                    str(address), port, timeout=budget, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
                continue
            if self._on_connect is not None:
                self._on_connect(str(address))
            return DeadlineStream(stream, self._deadline)
        assert last is not None
        raise last

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are never used")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


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


class PinnedTransport(httpx.BaseTransport):
    """A one-destination transport: HTTP/1.1, no retries, no proxies, no environment."""

    def __init__(
        self,
        destination: ResolvedDestination,
        *,
        ca_file: str | None = None,
        connect_timeout: float = 5.0,
        deadline: float,
        on_connect: Callable[[str], None] | None = None,
    ) -> None:
        self.destination = destination
        backend = PinnedBackend(
            destination,
            connect_timeout=connect_timeout,
            deadline=deadline,
            on_connect=on_connect,
        )
        self._pool: httpcore.ConnectionPool
        if destination.proxy is not None:
            # Only reachable when the policy has allow_via_proxy AND a non-empty allowlist:
            # the proxy resolves the destination itself, so the allowlist is what bounds
            # egress.  The proxy's own name was resolved by the guard (dnspython), and the
            # connection is pinned to those addresses.
            proxy_url = parse_url(destination.proxy)
            proxy_backend = PinnedBackend(
                destination,
                connect_timeout=connect_timeout,
                deadline=deadline,
                on_connect=on_connect,
                target=(proxy_url.host.name, proxy_url.port, destination.proxy_addresses),
            )
            self._pool = httpcore.HTTPProxy(
                proxy_url=proxy_url.geturl(),
                ssl_context=ssl_context(ca_file),
                max_connections=1,
                max_keepalive_connections=0,
                retries=0,
                network_backend=proxy_backend,
            )
            return
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context(ca_file),
            max_connections=1,
            max_keepalive_connections=0,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` (to the checked destination only); errors are the project's."""
        with foreign_errors():
            return self._handle(request)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        if (
            request.url.scheme != self.destination.scheme
            # raw_host: the A-label as sent (``.host`` would IDNA-decode "xn--" names).
            or request.url.raw_host.decode("ascii").lower() != self.destination.host.strip("[]")
            or (request.url.port or DEFAULT_PORTS[request.url.scheme]) != self.destination.port
        ):
            raise httpx.ConnectError("request does not match the checked destination")
        assert isinstance(request.stream, httpx.SyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        response = self._pool.handle_request(core_request)
        assert isinstance(response.stream, Iterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=ResponseStream(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()
