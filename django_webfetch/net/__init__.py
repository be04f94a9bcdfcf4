"""The guarded-fetch core.  Pure Python: nothing in this package imports Django.

>>> from django_webfetch.net import EgressPolicy, fetch, explain
>>> result = fetch("https://docs.example.org/page?q=1", policy=EgressPolicy())  # doctest: +SKIP
>>> print(explain("http://0x7f.1/", policy=EgressPolicy()).as_text())  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django_webfetch.exports import export, listing

if TYPE_CHECKING:
    from .base import EgressTransport, PinnedHop
    from .bridge import guarded_httpx2_client
    from .errors import (
        AddressNotAllowed,
        EgressDenied,
        ExtractionError,
        FetchError,
        FetchTimeout,
        HostNotAllowed,
        InvalidURL,
        PolicyError,
        PortNotAllowed,
        ResolutionError,
        ResponseTooLarge,
        SchemeNotAllowed,
        TooManyRedirects,
        UnresolvableHost,
        UnsupportedContentEncoding,
        UnsupportedMediaType,
        WebFetchError,
    )
    from .failures import FAILURES, describe_failure, failure_of
    from .fetcher import (
        REPORTED_HEADERS,
        Fetcher,
        FetchResult,
        GuardEvent,
        Hop,
        fetch,
        parse_media_type,
    )
    from .foreign import FOREIGN_ERRORS, foreign_errors
    from .guard import Explanation, ResolvedDestination, Step, UrlGuard, explain
    from .guarded import (
        AsyncGuardedClient,
        AsyncGuardedTransport,
        GuardedClient,
        GuardedTransport,
        guarded_async_client,
        guarded_client,
    )
    from .policy import DEFAULT_MEDIA_TYPES, HARD_LIMITS, EgressPolicy, Scope
    from .transport import PinnedTransport

#: Where each name of the package is defined.  A name is imported at its first use, so that
#: importing one module of the package (``net.errors``: the plugin process does) does not
#: import the others and their dependencies (httpx, dnspython).
_EXPORTS = {
    "EgressTransport": "base",
    "PinnedHop": "base",
    "guarded_httpx2_client": "bridge",
    "AddressNotAllowed": "errors",
    "EgressDenied": "errors",
    "ExtractionError": "errors",
    "FetchError": "errors",
    "FetchTimeout": "errors",
    "HostNotAllowed": "errors",
    "InvalidURL": "errors",
    "PolicyError": "errors",
    "PortNotAllowed": "errors",
    "ResolutionError": "errors",
    "ResponseTooLarge": "errors",
    "SchemeNotAllowed": "errors",
    "TooManyRedirects": "errors",
    "UnresolvableHost": "errors",
    "UnsupportedContentEncoding": "errors",
    "UnsupportedMediaType": "errors",
    "WebFetchError": "errors",
    "FAILURES": "failures",
    "describe_failure": "failures",
    "failure_of": "failures",
    "FetchResult": "fetcher",
    "Fetcher": "fetcher",
    "GuardEvent": "fetcher",
    "Hop": "fetcher",
    "REPORTED_HEADERS": "fetcher",
    "fetch": "fetcher",
    "parse_media_type": "fetcher",
    "FOREIGN_ERRORS": "foreign",
    "foreign_errors": "foreign",
    "Explanation": "guard",
    "ResolvedDestination": "guard",
    "Step": "guard",
    "UrlGuard": "guard",
    "explain": "guard",
    "AsyncGuardedClient": "guarded",
    "AsyncGuardedTransport": "guarded",
    "GuardedClient": "guarded",
    "GuardedTransport": "guarded",
    "guarded_async_client": "guarded",
    "guarded_client": "guarded",
    "DEFAULT_MEDIA_TYPES": "policy",
    "EgressPolicy": "policy",
    "HARD_LIMITS": "policy",
    "Scope": "policy",
    "PinnedTransport": "transport",
}


def __getattr__(name: str) -> Any:
    return export(name, _EXPORTS, globals())


def __dir__() -> list[str]:
    return listing(_EXPORTS, globals())


__all__ = [
    "AddressNotAllowed",
    "AsyncGuardedClient",
    "AsyncGuardedTransport",
    "DEFAULT_MEDIA_TYPES",
    "EgressDenied",
    "EgressPolicy",
    "EgressTransport",
    "Explanation",
    "ExtractionError",
    "FAILURES",
    "FOREIGN_ERRORS",
    "FetchError",
    "FetchResult",
    "FetchTimeout",
    "Fetcher",
    "GuardEvent",
    "GuardedClient",
    "GuardedTransport",
    "HARD_LIMITS",
    "Hop",
    "HostNotAllowed",
    "InvalidURL",
    "PinnedHop",
    "PinnedTransport",
    "PolicyError",
    "PortNotAllowed",
    "REPORTED_HEADERS",
    "ResolutionError",
    "ResolvedDestination",
    "ResponseTooLarge",
    "SchemeNotAllowed",
    "Scope",
    "Step",
    "TooManyRedirects",
    "UnresolvableHost",
    "UnsupportedContentEncoding",
    "UnsupportedMediaType",
    "UrlGuard",
    "WebFetchError",
    "describe_failure",
    "explain",
    "failure_of",
    "fetch",
    "foreign_errors",
    "guarded_async_client",
    "guarded_client",
    "guarded_httpx2_client",
    "parse_media_type",
]
