"""One guarded httpx transport for every HTTP client the app hands out.

Plugins' host-owned clients and the assistant's LLM provider SDKs are built on
``GuardedTransport`` (sync) or ``AsyncGuardedTransport`` (async, for SDKs such as Pydantic
AI's providers that take an ``httpx.AsyncClient``; natively async: DNS, connect and every
read are awaited on the event loop, no worker thread).  For *every* request it:

1. asks ``policy`` for the policy (a callable is called per request, so a grant removed in
   the database applies at the next connection, with no restart);
2. runs the whole guard (``UrlGuard.check``: scope, syntax, lists, DNS through dnspython,
   address classes) on the request's URL;
3. connects only to the checked addresses (``PinnedTransport``), with the checked name for
   SNI, certificate verification and the ``Host`` header (a caller-set ``Host`` is replaced:
   it would otherwise pick another virtual host behind the same address);
4. never follows a redirect: a 3xx is returned as it is.  A client built on this transport
   must keep ``follow_redirects=False`` (``guarded_client`` does); even if it does not, each
   follow-up is a new request and goes through steps 1-3 again.

The response body is decoded here (``gzip``/``deflate`` only, as the fetcher) under
``max_response_bytes``, so a compression bomb cannot inflate past the cap in the client.
The whole request, body included, runs under one deadline: ``timeout`` (default the
policy's ``total_timeout``).  A ``cancellation`` (sync only: ``net.transport``) ends it
sooner, from another thread, when the work it is for ends.

Errors never leave as httpx or dnspython exceptions: a refusal raises the guard's
``EgressDenied`` subclass, DNS failures ``ResolutionError``, transport failures
``FetchError``/``FetchTimeout``.  SDKs that wrap transport exceptions (openai, anthropic)
keep ours as ``__cause__``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx

from .base import AsyncPinnedHop, EgressTransport, HopRecord, Observer, PinnedHop
from .body import ACCEPT_ENCODING, BoundedDecoder, content_coding
from .errors import EgressDenied, WebFetchError
from .foreign import foreign_errors
from .guard import UrlGuard
from .policy import EgressPolicy
from .rawurl import CHECKED_URL, RAW_URL, keep_built, mark_follow, on_redirect, syntax_verdict
from .transport import Cancellation

__all__ = [
    "AsyncGuardedClient",
    "AsyncGuardedTransport",
    "GuardedClient",
    "GuardedTransport",
    "guarded_async_client",
    "guarded_client",
]

PolicySource = EgressPolicy | Callable[[httpx.Request], EgressPolicy]

#: Hop-by-hop and framing headers that describe the encoded body we replace.
_STALE_AFTER_DECODING = (b"content-encoding", b"content-length")


def _target(sent: httpx.URL, checked: str, raw: object) -> httpx.URL:
    """What is sent: exactly the checked URL (normalised, A-label authority); when the
    client merged ``params`` into the caller's URL, the checked origin with httpx's path
    and query (the origin was verified equal)."""
    target = httpx.URL(checked)
    if isinstance(raw, str):
        own = httpx.URL(raw).raw_path
        if sent.raw_path != own and sent.raw_path.partition(b"?")[0] == own.partition(b"?")[0]:
            return target.copy_with(raw_path=sent.raw_path)
    return target


class _Guarded(EgressTransport):
    """What both guarded transports do around the hop (``net.base``), written once: the
    policy and the deadline of a request, the URL sent, the guarded response."""

    def __init__(
        self,
        policy: PolicySource,
        *,
        guard: UrlGuard | None = None,
        observer: Observer | None = None,
        max_response_bytes: int | None = None,
        timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        cancellation: Cancellation | None = None,
    ) -> None:
        super().__init__(guard, clock=clock, cancellation=cancellation)
        self._policy = policy
        self._observer = observer
        self._max_response_bytes = max_response_bytes
        if timeout is not None and not timeout > 0:
            raise ValueError("timeout must be positive")
        self._timeout = timeout

    @property
    def observer(self) -> Observer | None:
        """Where this transport's audit records go."""
        return self._observer

    def policy_for(self, request: httpx.Request) -> EgressPolicy:
        if isinstance(self._policy, EgressPolicy):
            return self._policy
        return self._policy(request)

    def _hop_args(self, request: httpx.Request) -> tuple[str, EgressPolicy, float]:
        """The URL to check, the policy and the deadline of ``request``."""
        policy = self.policy_for(request)
        start = self.clock()
        deadline = start + (self._timeout if self._timeout is not None else policy.total_timeout)
        raw = request.extensions.get(RAW_URL)
        # The caller's string when a client of ours kept it (``net.rawurl``), else the URL
        # as httpx holds it; either way httpx's URL must name the origin the guard checked.
        url = raw if isinstance(raw, str) else str(request.url)
        return url, policy, deadline

    @staticmethod
    def _address(request: httpx.Request, pinned: HopRecord) -> None:
        """Send exactly the checked URL, asking only for the codings we decode."""
        with foreign_errors():
            raw = request.extensions.get(RAW_URL)
            request.url = _target(request.url, pinned.destination.url.geturl(), raw)
            request.headers["Accept-Encoding"] = ACCEPT_ENCODING

    def _guarded(
        self,
        response: httpx.Response,
        pinned: HopRecord,
        stream: Callable[[httpx.Response, BoundedDecoder], httpx.SyncByteStream]
        | Callable[[httpx.Response, BoundedDecoder], httpx.AsyncByteStream],
    ) -> httpx.Response:
        """The response handed back: its body decoded under the cap by ``stream``."""
        with foreign_errors():
            coding = content_coding(response)
            # The raw bytes: httpx would re-encode str values as ASCII (a non-ASCII value
            # the server sent would raise ``UnicodeEncodeError`` here).
            headers = [
                (name, value)
                for name, value in response.headers.raw
                if coding == "identity" or name.lower() not in _STALE_AFTER_DECODING
            ]
            return httpx.Response(
                status_code=response.status_code,
                headers=headers,
                stream=stream(response, BoundedDecoder(coding, self._limit())),
                extensions={
                    **response.extensions,
                    CHECKED_URL: pinned.destination.url.geturl(),
                },
            )

    def _limit(self) -> int:
        return self._max_response_bytes if self._max_response_bytes is not None else 2**62


