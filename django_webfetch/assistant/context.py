"""The context budget of one provider request: what of the history is sent.

Two budgets, both kept by replacing the oldest tool results with ``[result omitted: N
bytes]`` in what is sent (the stored history keeps them; the newest request, the latest
results or the question, is always sent whole):

- bytes: ``WEBFETCH_ASSISTANT_CONTEXT_BYTES`` of message text;
- tokens, when ``WEBFETCH_ASSISTANT_CONTEXT_TOKENS`` (the model's context window) is set:
  the request must leave ``WEBFETCH_ASSISTANT_MAX_TOKENS`` for the answer.  Tokens are
  estimated from what the provider reported: the input tokens of its latest answer over the
  bytes of the history that request carried (system prompt and tool schemas included in
  the count, so the ratio errs high), or 1 token per 3 bytes before any usage is known.

If it still does not fit, the run fails ``context_exceeded`` before the provider is asked
(a server would refuse it: llama.cpp answers HTTP 400 past its context size).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, cast

from django_webfetch.conf import conf

from .bounds import omitted_note, utf8_len
from .providers import ProviderFailure

__all__ = ["DEFAULT_TOKENS_PER_BYTE", "tokens_per_byte", "within_context_budget"]

#: Before any usage is reported: English text runs about 4 bytes a token; 3 errs high.
DEFAULT_TOKENS_PER_BYTE = 1 / 3


def _size(message: Any) -> int:
    return sum(
        utf8_len(str(getattr(p, "content", "") or "")) + utf8_len(str(getattr(p, "args", "") or ""))
        for p in message.parts
    )


def _trim(history: list[Any], budget: int) -> tuple[list[Any], int]:
    """``history`` with its oldest tool results replaced until it fits ``budget`` bytes
    (or nothing more can be replaced), and its size."""
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    total = sum(_size(m) for m in history)
    if total <= budget:
        return history, total
    sent = list(history)
    for index, message in enumerate(sent[:-1]):
        if total <= budget:
            break
        if not isinstance(message, ModelRequest):
            continue
        parts = list(message.parts)
        for position, part in enumerate(parts):
            if total <= budget:
                break
            if isinstance(part, ToolReturnPart):
                content = str(part.content)
                note = omitted_note(utf8_len(content))
                if utf8_len(note) < utf8_len(content):
                    total -= utf8_len(content) - utf8_len(note)
                    parts[position] = replace(cast(Any, part), content=note)
        sent[index] = replace(message, parts=parts)
    return sent, total


def _byte_budget(ratio: float) -> int:
    budget = conf.WEBFETCH_ASSISTANT_CONTEXT_BYTES
    window = conf.WEBFETCH_ASSISTANT_CONTEXT_TOKENS
    if window is not None:
        budget = min(
            budget, math.floor(max(window - conf.WEBFETCH_ASSISTANT_MAX_TOKENS, 0) / ratio)
        )
    return budget


def tokens_per_byte(history: list[Any]) -> float:
    """The provider's reported input tokens per byte sent, from its latest answer that
    reported usage (``DEFAULT_TOKENS_PER_BYTE`` when none did).  The bytes are those of the
    request as it was sent (trimmed the same way), not of the stored history."""
    from pydantic_ai.messages import ModelResponse

    ratio = DEFAULT_TOKENS_PER_BYTE
    for index, message in enumerate(history):
        if not isinstance(message, ModelResponse) or index == 0:
            continue
        reported = getattr(message.usage, "input_tokens", 0) or 0
        if reported > 0:
            _sent, size = _trim(history[:index], _byte_budget(ratio))
            if size > 0:
                ratio = reported / size
    return ratio


def within_context_budget(history: list[Any]) -> list[Any]:
    """The history as sent (see the module docstring); raises ``ProviderFailure``
    (``context_exceeded``) when even the newest request does not fit."""
    budget = _byte_budget(tokens_per_byte(history))
    sent, total = _trim(history, budget)
    if total > budget:
        if budget < conf.WEBFETCH_ASSISTANT_CONTEXT_BYTES:
            message = (
                "The conversation is too long for the model's context window; start a new one."
            )
        else:
            message = (
                "The conversation is too long for the assistant's context budget; start a new one."
            )
        raise ProviderFailure("context_exceeded", message)
    return sent
