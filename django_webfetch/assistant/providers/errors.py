"""Provider failures: one ``ProviderFailure`` with a stable code for every way a provider
request can fail, and :func:`classify_error` mapping any exception onto it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from django_webfetch.net.errors import (
    EgressDenied,
    FetchTimeout,
    ResponseTooLarge,
    WebFetchError,
)

__all__ = [
    "MAX_PROVIDER_TEXT",
    "ProviderFailure",
    "classify_error",
    "provider_error_text",
    "stream_cut",
]

#: The provider's own error text is kept up to this many characters.
MAX_PROVIDER_TEXT = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class ProviderFailure(Exception):
    """A provider request that failed: a stable ``code``, our words for the editor, and
    whether asking again is safe (nothing but the model request is repeated)."""

    code: str
    message: str
    retry_safe: bool = False
    detail: str = ""
    #: The provider's own explanation (redacted, at most ``MAX_PROVIDER_TEXT`` characters):
    #: for operators only (the run in the admin, the log), never the editor or the model.
    provider_text: str = field(default="", repr=False)

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def _causes(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def provider_error_text(exc: BaseException, *, secret: str = "") -> str:
    """What the provider itself said about a failed request (an HTTP error's body), as
    text an operator may read: redacted (credential shapes, and ``secret`` itself), control
    characters replaced, cut to ``MAX_PROVIDER_TEXT`` characters.  ``""`` when the provider
    said nothing (a transport failure, a refusal by the guard)."""
    from django_webfetch.diagnostics import redact_text

    text = ""
    for item in _causes(exc):
        body: Any = getattr(item, "body", None)
        if body is None:
            response = getattr(item, "response", None)
            body = getattr(response, "text", None) if response is not None else None
        if body is None or body == "":
            continue
        if not isinstance(body, str):
            try:
                # One member a line: the redaction works line by line, and a key that
                # looks sensitive ("n_prompt_tokens") must not take the rest with it.
                body = json.dumps(body, ensure_ascii=False, default=str, indent=1)
            except (TypeError, ValueError):
                body = str(body)
        text = body
        break
    if not text:
        return ""
    text = text[: MAX_PROVIDER_TEXT * 4]
    if secret and len(secret) >= 4:
        text = text.replace(secret, "[redacted]")
    text = _CONTROL.sub("?", redact_text(text))
    if len(text) > MAX_PROVIDER_TEXT:
        text = text[: MAX_PROVIDER_TEXT - 1] + "…"
    return text


#: The failures that, once the provider had begun streaming its answer, mean the answer was
#: cut: the connection closed or broke mid-answer, or the rest could not be read.
_CUT = frozenset({"provider_unreachable", "provider_bad_response"})


def stream_cut(failure: ProviderFailure) -> ProviderFailure:
    """``failure`` of a request whose answer had begun streaming: a transport failure is
    then ``provider_stream_cut`` (the provider was reached; its answer stopped midway),
    not ``provider_unreachable``.  A timeout, a refusal or an oversized answer keep their
    own code."""
    if failure.code not in _CUT:
        return failure
    return replace(
        failure,
        code="provider_stream_cut",
        message="The LLM provider's answer was cut off while it streamed.",
        retry_safe=True,
        detail=failure.detail or failure.code,
    )


def classify_error(exc: BaseException, *, secret: str = "") -> ProviderFailure:
    """Map any exception of a provider request onto a ``ProviderFailure``.

    SDKs wrap transport errors (``APIConnectionError``): the chain is walked to find the
    guard's own error first.  No provider text reaches the message (it may echo input): the
    provider's own explanation goes to ``provider_text``, for operators only.
    """
    failure = _classify(exc)
    text = provider_error_text(exc, secret=secret)
    return replace(failure, provider_text=text) if text else failure


def _classify(exc: BaseException) -> ProviderFailure:
    chain = _causes(exc)
    for item in chain:
        if isinstance(item, EgressDenied):
            return ProviderFailure(
                "egress_denied",
                f"The egress guard refused the request to the LLM provider (rule: {item.reason}).",
                detail=item.reason,
            )
    for item in chain:
        if isinstance(item, ResponseTooLarge):
            return ProviderFailure(
                "provider_response_too_large", "The LLM provider's answer was too large."
            )
        if isinstance(item, FetchTimeout):
            return ProviderFailure(
                "provider_timeout", "The LLM provider did not answer in time.", retry_safe=True
            )
        if isinstance(item, WebFetchError):
            return ProviderFailure(
                "provider_unreachable",
                f"The LLM provider could not be reached ({item.code}).",
                retry_safe=True,
                detail=item.code,
            )
    status = None
    for item in chain:
        status = getattr(item, "status_code", None)
        if isinstance(status, int):
            break
    if isinstance(status, int):
        if status in (408, 409, 429) or status >= 500:
            return ProviderFailure(
                "provider_error",
                f"The LLM provider answered with an error (HTTP {status}).",
                retry_safe=True,
                detail=str(status),
            )
        return ProviderFailure(
            "provider_rejected",
            f"The LLM provider refused the request (HTTP {status}).",
            detail=str(status),
        )
    names = {type(item).__name__ for item in chain}
    if names & {"APITimeoutError", "ModelTimeoutError", "TimeoutError", "ReadTimeout"}:
        return ProviderFailure(
            "provider_timeout", "The LLM provider did not answer in time.", retry_safe=True
        )
    if names & {"APIConnectionError", "ModelConnectionError", "ConnectError"}:
        return ProviderFailure(
            "provider_unreachable", "The LLM provider could not be reached.", retry_safe=True
        )
    return ProviderFailure(
        "provider_bad_response",
        "The LLM provider's answer could not be understood.",
        retry_safe=True,
        detail=type(exc).__name__,
    )
