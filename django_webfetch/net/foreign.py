"""The one table that maps foreign exceptions into the project's error tree.

Every way out of the app (``net.fetch``, the guarded httpx clients, the LLM SDK bridge and
the plugin client) runs its network work inside ``foreign_errors()``: an exception raised
by httpx, httpcore, h11, ``ssl``, dnspython, the operating system, or a ``UnicodeError``
while a request or response is rebuilt, leaves as a ``WebFetchError`` subclass, never as
itself.  The library's text goes to ``detail`` (the audit log) only; the message is ours
(``net.failures`` names what failed).  A ``WebFetchError`` passes through unchanged.

The table is read top to bottom; the first row whose types match wins, so a more specific
row comes first.  Anything outside the table (a programming error) is not ours to rename
and propagates as it is.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Callable, Iterator

import dns.exception
import h11
import httpcore
import httpx

from .errors import (
    FetchError,
    FetchTimeout,
    InvalidURL,
    ResolutionError,
    TooManyRedirects,
    WebFetchError,
)
from .failures import failure_of

__all__ = ["FOREIGN_ERRORS", "foreign_errors", "translate"]


def _timeout(exc: BaseException) -> WebFetchError:
    return FetchTimeout(detail=type(exc).__name__).failing(failure_of(exc))


def _redirects(exc: BaseException) -> WebFetchError:
    return TooManyRedirects(detail=type(exc).__name__)


def _invalid_url(exc: BaseException) -> WebFetchError:
    # A URL httpx could not parse or send (its scheme, its host): the same verdict the
    # guard gives a URL it cannot parse.
    return InvalidURL(detail=type(exc).__name__)


def _transport(exc: BaseException) -> WebFetchError:
    return FetchError(detail=f"{type(exc).__name__}: {exc}").failing(failure_of(exc))


def _unicode(exc: BaseException) -> WebFetchError:
    # A header name or value outside ASCII (httpx encodes headers as ASCII when it
    # rebuilds them): the server's bytes never reach the message, nor the detail.
    return FetchError(detail=type(exc).__name__).failing("protocol_error")


def _dns(exc: BaseException) -> WebFetchError:
    return ResolutionError(detail=type(exc).__name__).failing(
        "dns_timeout" if isinstance(exc, dns.exception.Timeout) else "dns_failure"
    )


_Row = tuple[tuple[type[BaseException], ...], Callable[[BaseException], WebFetchError]]


def _httpx2(*names: str) -> tuple[type[BaseException], ...]:
    """httpx2's classes of these names (the SDK bridge's library), when it is installed."""
    try:
        import httpx2
    except ImportError:  # pragma: no cover - httpx2 comes with the LLM SDKs
        return ()
    return tuple(getattr(httpx2, name) for name in names)


#: (foreign exception types, the project's error built from one).  First match wins.
FOREIGN_ERRORS: tuple[_Row, ...] = (
    (
        (
            httpx.TimeoutException,
            httpcore.TimeoutException,
            TimeoutError,
            *_httpx2("TimeoutException"),
        ),
        _timeout,
    ),
    ((httpx.TooManyRedirects, *_httpx2("TooManyRedirects")), _redirects),
    (
        (
            httpx.InvalidURL,
            httpx.UnsupportedProtocol,
            httpcore.UnsupportedProtocol,
            *_httpx2("InvalidURL", "UnsupportedProtocol"),
        ),
        _invalid_url,
    ),
    (
        (
            httpx.HTTPError,
            httpx.StreamError,
            *_httpx2("HTTPError", "StreamError"),
            httpcore.ProtocolError,
            httpcore.NetworkError,
            h11.ProtocolError,
            ssl.SSLError,
            OSError,
        ),
        _transport,
    ),
    ((UnicodeError,), _unicode),
    ((dns.exception.DNSException,), _dns),
)


def translate(exc: BaseException) -> WebFetchError | None:
    """The project's error for ``exc`` (``exc`` itself when it is one already); ``None``
    when the table has no row for it."""
    if isinstance(exc, WebFetchError):
        return exc
    for kinds, build in FOREIGN_ERRORS:
        if isinstance(exc, kinds):
            return build(exc)
    return None


@contextlib.contextmanager
def foreign_errors() -> Iterator[None]:
    """Run a block whose foreign exceptions leave as the project's (see the table)."""
    try:
        yield
    except WebFetchError:
        raise
    except Exception as exc:
        mapped = translate(exc)
        if mapped is None:
            raise
        raise mapped from exc
