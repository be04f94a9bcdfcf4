"""LLM providers on Pydantic AI, every request through the egress guard.

The provider is the ``ConfiguredEndpoint`` of the tool group ``assistant`` (scope
``configured_endpoint``): base URL, provider kind (``openai``, ``openai-compatible``,
``anthropic``), model name, ``allow_private`` for a local server, and the endpoint's
write-only secret as the API key.  With none configured, the offline rule-based planner
(``planner.py``) answers, labelled as such.

The SDK client (``openai.AsyncOpenAI`` / ``anthropic.AsyncAnthropic``) is given an
``httpx.AsyncClient`` whose transport is the guarded transport of ``net/guarded.py``
(``GuardedTransport``): the guard checks and pins every request against the live policy of
the ``assistant`` group, exactly as for a tool.  The SDK's own retries are off; the run
retries a failed request once where that is safe.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from django_webfetch.net.errors import (
    EgressDenied,
    FetchTimeout,
    ResponseTooLarge,
    WebFetchError,
)

__all__ = [
    "ASSISTANT_GROUP",
    "OFFLINE_LABEL",
    "PROVIDER_KINDS",
    "ProviderConfig",
    "ProviderFailure",
    "classify_error",
    "configured_provider",
]

logger = logging.getLogger("django_webfetch.assistant")

ASSISTANT_GROUP = "assistant"
PROVIDER_KINDS = ("openai", "openai-compatible", "anthropic")
OFFLINE_LABEL = "Offline rule-based planner (no language model)"
#: A provider answer larger than this is refused (``provider_response_too_large``).
MAX_PROVIDER_RESPONSE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class ProviderConfig:
    kind: str  # one of PROVIDER_KINDS, or "offline"
    model_name: str
    base_url: str = ""
    api_key: str = field(default="", repr=False)
    endpoint_id: int | None = None

    @property
    def offline(self) -> bool:
        return self.kind == "offline"

    @property
    def label(self) -> str:
        if self.offline:
            return OFFLINE_LABEL
        names = {
            "openai": "OpenAI",
            "openai-compatible": "OpenAI-compatible",
            "anthropic": "Anthropic",
        }
        return f"{names.get(self.kind, self.kind)}: {self.model_name}"[:200]


OFFLINE = ProviderConfig(kind="offline", model_name="offline-planner")


def _api_key(value: str) -> str:
    value = (value or "").strip()
    if value.lower().startswith("bearer "):
        value = value[7:].strip()
    return value


def configured_provider() -> ProviderConfig:
    """The provider of the ``assistant`` group, or the offline planner when none is usable.

    "Configured" means: the group is enabled with the ``configured_endpoint`` scope and one
    of its enabled endpoints names a provider kind and a model.
    """
    from django_webfetch.models import ConfiguredEndpoint, ToolGroup

    group = ToolGroup.objects.filter(slug=ASSISTANT_GROUP).first()
    if group is None or not group.enabled or group.scope != "configured_endpoint":
        return OFFLINE
    endpoint = (
        ConfiguredEndpoint.objects.filter(
            group=group, enabled=True, provider_kind__in=PROVIDER_KINDS
        )
        .exclude(model_name="")
        .order_by("pk")
        .first()
    )
    if endpoint is None:
        return OFFLINE
    return ProviderConfig(
        kind=endpoint.provider_kind,
        model_name=endpoint.model_name,
        base_url=endpoint.base_url,
        api_key=_api_key(endpoint.auth_header_value),
        endpoint_id=endpoint.pk,
    )


# -- errors ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProviderFailure(Exception):
    """A provider request that failed: a stable ``code``, our words for the editor, and
    whether asking again is safe (nothing but the model request is repeated)."""

    code: str
    message: str
    retry_safe: bool = False
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def _causes(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def classify_error(exc: BaseException) -> ProviderFailure:
    """Map any exception of a provider request onto a ``ProviderFailure``.

    SDKs wrap transport errors (``APIConnectionError``): the chain is walked to find the
    guard's own error first.  No provider text reaches the message (it may echo input).
    """
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


# -- the guarded HTTP client ----------------------------------------------------------------


def provider_client(
    policy: Any, *, observer: Callable[[Any], None] | None, timeout: float
) -> httpx.AsyncClient:
    """The SDK's ``httpx.AsyncClient``: on the guarded transport of ``net/guarded.py``, so the
    guard checks and pins every request (no redirects, no proxy environment)."""
    from django_webfetch.net.guarded import guarded_async_client

    return guarded_async_client(
        policy,
        observer=observer,
        max_response_bytes=MAX_PROVIDER_RESPONSE_BYTES,
        timeout=timeout,
    )


def _httpx2_client(inner: httpx.AsyncClient, timeout: float) -> Any:
    """An ``httpx2.AsyncClient`` whose every request is sent by ``inner`` (the guarded
    client): for SDKs built on httpx2, the same guard, pin and bounds.  The response body
    is passed on as it arrives (a streamed answer streams), closed with the response."""
    import httpx2

    class Body(httpx2.AsyncByteStream):
        def __init__(self, response: httpx.Response) -> None:
            self._response = response

        async def __aiter__(self) -> Any:
            async for chunk in self._response.aiter_raw():
                yield chunk

        async def aclose(self) -> None:
            await self._response.aclose()

    class Bridge(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: Any) -> Any:
            body = await request.aread()
            forwarded = httpx.Request(
                request.method,
                str(request.url),
                headers=list(request.headers.multi_items()),
                content=body,
            )
            response = await inner.send(forwarded, stream=True)
            headers = [
                (k, v)
                for k, v in response.headers.multi_items()
                if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
            ]
            return httpx2.Response(
                response.status_code, headers=headers, stream=Body(response), request=request
            )

        async def aclose(self) -> None:
            await inner.aclose()

    return httpx2.AsyncClient(
        transport=Bridge(), follow_redirects=False, trust_env=False, timeout=timeout
    )


def _sdk_http_client(sdk: str, client: httpx.AsyncClient, timeout: float) -> Any:
    """The guarded client in the HTTP library the SDK is built on (httpx, or httpx2 for
    openai >= 3 / anthropic >= 2)."""
    import importlib

    try:
        base = importlib.import_module(f"{sdk}._base_client")
    except ImportError:  # pragma: no cover - depends on the SDK's layout
        return client
    if "httpx2" in vars(base):
        return _httpx2_client(client, timeout)
    return client


def build_model(
    config: ProviderConfig, *, http_client: httpx.AsyncClient | None, timeout: float
) -> Any:
    """A Pydantic AI model for ``config`` (the offline planner for ``offline``)."""
    if config.offline:
        from .planner import offline_model

        return offline_model()
    assert http_client is not None
    if config.kind == "anthropic":
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        client = AsyncAnthropic(
            api_key=config.api_key or "unset",
            base_url=config.base_url,
            http_client=_sdk_http_client("anthropic", http_client, timeout),
            max_retries=0,
            timeout=timeout,
        )
        return AnthropicModel(
            config.model_name, provider=AnthropicProvider(anthropic_client=client)
        )
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    openai_client = AsyncOpenAI(
        api_key=config.api_key or "unset",
        base_url=config.base_url,
        http_client=_sdk_http_client("openai", http_client, timeout),
        max_retries=0,
        timeout=timeout,
    )
    return OpenAIChatModel(config.model_name, provider=OpenAIProvider(openai_client=openai_client))


def usage_dict(usage: Any) -> dict[str, int]:
    result: dict[str, int] = {}
    for name in ("input_tokens", "output_tokens"):
        value = getattr(usage, name, None)
        if isinstance(value, int):
            result[name] = value
    return result


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
