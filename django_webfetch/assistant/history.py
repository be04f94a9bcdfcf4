"""The history of a run: Pydantic AI messages stored as JSON, and what is sent of it.

A run's ``history`` is the whole exchange with the model so far (``ModelMessage`` objects
dumped as JSON).  :func:`settled_history` is what the next turn starts from;
:func:`within_context_budget` is what one request sends of it.
"""

from __future__ import annotations

from typing import Any, cast

from django_webfetch.conf import conf

from .bounds import omitted_note, utf8_len
from .errors import AssistantNotInstalled
from .models import Conversation, RunState
from .providers import ProviderFailure

__all__ = ["dump", "load", "require_pydantic_ai", "settled_history", "within_context_budget"]


def require_pydantic_ai() -> None:
    try:
        import pydantic_ai  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise AssistantNotInstalled() from exc


def load(history: Any) -> list[Any]:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    return list(ModelMessagesTypeAdapter.validate_python(history or []))


def dump(messages: list[Any]) -> list[Any]:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    dumped: list[Any] = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    return dumped


def settled_history(conversation: Conversation) -> list[Any]:
    """What the next turn starts from: the last run's history, made whole if it failed."""
    from pydantic_ai.messages import ModelResponse, TextPart

    last = conversation.runs.order_by("-created").first()
    if last is None:
        return []
    history = load(last.history)
    if last.state == RunState.COMPLETED:
        return history
    # A failed or cancelled turn: its question and a note, never half a tool exchange.
    base = history[: last.base_length]
    if len(history) > last.base_length:
        base.append(history[last.base_length])
    base.append(
        ModelResponse(
            parts=[
                TextPart(f"[This turn ended without an answer: {last.error_code or last.state}]")
            ]
        )
    )
    return base


def within_context_budget(history: list[Any]) -> list[Any]:
    """The history as sent: past the budget the oldest tool results are replaced by
    ``[result omitted: N bytes]``; if it still does not fit, the run fails."""
    from dataclasses import replace

    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    budget = conf.WEBFETCH_ASSISTANT_CONTEXT_BYTES

    def size(message: Any) -> int:
        return sum(
            utf8_len(str(getattr(p, "content", "") or ""))
            + utf8_len(str(getattr(p, "args", "") or ""))
            for p in message.parts
        )

    total = sum(size(m) for m in history)
    if total <= budget:
        return history
    sent = list(history)
    # The newest request (the latest results or the question) is always sent whole.
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
    if total > budget:
        raise ProviderFailure(
            "context_exceeded",
            "The conversation is too long for the assistant's context budget; start a new one.",
        )
    return sent
