"""django_webfetch's public error tree.

::

    WebFetchError                         .code
    ├── EgressDenied                      .url .reason .detail
    │   ├── InvalidURL(EgressDenied, ValueError)
    │   ├── SchemeNotAllowed
    │   ├── PortNotAllowed
    │   ├── HostNotAllowed
    │   ├── AddressNotAllowed             .address .category
    │   ├── UnresolvableHost
    │   └── ApprovalRequired              .approval_request_id
    ├── ResolutionError
    ├── FetchError
    │   ├── FetchTimeout
    │   ├── ResponseTooLarge
    │   ├── UnsupportedMediaType          .media_type
    │   ├── UnsupportedContentEncoding
    │   └── TooManyRedirects
    ├── ExtractionError
    └── PolicyError(WebFetchError, ValueError)
    WebFetchConfigurationError(ImproperlyConfigured)      # deliberately not a WebFetchError
    └── WebFetchImproperlyInstalled(WebFetchConfigurationError, ImportError)

The Django-free classes live in ``django_webfetch.net.errors`` and are re-exported here.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from .net.errors import (
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

__all__ = [
    "AddressNotAllowed",
    "ApprovalRequired",
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
    "WebFetchConfigurationError",
    "WebFetchError",
    "WebFetchImproperlyInstalled",
]


class ApprovalRequired(EgressDenied):
    """The call needs a human approval before it may run."""

    code = "approval_required"
    default_reason = "approval_required"

    def __init__(
        self,
        reason: str | None = None,
        *,
        url: str = "",
        detail: str = "",
        hop: int = 0,
        approval_request_id: object = None,
    ) -> None:
        self.approval_request_id = approval_request_id
        super().__init__(reason, url=url, detail=detail, hop=hop)


class WebFetchConfigurationError(ImproperlyConfigured):
    """A ``WEBFETCH_*`` setting (or the database configuration) cannot be used."""

    code = "configuration_error"


class WebFetchImproperlyInstalled(WebFetchConfigurationError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    code = "improperly_installed"

    def __init__(self, missing_package: str, extra: str) -> None:
        self.missing_package = missing_package
        self.extra = extra
        super().__init__(
            f'{missing_package} is not installed: pip install "django-webfetch[{extra}]"'
        )
