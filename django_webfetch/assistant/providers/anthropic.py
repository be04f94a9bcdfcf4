"""The Anthropic kind: the Messages API through the ``anthropic`` SDK."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from .base import Provider

__all__ = ["AnthropicProvider"]


class AnthropicProvider(Provider):
    kind: ClassVar[str] = "anthropic"
    name: ClassVar[str] = "Anthropic"
    sdk: ClassVar[str] = "anthropic"

    def build_model(self, *, http_client: httpx.AsyncClient | None, timeout: float) -> Any:
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import (
            AnthropicProvider as PydanticAnthropicProvider,
        )

        client = AsyncAnthropic(**self.sdk_options(http_client, timeout))
        return AnthropicModel(
            self.config.model_name, provider=PydanticAnthropicProvider(anthropic_client=client)
        )
