"""The history of a run: Pydantic AI messages stored as JSON, and what is sent of it.

A run's ``history`` is the whole exchange with the model so far (``ModelMessage`` objects
dumped as JSON).  :func:`settled_history` is what the next turn starts from;
:func:`within_context_budget` is what one request sends of it.
"""

from __future__ import annotations

from typing import Any

from .errors import AssistantNotInstalled
from .models import Conversation, RunState

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
    """The history as sent, within the context budget (bytes, and tokens where the
    provider reported usage): ``assistant.context``."""
    from .context import within_context_budget as budget

    return budget(history)
