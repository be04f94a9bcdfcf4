"""The Django-free part of django_webfetch's public error tree.

::

    WebFetchError                         .code
    ├── EgressDenied                      .url .reason .detail
    │   ├── InvalidURL(EgressDenied, ValueError)
    │   ├── SchemeNotAllowed
    │   ├── PortNotAllowed
    │   ├── HostNotAllowed
    │   ├── AddressNotAllowed             .address .category
    │   └── UnresolvableHost
    ├── ResolutionError                   (DNS failed: timeout, SERVFAIL, no server)
    ├── FetchError                        (wraps httpx.TransportError)
    │   ├── FetchTimeout
    │   ├── ResponseTooLarge
    │   ├── UnsupportedMediaType          .media_type (sanitised)
    │   ├── UnsupportedContentEncoding
    │   └── TooManyRedirects
    ├── ExtractionError
    └── PolicyError(WebFetchError, ValueError)   (an EgressPolicy that cannot be built)

``reason`` is a stable machine-readable code (``scheme``, ``userinfo``, ``host_syntax``,
``idn``, ``own_site``, ``denylist``, ``not_allowlisted``, ``host_spells_address``,
``invalid_list``, ``port``,
``proxy``, ``legacy_numeric_host``, ``unresolvable``, ``address_class:<class>``,
``mixed_answer``, ``scope``, ...).  The message shown to people and to the model is built only
from the reason code and text we chose; ``detail`` carries internal specifics for the audit
log and is never part of ``str(exc)``.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = [
    "AddressNotAllowed",
    "EgressDenied",
    "ExtractionError",
    "FetchError",
    "FetchTimeout",
    "HostNotAllowed",
    "InvalidURL",
    "PolicyError",
    "PortNotAllowed",
    "ResolutionError",
    "ResponseTooLarge",
    "SchemeNotAllowed",
    "TooManyRedirects",
    "UnresolvableHost",
    "UnsupportedContentEncoding",
    "UnsupportedMediaType",
    "WebFetchError",
]


_E = TypeVar("_E", bound="WebFetchError")


#: The most characters of an error's ``detail`` kept.  A detail may quote what a server sent
#: (an illegal header line of 100 KB): the audit log keeps a bounded, printable excerpt.
MAX_DETAIL = 500


def bounded_detail(detail: str) -> str:
    """``detail`` cut to ``MAX_DETAIL`` characters, anything unprintable escaped."""
    cut = detail[:MAX_DETAIL]
    if not cut.isprintable():
        cut = cut.encode("unicode_escape").decode("ascii")
    if len(cut) > MAX_DETAIL or len(detail) > MAX_DETAIL:
        cut = cut[: MAX_DETAIL - 1] + "…"
    return cut


class WebFetchError(Exception):
    """Base class of every error django_webfetch raises on purpose."""

    code: str = "webfetch_error"
    default_message: str = "web fetch failed"

    #: What failed, in our words (``net.failures``): "" when ``code`` says it all.
    failure: str = ""

    def __init__(self, message: str | None = None, *, detail: str = "") -> None:
        self.detail = bounded_detail(detail)
        super().__init__(message or self.default_message)

    def failing(self: _E, failure: str) -> _E:
        """Name what failed (a ``net.failures`` sub-code); the message becomes its fixed
        sentence.  Returns ``self`` for ``raise FetchError(...).failing("...") from exc``."""
        from .failures import describe_failure

        self.failure = failure
        sentence = describe_failure(failure)
        if sentence:
            self.args = (sentence,)
        return self


class EgressDenied(WebFetchError):
    """The guard refused a destination. ``reason`` names the rule."""

    code = "egress_denied"
    default_reason = "denied"

    def __init__(
        self,
        reason: str | None = None,
        *,
        url: str = "",
        detail: str = "",
        hop: int = 0,
    ) -> None:
        self.reason = reason or self.default_reason
        self.url = url
        self.hop = hop
        # The message is built from the reason code only: never from the URL or from
        # anything a server sent.
        super().__init__(f"egress denied by rule {self.reason!r}", detail=detail)


class InvalidURL(EgressDenied, ValueError):
    code = "invalid_url"
    default_reason = "invalid_url"


class SchemeNotAllowed(EgressDenied):
    code = "scheme_not_allowed"
    default_reason = "scheme"


class PortNotAllowed(EgressDenied):
    code = "port_not_allowed"
    default_reason = "port"


class HostNotAllowed(EgressDenied):
    code = "host_not_allowed"
    default_reason = "host_syntax"


class AddressNotAllowed(EgressDenied):
    code = "address_not_allowed"
    default_reason = "address_class"

    def __init__(
        self,
        reason: str | None = None,
        *,
        url: str = "",
        detail: str = "",
        hop: int = 0,
        address: str = "",
        category: str = "",
    ) -> None:
        self.address = address
        self.category = category
        super().__init__(reason, url=url, detail=detail, hop=hop)


class UnresolvableHost(EgressDenied):
    code = "unresolvable"
    default_reason = "unresolvable"


class ResolutionError(WebFetchError):
    code = "dns_error"
    default_message = "DNS resolution failed"


class FetchError(WebFetchError):
    code = "fetch_error"
    default_message = "the fetch failed"


class FetchTimeout(FetchError):
    code = "timeout"
    default_message = "the fetch ran out of time"


class ResponseTooLarge(FetchError):
    code = "too_large"
    default_message = "the response is larger than the download limit"


class UnsupportedMediaType(FetchError):
    code = "media_type"
    default_message = "the response has a media type that is not accepted"

    def __init__(
        self, message: str | None = None, *, detail: str = "", media_type: str = ""
    ) -> None:
        # ``media_type`` is already sanitised by the caller (well-formed, <= 64 chars) or "".
        self.media_type = media_type
        super().__init__(message, detail=detail)


class UnsupportedContentEncoding(FetchError):
    code = "content_encoding"
    default_message = "the response uses a content encoding that was not asked for"


class TooManyRedirects(FetchError):
    code = "redirect_limit"
    default_message = "the page redirected more often than allowed"


class ExtractionError(WebFetchError):
    code = "extraction_error"
    default_message = "the page text could not be extracted"


class PolicyError(WebFetchError, ValueError):
    code = "invalid_policy"
    default_message = "the egress policy is invalid"
