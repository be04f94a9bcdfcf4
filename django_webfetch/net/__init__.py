"""The guarded-fetch core.  Pure Python: nothing in this package imports Django.

>>> from django_webfetch.net import EgressPolicy, fetch, explain
>>> result = fetch("https://docs.example.org/page?q=1", policy=EgressPolicy())  # doctest: +SKIP
>>> print(explain("http://0x7f.1/", policy=EgressPolicy()).as_text())  # doctest: +SKIP
"""

from __future__ import annotations

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
