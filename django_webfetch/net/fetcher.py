"""The hop loop: guard, pin, request, follow redirects ourselves, cap everything.

Each hop (the first URL and every redirect target) goes through the whole guard and gets its
own pinned transport.  httpx never follows redirects and never reads the environment.  The
decoded body is capped while it streams: compressed bodies are inflated with a bounded
``max_length``, so a gzip bomb can neither inflate past the cap nor allocate more than about
the cap.  Only ``gzip`` and ``deflate`` are asked for; any other coding is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from .base import EgressTransport, GuardEvent, Observer, PinnedHop
from .body import ACCEPT_ENCODING, BoundedDecoder, content_coding
from .errors import (
    FetchTimeout,
    PolicyError,
    ResponseTooLarge,
    TooManyRedirects,
    UnsupportedMediaType,
)
from .foreign import foreign_errors
from .policy import EgressPolicy
from .rawurl import next_url

__all__ = [
    "REPORTED_HEADERS",
    "FetchResult",
    "Fetcher",
    "GuardEvent",
    "Hop",
    "Observer",
    "fetch",
    "parse_media_type",
]

#: Followed by us; 300, 304, 305 (never: a server may not pick our proxy) and 306 are not.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
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


class Fetcher(EgressTransport):
    """Fetch one URL under a policy.  Thread-safe; holds no connection between calls."""

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
        hops: list[Hop] = []
        current = url
        for hop in range(policy.max_redirects + 1):
            self._check_budget(deadline)
            with self.open_hop(
                current, policy, deadline=deadline, observer=observer, hop=hop
            ) as pinned:
                destination = pinned.destination
                self._check_budget(deadline)
                if origin is None:
                    origin = (destination.scheme, destination.host, destination.port)
                # Caller headers (e.g. an endpoint's credentials) go only to the first URL's
                # origin, never to a host a redirect picked (as browsers drop Authorization).
                same_origin = (destination.scheme, destination.host, destination.port) == origin
                hop_record, result, reported = self._request(
                    pinned,
                    policy,
                    deadline,
                    extra if same_origin else {},
                    refuse_media_types,
                )
                hops.append(hop_record)
                pinned.fetched(
                    status=hop_record.status,
                    size=0 if result is None else len(result[2]),
                    reason="redirect" if result is None else "ok",
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
                current = next_url(destination.url.geturl(), hop_record.location)
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
        pinned: PinnedHop,
        policy: EgressPolicy,
        deadline: float,
        extra_headers: Mapping[str, str],
        refuse_media_types: bool = True,
    ) -> tuple[Hop, tuple[str, str | None, bytes] | None, tuple[tuple[str, str], ...]]:
        with foreign_errors():
            return self._send(pinned, policy, deadline, extra_headers, refuse_media_types)

    def _send(
        self,
        pinned: PinnedHop,
        policy: EgressPolicy,
        deadline: float,
        extra_headers: Mapping[str, str],
        refuse_media_types: bool,
    ) -> tuple[Hop, tuple[str, str | None, bytes] | None, tuple[tuple[str, str], ...]]:
        remaining = max(deadline - self._clock(), 0.001)
        connect = min(policy.connect_timeout, remaining)
        # No httpx.Client: it would add nothing but cost (environment, cookies, redirects
        # are all things we do not want).  The request goes straight to the pinned
        # transport, with httpcore's per-request timeouts.
        request = httpx.Request(
            "GET",
            pinned.destination.url.geturl(),
            headers={
                **extra_headers,
                "User-Agent": policy.user_agent,
                "Accept": ", ".join((*policy.media_types, "*/*;q=0.1")),
                "Accept-Encoding": ACCEPT_ENCODING,
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
        response = pinned.send(request)
        try:
            return self._handle(response, pinned, policy, deadline, refuse_media_types)
        finally:
            response.close()

    def _handle(
        self,
        response: httpx.Response,
        pinned: PinnedHop,
        policy: EgressPolicy,
        deadline: float,
        refuse_media_types: bool = True,
    ) -> tuple[Hop, tuple[str, str | None, bytes] | None, tuple[tuple[str, str], ...]]:
        destination, hop_start = pinned.destination, pinned.start
        address = pinned.address
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
        coding = content_coding(response)
        declared = response.headers.get("content-length", "")
        if coding == "identity" and declared.isdigit() and int(declared) > policy.max_body_bytes:
            raise ResponseTooLarge(detail=f"content-length {int(declared)}")
        decoder = BoundedDecoder(coding, policy.max_body_bytes)
        parts: list[bytes] = []
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
