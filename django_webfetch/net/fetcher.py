"""The hop loop: guard, pin, request, follow redirects ourselves, cap everything.

Each hop (the first URL and every redirect target) goes through the whole guard and gets its
own pinned transport.  httpx never follows redirects and never reads the environment.  The
decoded body is capped while it streams: compressed bodies are inflated with a bounded
``max_length``, so a gzip bomb can neither inflate past the cap nor allocate more than about
the cap.  Only ``gzip`` and ``deflate`` are asked for; any other coding is refused.
"""

from __future__ import annotations

import contextlib
import re
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import httpx

from .errors import (
    EgressDenied,
    FetchError,
    FetchTimeout,
    PolicyError,
    ResolutionError,
    ResponseTooLarge,
    TooManyRedirects,
    UnsupportedContentEncoding,
    UnsupportedMediaType,
    WebFetchError,
)
from .failures import failure_of
from .guard import ResolvedDestination, UrlGuard
from .policy import EgressPolicy
from .transport import PinnedTransport
from .urlparse import join_url

__all__ = [
    "REPORTED_HEADERS",
    "FetchResult",
    "Fetcher",
    "GuardEvent",
    "Hop",
    "fetch",
    "parse_media_type",
]

#: Followed by us; 300, 304, 305 (never: a server may not pick our proxy) and 306 are not.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_ACCEPT_ENCODING = "gzip, deflate"
_CHUNK = 64 * 1024
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz")

#: The response headers a ``FetchResult`` carries (lower-case name -> value cap in
#: characters).  A fixed set: nothing else the server sent is kept.  Values are
#: server-chosen text: bounded here, and shown to a model only inside the untrusted fence.
REPORTED_HEADERS: Mapping[str, int] = {
    "content-type": 200,
    "content-length": 20,
    "cache-control": 200,
    "location": 500,
    "server-timing": 300,
}


@dataclass(frozen=True)
class Hop:
    """One request of a fetch.  ``location`` is server-chosen: treat it as untrusted."""

    url: str
    status: int
    address: str | None
    location: str | None
    elapsed: float


@dataclass(frozen=True)
class FetchResult:
    url: str
    final_url: str
    status: int
    media_type: str
    charset: str | None
    body: bytes
    hops: tuple[Hop, ...]
    elapsed: float
    #: ``(name, value)`` for the names in ``REPORTED_HEADERS`` the last response sent, in
    #: that order; values bounded, control characters replaced.  Server-chosen: untrusted.
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def location(self) -> str | None:
        """The ``Location`` of a reported (not followed) redirect; server-chosen."""
        return dict(self.headers).get("location")

    @property
    def redirect_reported(self) -> bool:
        """A redirect answered and was reported, not followed (``follow_redirects=False``)."""
        return self.status in REDIRECT_STATUSES and self.location is not None


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


def parse_media_type(value: str | None) -> tuple[str, str | None]:
    """``("text/html", "utf-8")`` from a Content-Type value; ``("", None)`` when malformed.

    The media type is returned only when it is a well-formed ``type/subtype`` of at most 64
    characters (RFC 9110 §8.3.1 tokens), so it is safe to show.
    """
    if not value:
        return "", None
    main, _, params = value.partition(";")
    media_type = main.strip().lower()
    kind, slash, subtype = media_type.partition("/")
    if (
        not slash
        or not kind
        or not subtype
        or len(media_type) > 64
        or not set(kind) <= _TOKEN_CHARS
        or not set(subtype) <= _TOKEN_CHARS
    ):
        return "", None
    charset: str | None = None
    for param in params.split(";"):
        name, eq, val = param.partition("=")
        if eq and name.strip().lower() == "charset":
            cleaned = val.strip().strip('"').strip().lower()
            if cleaned and len(cleaned) <= 40 and set(cleaned) <= _TOKEN_CHARS:
                charset = cleaned
    return media_type, charset


