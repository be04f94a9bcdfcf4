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
#: What one message part costs on the wire beyond its text, counted for the token estimate
#: (an OpenAI tool call and its result carry ~200 bytes of JSON around their text).
PART_OVERHEAD_BYTES = 128
#: Tokens a request costs beyond its messages (the tool definitions' framing, the
#: streaming options): kept free of the window as well.
REQUEST_OVERHEAD_TOKENS = 64


def _size(message: Any) -> int:
    return sum(
        utf8_len(str(getattr(p, "content", "") or "")) + utf8_len(str(getattr(p, "args", "") or ""))
        for p in message.parts
    )


def _weight(message: Any) -> int:
    """``_size`` plus what each part costs on the wire beyond its text (roles, ids, the
    tool call's JSON): the token estimate grows with every message, not only its text."""
    return _size(message) + PART_OVERHEAD_BYTES * len(message.parts)


def _trim(history: list[Any], byte_budget: int, weight_budget: float) -> tuple[list[Any], bool]:
    """``history`` with its oldest tool results replaced until its bytes fit ``byte_budget``
    and its weight fits ``weight_budget`` (or nothing more can be replaced); and whether it
    fits."""
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    size = sum(_size(m) for m in history)
    weight = sum(_weight(m) for m in history)

    def fits() -> bool:
        return size <= byte_budget and weight <= weight_budget

    if fits():
        return history, True
    sent = list(history)
    for index, message in enumerate(sent[:-1]):
        if fits():
            break
        if not isinstance(message, ModelRequest):
            continue
        parts = list(message.parts)
        for position, part in enumerate(parts):
            if fits():
                break
            if isinstance(part, ToolReturnPart):
                content = str(part.content)
                note = omitted_note(utf8_len(content))
                saved = utf8_len(content) - utf8_len(note)
                if saved > 0:
                    size -= saved
                    weight -= saved
                    parts[position] = replace(cast(Any, part), content=note)
        sent[index] = replace(message, parts=parts)
    return sent, fits()


def _budgets(ratio: float) -> tuple[int, float]:
    """(bytes, weight) a request may have; the weight budget is the token window less the
    answer's ``max_tokens``, in bytes at ``ratio`` tokens per byte."""
    window = conf.WEBFETCH_ASSISTANT_CONTEXT_TOKENS
    if window is None:
        return conf.WEBFETCH_ASSISTANT_CONTEXT_BYTES, math.inf
    tokens = max(window - conf.WEBFETCH_ASSISTANT_MAX_TOKENS - REQUEST_OVERHEAD_TOKENS, 0)
    return conf.WEBFETCH_ASSISTANT_CONTEXT_BYTES, tokens / ratio


def tokens_per_byte(history: list[Any]) -> float:
    """The provider's reported input tokens per byte (of weight) sent, from its latest
    answer that reported usage (``DEFAULT_TOKENS_PER_BYTE`` when none did).  The request is
    measured as it was sent (trimmed the same way), not as the history stores it."""
    from pydantic_ai.messages import ModelResponse

    ratio = DEFAULT_TOKENS_PER_BYTE
    for index, message in enumerate(history):
        if not isinstance(message, ModelResponse) or index == 0:
            continue
        reported = getattr(message.usage, "input_tokens", 0) or 0
        if reported > 0:
            sent, _fits = _trim(history[:index], *_budgets(ratio))
            weight = sum(_weight(m) for m in sent)
            if weight > 0:
                ratio = reported / weight
    return ratio


def within_context_budget(history: list[Any]) -> list[Any]:
    """The history as sent (see the module docstring); raises ``ProviderFailure``
    (``context_exceeded``) when even the newest request does not fit."""
    byte_budget, weight_budget = _budgets(tokens_per_byte(history))
    sent, fits = _trim(history, byte_budget, weight_budget)
    if not fits:
        if sum(_size(m) for m in sent) <= byte_budget:
            message = (
                "The conversation is too long for the model's context window; start a new one."
            )
        else:
            message = (
                "The conversation is too long for the assistant's context budget; start a new one."
            )
        raise ProviderFailure("context_exceeded", message)
    return sent
