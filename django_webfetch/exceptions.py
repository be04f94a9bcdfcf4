"""django_webfetch's public error tree.

::

    WebFetchError                         .code
    ├── EgressDenied                      .url .reason .detail
    │   ├── InvalidURL(EgressDenied, ValueError)
    │   ├── SchemeNotAllowed
    │   ├── PortNotAllowed
    │   ├── HostNotAllowed
    │   ├── AddressNotAllowed             .address .category
    │   └── UnresolvableHost
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
    RefusalShown(CommandError)            .returncode     # an operator command's refusal

The Django-free classes live in ``django_webfetch.net.errors`` and are re-exported here.
A call that waits for a human is not an error: it is a durable ``ToolCall`` in state
``awaiting_approval`` (``runs``), and a tool run without its approval returns the result
code ``approval_required`` (docs/tools.rst).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

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
    "EgressDenied",
    "ExtractionError",
    "FetchError",
    "FetchTimeout",
    "HostNotAllowed",
    "InvalidURL",
    "PolicyError",
    "PortNotAllowed",
    "RefusalShown",
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


class RefusalShown(CommandError):
    """A refusal an operator command (``webfetch explain``, ``webfetch plugin check``)
    already printed on stdout as its ``DENIED (reason)`` line: from a terminal only the exit
    status says it again; ``call_command`` raises it like any ``CommandError``."""
