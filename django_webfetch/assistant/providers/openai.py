"""The OpenAI kind: the chat-completions API through the ``openai`` SDK."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from .base import Provider

__all__ = ["OpenAIProvider"]


class OpenAIProvider(Provider):
    kind: ClassVar[str] = "openai"
    name: ClassVar[str] = "OpenAI"
    sdk: ClassVar[str] = "openai"

    def build_model(self, *, http_client: httpx.AsyncClient | None, timeout: float) -> Any:
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider as PydanticOpenAIProvider

        client = AsyncOpenAI(**self.sdk_options(http_client, timeout))
        return OpenAIChatModel(
            self.config.model_name, provider=PydanticOpenAIProvider(openai_client=client)
        )