class GuardedTransport(_Guarded, httpx.BaseTransport):
    """Guard, pin and bound every request; see the module docstring."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url, policy, deadline = self._hop_args(request)
        pinned = self.open_hop(
            url, policy, deadline=deadline, observer=self._observer, sent=request.url
        )
        try:
            self._address(request, pinned)
            response = pinned.send(request)
            return self._guarded(response, pinned, lambda r, d: _GuardedStream(r, pinned, d))
        except BaseException:
            with pinned:  # records the failure, releases the connection
                raise


class AsyncGuardedTransport(_Guarded, httpx.AsyncBaseTransport):
    """The same guard for async clients, natively on the event loop.

    The guard's rules run as the sync transport's (one generator, ``net.steps``); DNS is
    awaited (``DnsResolver.resolve_async``), the connection is httpcore's async pool on the
    checked addresses only (``AsyncPinnedTransport``), and every read and write is clamped
    to the same deadline.  No worker thread: many requests stream at once on one loop.
    """

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url, policy, deadline = self._hop_args(request)
        pinned = await self.open_hop_async(
            url, policy, deadline=deadline, observer=self._observer, sent=request.url
        )
        try:
            self._address(request, pinned)
            response = await pinned.send(request)
            return self._guarded(response, pinned, lambda r, d: _AsyncGuardedStream(r, pinned, d))
        except BaseException:
            async with pinned:  # records the failure, releases the connection
                raise


class _Body:
    """The pinned response's body, decoded under the cap; closes the hop (its record and
    its connection) when the body is closed.  The record is shared by both kinds."""

    def __init__(
        self,
        response: httpx.Response,
        pinned: Any,
        decoder: BoundedDecoder,
    ) -> None:
        self._response = response
        self._pinned = pinned
        self._decoder = decoder
        self._error: WebFetchError | None = None
        self._closed = False

    def _closing(self) -> bool:
        """Whether this close is the first (a body is closed once)."""
        if self._closed:
            return False
        self._closed = True
        return True

    def _record(self) -> None:
        status, size = self._response.status_code, self._decoder.total
        if self._error is not None:
            self._pinned.failed(self._error, status=status, size=size)
        else:
            self._pinned.fetched(status=status, size=size)


class _GuardedStream(_Body, httpx.SyncByteStream):
    _pinned: PinnedHop

    def __iter__(self) -> Iterator[bytes]:
        try:
            with foreign_errors():
                for chunk in self._response.iter_raw():
                    yield self._decoder.feed(chunk)
                yield self._decoder.flush()
        except WebFetchError as exc:
            self._error = exc
            raise

    def close(self) -> None:
        if not self._closing():
            return
        try:
            self._response.close()
        finally:
            self._record()
            self._pinned.close()


class _AsyncGuardedStream(_Body, httpx.AsyncByteStream):
    _pinned: AsyncPinnedHop

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            with foreign_errors():
                async for chunk in self._response.aiter_raw():
                    yield self._decoder.feed(chunk)
                yield self._decoder.flush()
        except WebFetchError as exc:
            self._error = exc
            raise

    async def aclose(self) -> None:
        if not self._closing():
            return
        try:
            await self._response.aclose()
        finally:
            self._record()
            await self._pinned.aclose()


#: What httpx raises for a URL it cannot build a request for.
_UNBUILDABLE = (httpx.InvalidURL, httpx.UnsupportedProtocol, UnicodeError)


class _RawURLClient:
    """What the guarded clients add to httpx's: the caller's URL string kept for the guard,
    redirects decided as ``net.fetch`` decides them, errors renamed (``net.rawurl``)."""

    _guarded: GuardedTransport | AsyncGuardedTransport

    def refuse_unbuildable(self, url: object) -> WebFetchError:
        """Record and return the refusal of a URL the client library cannot build a
        request for: the guard's syntax verdict on the caller's string."""
        return self._guarded.refuse(str(url)[:8192], syntax_verdict(url), self._guarded.observer)

    def refuse_redirect(self, url: str, verdict: EgressDenied) -> WebFetchError:
        """Record and return the refusal of a redirect target (the next hop)."""
        return self._guarded.refuse(url, verdict, self._guarded.observer, hop=1)

    def _on_response(self, response: httpx.Response) -> None:
        on_redirect(response, self.refuse_redirect)


class GuardedClient(_RawURLClient, httpx.Client):
    """An ``httpx.Client`` on ``GuardedTransport`` (see ``net.rawurl``)."""

    def __init__(self, transport: GuardedTransport, **kwargs: Any) -> None:
        self._guarded = transport
        super().__init__(
            transport=transport, event_hooks={"response": [self._on_response]}, **kwargs
        )

    def build_request(self, method: str, url: Any, **kwargs: Any) -> httpx.Request:
        build = super().build_request
        request: httpx.Request = keep_built(
            lambda: build(method, url, **kwargs), url, _UNBUILDABLE, self.refuse_unbuildable
        )
        return request

    def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        mark_follow(request, kwargs.get("follow_redirects"), self.follow_redirects)
        with foreign_errors():
            return super().send(request, **kwargs)


class AsyncGuardedClient(_RawURLClient, httpx.AsyncClient):
    """An ``httpx.AsyncClient`` on ``AsyncGuardedTransport`` (see ``net.rawurl``)."""

    def __init__(self, transport: AsyncGuardedTransport, **kwargs: Any) -> None:
        self._guarded = transport
        super().__init__(
            transport=transport, event_hooks={"response": [self._async_on_response]}, **kwargs
        )

    async def _async_on_response(self, response: httpx.Response) -> None:
        self._on_response(response)

    def build_request(self, method: str, url: Any, **kwargs: Any) -> httpx.Request:
        build = super().build_request
        request: httpx.Request = keep_built(
            lambda: build(method, url, **kwargs), url, _UNBUILDABLE, self.refuse_unbuildable
        )
        return request

    async def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        mark_follow(request, kwargs.get("follow_redirects"), self.follow_redirects)
        with foreign_errors():
            return await super().send(request, **kwargs)


def _client_kwargs(timeout: float | None) -> dict[str, Any]:
    return {
        "follow_redirects": False,
        "trust_env": False,
        # Per-operation timeouts of the client; the transport's deadline bounds the whole.
        "timeout": httpx.Timeout(timeout if timeout is not None else 20.0),
    }


def guarded_client(
    policy: PolicySource,
    *,
    observer: Observer | None = None,
    max_response_bytes: int | None = None,
    timeout: float | None = None,
    guard: UrlGuard | None = None,
) -> GuardedClient:
    """An ``httpx.Client`` on ``GuardedTransport``: no redirects, no environment."""
    transport = GuardedTransport(
        policy,
        guard=guard,
        observer=observer,
        max_response_bytes=max_response_bytes,
        timeout=timeout,
    )
    return GuardedClient(transport, **_client_kwargs(timeout))


def guarded_async_client(
    policy: PolicySource,
    *,
    observer: Observer | None = None,
    max_response_bytes: int | None = None,
    timeout: float | None = None,
    guard: UrlGuard | None = None,
) -> AsyncGuardedClient:
    """An ``httpx.AsyncClient`` on ``AsyncGuardedTransport``: no redirects, no environment."""
    transport = AsyncGuardedTransport(
        policy,
        guard=guard,
        observer=observer,
        max_response_bytes=max_response_bytes,
        timeout=timeout,
    )
    return AsyncGuardedClient(transport, **_client_kwargs(timeout))