class _BoundedDecoder:
    """Decode a content-coded body without ever producing more than ``limit`` bytes."""

    def __init__(self, coding: str, limit: int) -> None:
        self._coding = coding
        self._limit = limit
        self.total = 0
        self._first = True
        self._buffer = b""
        self._obj: zlib._Decompress | None = None
        if coding == "gzip":
            self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._obj = zlib.decompressobj(zlib.MAX_WBITS)

    def _emit(self, data: bytes) -> bytes:
        self.total += len(data)
        if self.total > self._limit:
            raise ResponseTooLarge(detail=f"decoded body passed {self._limit} bytes")
        return data

    def feed(self, data: bytes) -> bytes:
        if self._obj is None:
            return self._emit(data)
        out = bytearray()
        pending = data
        while pending:
            try:
                chunk = self._obj.decompress(pending, self._limit - self.total + 1)
            except zlib.error as exc:
                if self._coding == "deflate" and self._first:
                    # Some servers send raw deflate without the zlib wrapper (as httpx
                    # tolerates); retry once as raw deflate.
                    self._first = False
                    self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise FetchError("the compressed body is corrupt", detail=str(exc)) from exc
            self._first = False
            out += self._emit(chunk)
            if self._obj.eof:
                rest = self._obj.unused_data
                if rest and self._coding == "gzip":
                    # Concatenated gzip members (RFC 1952 §2.2).
                    self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    pending = rest
                    continue
                break
            pending = self._obj.unconsumed_tail
        return bytes(out)

    def flush(self) -> bytes:
        if self._obj is None:
            return b""
        return self._emit(self._obj.flush(self._limit - self.total + 1))


def _content_coding(response: httpx.Response) -> str:
    values = [
        part.strip().lower()
        for header in response.headers.get_list("content-encoding")
        for part in header.split(",")
    ]
    codings = [v for v in values if v and v != "identity"]
    if not codings:
        return "identity"
    if len(codings) == 1 and codings[0] in {"gzip", "x-gzip", "deflate"}:
        return "gzip" if codings[0] == "x-gzip" else codings[0]
    raise UnsupportedContentEncoding(detail="content-encoding not asked for")


