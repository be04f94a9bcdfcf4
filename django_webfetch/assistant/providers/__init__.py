"""LLM providers on Pydantic AI, every request through the egress guard.

The provider is the ``ConfiguredEndpoint`` of the tool group ``assistant`` (scope
``configured_endpoint``): base URL, provider kind, model name, ``allow_private`` for a local
server, and the endpoint's write-only secret as the API key.  With none configured, the
offline rule-based planner (``planner.py``) answers, labelled as such.

One module per provider kind, each a subclass of :class:`~.base.Provider` (``openai``,
``openai_compatible``, ``anthropic``, ``offline``), registered below — the one place the
built-in kinds are named.  The registry is the only list of kinds: the endpoint's choices,
the admin and the checks read it.

The SDK client (``openai.AsyncOpenAI`` / ``anthropic.AsyncAnthropic``) is given an
``httpx.AsyncClient`` whose transport is the guarded transport of ``net/guarded.py``
(``GuardedTransport``): the guard checks and pins every request against the live policy of
the ``assistant`` group, exactly as for a tool.  The SDK's own retries are off; the run
retries a failed request once where that is safe.
"""

from __future__ import annotations

from typing import Any

import httpx

from .anthropic import AnthropicProvider
from .base import (
    ASSISTANT_GROUP,
    OFFLINE,
    OFFLINE_KIND,
    OFFLINE_LABEL,
    PROVIDER_KINDS,
    Provider,
    ProviderConfig,
    kind_choices,
    provider_class,
    provider_kinds,
    register,
    unregister,
)
from .errors import ProviderFailure, classify_error, stream_cut
from .http import MAX_PROVIDER_RESPONSE_BYTES, provider_client, usage_dict
from .offline import OfflineProvider
from .openai import OpenAIProvider
from .openai_compatible import OpenAICompatibleProvider

__all__ = [
    "ASSISTANT_GROUP",
    "MAX_PROVIDER_RESPONSE_BYTES",
    "OFFLINE",
    "OFFLINE_KIND",
    "OFFLINE_LABEL",
    "PROVIDER_KINDS",
    "AnthropicProvider",
    "OfflineProvider",
    "OpenAICompatibleProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderConfig",
    "ProviderFailure",
    "build_model",
    "classify_error",
    "configured_provider",
    "kind_choices",
    "provider_class",
    "provider_client",
    "provider_kinds",
    "register",
    "stream_cut",
    "unregister",
    "usage_dict",
]

# The built-in kinds, in the order the admin lists them.
for _kind in (OpenAIProvider, OpenAICompatibleProvider, AnthropicProvider, OfflineProvider):
    register(_kind)


def _api_key(value: str) -> str:
    value = (value or "").strip()
    if value.lower().startswith("bearer "):
        value = value[7:].strip()
    return value


def configured_provider() -> ProviderConfig:
    """The provider of the ``assistant`` group, or the offline planner when none is usable.

    "Configured" means: the group is enabled with the ``configured_endpoint`` scope and one
    of its enabled endpoints names a registered provider kind and a model.
    """
    from django_webfetch.models import ConfiguredEndpoint, ToolGroup

    group = ToolGroup.objects.filter(slug=ASSISTANT_GROUP).first()
    if group is None or not group.enabled or group.scope != "configured_endpoint":
        return OFFLINE
    endpoint = (
        ConfiguredEndpoint.objects.filter(
            group=group, enabled=True, provider_kind__in=provider_kinds()
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


def build_model(
    config: ProviderConfig, *, http_client: httpx.AsyncClient | None, timeout: float
) -> Any:
    """A Pydantic AI model for ``config`` (the offline planner for ``offline``)."""
    cls = provider_class(config.kind)
    if cls is None:
        raise ProviderFailure(
            "provider_changed",
            "The LLM provider configuration changed while the run was in progress.",
        )
    return cls(config).build_model(http_client=http_client, timeout=timeout)
