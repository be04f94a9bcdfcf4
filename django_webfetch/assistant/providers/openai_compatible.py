"""The OpenAI-compatible kind: a server that speaks OpenAI's chat-completions API (vLLM,
Ollama, llama.cpp's ``llama-server``), often self-hosted."""

from __future__ import annotations

from typing import ClassVar

from .openai import OpenAIProvider

__all__ = ["OpenAICompatibleProvider"]


class OpenAICompatibleProvider(OpenAIProvider):
    kind: ClassVar[str] = "openai-compatible"
    name: ClassVar[str] = "OpenAI-compatible"
    choice_label: ClassVar[str] = "OpenAI-compatible (vLLM, Ollama, ...)"