class Fetcher:
    """Fetch one URL under a policy.  Thread-safe; holds no connection between calls."""

    def __init__(
        self,
        guard: UrlGuard | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._guard = guard or UrlGuard()
        self._clock = clock

    def fetch(
        self,
        url: str,
        *,
        policy: EgressPolicy,
        observer: Observer | None = None,
        headers: Mapping[str, str] | None = None,
        follow_redirects: bool = True,
        refuse_media_types: bool = True,
    ) -> FetchResult:
        """See the module docstring.

        ``follow_redirects=False`` ("report, do not follow"): a redirect is returned as a
        ``FetchResult`` with its status, an empty body and the ``Location`` in ``headers``
        (server-chosen: show it only inside the untrusted fence); nothing is requested
        from its target.  ``refuse_media_types=False``: a media type outside
        ``policy.media_types`` is not an error; the result carries the status and the
        headers with an empty body (the body is never read).
        """
        extra = _check_headers(headers)
        start = self._clock()
        origin: tuple[str, str, int] | None = None
        deadline = start + policy.total_timeout
        emit: Observer = observer or (lambda event: None)
        hops: list[Hop] = []
        current = url
        for hop in range(policy.max_redirects + 1):
            self._check_budget(deadline)
            hop_start = self._clock()
            try:
                destination = self._guard.check(current, policy, deadline=deadline, hop=hop)
            except (EgressDenied, ResolutionError, FetchTimeout) as exc:
                # Refused, or the resolver / budget failed: on record before it propagates.
                emit(_refusal_event(hop, current, exc, self._clock() - hop_start))
                raise
            self._check_budget(deadline)
            addresses = tuple(str(a) for a in destination.addresses)
            emit(
                GuardEvent(
                    hop=hop,
                    url_host=destination.host,
                    port=destination.port,
                    decision="allowed",
                    reason="allowed",
                    addresses=addresses,
                    duration=self._clock() - hop_start,
                )
            )
            if origin is None:
                origin = (destination.scheme, destination.host, destination.port)
            # Caller headers (e.g. an endpoint's credentials) go only to the first URL's
            # origin, never to a host a redirect picked (as browsers drop Authorization).
            same_origin = (destination.scheme, destination.host, destination.port) == origin
            try:
                outcome = self._request(
                    destination,
                    policy,
                    deadline,
                    hop_start,
                    extra if same_origin else {},
                    refuse_media_types,
                )
            except WebFetchError as exc:
                emit(
                    GuardEvent(
                        hop=hop,
                        url_host=destination.host,
                        port=destination.port,
                        decision="failed",
                        reason=exc.code,
                        addresses=addresses,
                        duration=self._clock() - hop_start,
                        detail=exc.detail,
                        failure=exc.failure,
                    )
                )
                raise
            hop_record, result, reported = outcome
            hops.append(hop_record)
            emit(
                GuardEvent(
                    hop=hop,
                    url_host=destination.host,
                    port=destination.port,
                    decision="fetched",
                    reason="redirect" if result is None else "ok",
                    addresses=(hop_record.address,) if hop_record.address else addresses,
                    bytes=0 if result is None else len(result[2]),
                    duration=hop_record.elapsed,
                    status=hop_record.status,
                )
            )
            if result is None and not follow_redirects:
                self._check_budget(deadline)
                return FetchResult(
                    url=url,
                    final_url=destination.url.geturl(),
                    status=hop_record.status,
                    media_type="",
                    charset=None,
                    body=b"",
                    hops=tuple(hops),
                    elapsed=self._clock() - start,
                    headers=reported,
                )
            if result is None:
                assert hop_record.location is not None
                if hop == policy.max_redirects:
                    raise TooManyRedirects(detail=f"more than {policy.max_redirects} redirects")
                # Resolved against the hop's URL; the next iteration runs the whole guard
                # on it (a "file:" or private target is refused there).
                current = join_url(destination.url, hop_record.location)
                continue
            media_type, charset, body = result
            self._check_budget(deadline)
            return FetchResult(
                url=url,
                final_url=destination.url.geturl(),
                status=hop_record.status,
                media_type=media_type,
                charset=charset,
                body=body,
                hops=tuple(hops),
                elapsed=self._clock() - start,
                headers=reported,
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def _request(
        self,
        destination: ResolvedDestination,
        policy: EgressPolicy,
        deadline: float,
        hop_start: float,
        extra_headers: Mapping[str, str],
        refuse_media_types: bool = True,
    ) -> tuple[Hop, tuple[str, str | None, bytes] | None, tuple[tuple[str, str], ...]]:
        connected: list[str] = []
        transport = PinnedTransport(
            destination,
            ca_file=policy.ca_file,
            connect_timeout=policy.connect_timeout,
            deadline=deadline,
            on_connect=connected.append,
        )
        remaining = max(deadline - self._clock(), 0.001)
        connect = min(policy.connect_timeout, remaining)
        # No httpx.Client: it would add nothing but cost (environment, cookies, redirects
        # are all things we do not want).  The request goes straight to the pinned
        # transport, with httpcore's per-request timeouts.
        request = httpx.Request(
            "GET",
            destination.url.geturl(),
            headers={
                **extra_headers,
                # Set here, from the checked A-label: httpx would IDNA-decode the host.
                "Host": destination.url.authority,
                "User-Agent": policy.user_agent,
                "Accept": ", ".join((*policy.media_types, "*/*;q=0.1")),
                "Accept-Encoding": _ACCEPT_ENCODING,
            },
            extensions={
                "timeout": {
                    "connect": connect,
                    "read": remaining,
                    "write": remaining,
                    "pool": remaining,
                }
            },
        )
        try:
            with _as_fetch_errors():
                response = transport.handle_request(request)
            try:
                return self._handle(
                    response,
                    destination,
                    policy,
                    deadline,
                    connected,
                    hop_start,
                    refuse_media_types,
                )
            finally:
                response.close()
        finally:
            transport.close()

    def _handle(
        self,
        response: httpx.Response,
        destination: ResolvedDestination,
        policy: EgressPolicy,
        deadline: float,
        connected: list[str],
        hop_start: float,
        refuse_media_types: bool = True,
    ) -> tuple[Hop, tuple[str, str | None, bytes] | None, tuple[tuple[str, str], ...]]:
        address = connected[-1] if connected else None
        status = response.status_code
        location = response.headers.get("location")
        reported = reported_headers(response.headers)
        if status in REDIRECT_STATUSES and location is not None:
            return (
                Hop(
                    url=destination.url.geturl(),
                    status=status,
                    address=address,
                    location=location,
                    elapsed=self._clock() - hop_start,
                ),
                None,
                reported,
            )
        # Refused at the headers, before the body is read.
        media_type, charset = parse_media_type(response.headers.get("content-type"))
        if media_type not in policy.media_types:
            if refuse_media_types:
                # The detail (audit log only) names the refused type, already sanitised above.
                raise UnsupportedMediaType(
                    media_type=media_type,
                    detail=f"media type not accepted ({media_type or 'none'})",
                )
            # Reported, not read: the status and headers are all the caller asked for.
            return (
                Hop(
                    url=destination.url.geturl(),
                    status=status,
                    address=address,
                    location=None,
                    elapsed=self._clock() - hop_start,
                ),
                (media_type, charset, b""),
                reported,
            )
        coding = _content_coding(response)
        declared = response.headers.get("content-length", "")
        if coding == "identity" and declared.isdigit() and int(declared) > policy.max_body_bytes:
            raise ResponseTooLarge(detail=f"content-length {int(declared)}")
        decoder = _BoundedDecoder(coding, policy.max_body_bytes)
        parts: list[bytes] = []
        with _as_fetch_errors():
            for chunk in response.iter_raw(_CHUNK):
                parts.append(decoder.feed(chunk))
                self._check_budget(deadline)
            parts.append(decoder.flush())
        return (
            Hop(
                url=destination.url.geturl(),
                status=status,
                address=address,
                location=None,
                elapsed=self._clock() - hop_start,
            ),
            (media_type, charset, b"".join(parts)),
            reported,
        )

    def _check_budget(self, deadline: float) -> None:
        if self._clock() >= deadline:
            raise FetchTimeout(detail="the fetch budget is exhausted").failing("budget_exhausted")


@contextlib.contextmanager
def _as_fetch_errors() -> Iterator[None]:
    """httpx errors never leave the public API: timeouts become ``FetchTimeout``, the rest
    ``FetchError`` (the library's message goes to ``detail`` only)."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise FetchTimeout(detail=type(exc).__name__).failing(failure_of(exc)) from exc
    except httpx.HTTPError as exc:
        raise FetchError(detail=f"{type(exc).__name__}: {exc}").failing(failure_of(exc)) from exc


def reported_headers(headers: httpx.Headers) -> tuple[tuple[str, str], ...]:
    """The ``REPORTED_HEADERS`` of a response, bounded: repeated fields joined with ", ",
    every control character (and any non-printable character) replaced by a space, and the
    value cut to the name's cap.  Nothing else the server sent is kept."""
    out: list[tuple[str, str]] = []
    for name, cap in REPORTED_HEADERS.items():
        values = headers.get_list(name)
        if not values:
            continue
        joined = ", ".join(values)[: cap * 4]
        cleaned = "".join(ch if ch.isprintable() else " " for ch in joined).strip()
        out.append((name, cleaned[:cap]))
    return tuple(out)


def _refusal_event(hop: int, url: str, exc: WebFetchError, duration: float) -> GuardEvent:
    """The audit record of a hop that never reached a server: refused or failed early."""
    host, port = _host_port(url)
    denied = isinstance(exc, EgressDenied)
    address = getattr(exc, "address", "")
    return GuardEvent(
        hop=hop,
        url_host=host,
        port=port,
        decision="denied" if denied else "failed",
        reason=getattr(exc, "reason", exc.code),
        addresses=(address,) if address else (),
        duration=duration,
        detail=exc.detail,
        failure=exc.failure,
    )


def _host_port(url: str) -> tuple[str, int]:
    """Best-effort host/port for the audit log of a refused URL (never raises)."""
    from .urlparse import parse_url

    try:
        parsed = parse_url(url)
    except EgressDenied:
        return "", 0
    return parsed.host.name, parsed.port


_DEFAULT_FETCHER = Fetcher()


def fetch(
    url: str,
    *,
    policy: EgressPolicy,
    observer: Observer | None = None,
    headers: Mapping[str, str] | None = None,
    follow_redirects: bool = True,
    refuse_media_types: bool = True,
) -> FetchResult:
    """Fetch one page under ``policy``; see the module docstring and ``Fetcher.fetch``.

    ``headers`` (e.g. an endpoint's ``Authorization``) are sent to the first URL's origin
    only.  Headers that would change how the request is routed, framed or decoded are
    refused with ``PolicyError`` (a ``ValueError``).
    """
    return _DEFAULT_FETCHER.fetch(
        url,
        policy=policy,
        observer=observer,
        headers=headers,
        follow_redirects=follow_redirects,
        refuse_media_types=refuse_media_types,
    )


#: Headers a caller may not set: routing, framing, encoding and proxying are ours.
_RESERVED_HEADERS = frozenset(
    {
        "host",
        "connection",
        "content-length",
        "transfer-encoding",
        "te",
        "upgrade",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",
        "user-agent",
        "accept",
        "expect",
        "trailer",
    }
)
_HEADER_NAME_CHARS = _TOKEN_CHARS | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


#: RFC 9110 field-value, ASCII only (httpx encodes header values as ASCII): visible
#: characters, spaces and tabs only between them.
_FIELD_VALUE = re.compile(r"(?:[\x21-\x7e](?:[ \t]*[\x21-\x7e])*)?")


def _check_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    if not headers:
        return {}
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not name or not set(name) <= _HEADER_NAME_CHARS:
            raise PolicyError("a header name must be an RFC 9110 token")
        if name.lower() in _RESERVED_HEADERS:
            raise PolicyError(f"the {name.lower()} header is set by the fetcher only")
        if any((ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F for ch in value):
            raise PolicyError("a header value may not contain control characters")
        if not _FIELD_VALUE.fullmatch(value):
            # Never the value itself (an endpoint's secret): h11 and httpx would refuse it
            # later with a message that quotes it ("Illegal header value b'...'").
            raise PolicyError(
                f"the {name.lower()} header value is not an RFC 9110 field value "
                "(visible ASCII, inner spaces or tabs only)"
            )
        checked[name] = value
    return checked
