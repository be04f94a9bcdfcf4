"""A tool call as an MCP task (the Tasks extension, SEP-2663), as plain Django services.

A client that declares ``io.modelcontextprotocol/tasks`` on its ``tools/call`` gets a task
instead of a wait when the call waits for a human: the call's id is the task's id, and the
durable ``ToolCall`` row is the task's whole state (no second store).  ``server.py`` turns
:class:`TaskView` values into the extension's wire shapes; no MCP type is used here.

- A task is read and withdrawn by the token that created it only (the requester, over the
  same token: ``calls.conversation_of``); to anyone else it does not exist.
- Its status is the call's state seen from the outside: ``working`` while the call waits
  for a human or runs, with a message in our words (who may approve, never who did);
  ``completed`` with the tool's result, or the refusal in our words, once it finished;
  ``cancelled`` once it was withdrawn.  ``failed`` is never used: a tool's failure is a
  result with ``isError`` (the extension reserves ``failed`` for JSON-RPC errors).
- Nothing a client sends completes or approves a task: the only transitions it can cause
  are the requester's own withdrawal (``runs.cancel``), and an approval is given by a human
  on the usual card.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.core.exceptions import ValidationError

from django_webfetch import runs
from django_webfetch.conf import conf
from django_webfetch.models import AccessToken, CallState, ToolCall

from . import paging
from .answers import Answer
from .calls import answer_for, conversation_of, outcome_text

__all__ = [
    "EXTENSION",
    "TaskView",
    "refuse_update",
    "remember_window",
    "task_of",
    "view",
    "window_of",
    "withdraw",
]

logger = logging.getLogger("django_webfetch.mcp")

#: The extension's identifier (SEP-2663).
EXTENSION = "io.modelcontextprotocol/tasks"
#: The comment a withdrawal over MCP leaves on the call.
WITHDRAWN_COMMENT = "Withdrawn by its requester over MCP (tasks/cancel)."

_WINDOW_KEY = "django_webfetch:mcp:task-window:{}"


@dataclass(frozen=True)
class TaskView:
    """A task as its creator sees it now."""

    task_id: str
    #: ``working``, ``completed`` or ``cancelled``.
    status: str
    status_message: str
    created_at: datetime
    last_updated_at: datetime
    #: Milliseconds from creation the task (the call's content) is kept at least.
    ttl_ms: int
    #: Milliseconds after which another ``tasks/get`` is worth it (``runs.poll_after``);
    #: ``None`` once the task is terminal.
    poll_interval_ms: int | None
    #: The tool's answer once ``completed`` (an error answer for a refusal).
    answer: Answer | None = None


def _own_call(token: AccessToken, task_id: Any) -> ToolCall | None:
    """The call ``task_id`` names if ``token`` created it (its user, its conversation)."""
    try:
        call = (
            ToolCall.objects.select_related("user")
            .filter(pk=str(task_id), user=token.user, conversation=conversation_of(token))
            .first()
        )
    except (ValidationError, ValueError):
        return None
    if call is None or not runs.can_read(token.user, call):
        return None
    return runs.refresh(call)


def _ttl_ms(call: ToolCall) -> int:
    """The call's content is kept until ``WEBFETCH_CALL_RETENTION_DAYS`` after it finished;
    an open call finishes at the latest when its approval expires."""
    end = call.finished_at or call.expires_at or call.updated
    kept = (end - call.created) + timedelta(days=max(conf.WEBFETCH_CALL_RETENTION_DAYS, 0))
    return max(int(kept.total_seconds() * 1000), 0)


def _working_message(call: ToolCall) -> str:
    if call.state in (CallState.PENDING, CallState.AWAITING_APPROVAL):
        group = f' (tool group "{call.group}")' if call.group else ""
        who = "" if conf.WEBFETCH_ALLOW_SELF_APPROVAL else ", and is not the requester"
        message = (
            f"The call {call.pk} is waiting for a human approval: a person of this site who "
            f"may approve tool calls{group}{who}, decides on the approval card."
        )
        if call.expires_at is not None:
            message += f" Undecided, it expires at {call.expires_at.isoformat()}."
        return message
    if call.state == CallState.APPROVED:
        return f"The call {call.pk} was approved by a human and is queued to run."
    return f"The call {call.pk} was approved by a human and is running."


def window_of(call_id: str) -> paging.Window | None:
    """The ``fetch`` window a task of ``fetch`` answers with (``None``: not a ``fetch``)."""
    raw = cache.get(_WINDOW_KEY.format(call_id))
    if not isinstance(raw, dict):
        return None
    try:
        return paging.Window(
            url=str(raw["url"]),
            mode=str(raw["mode"]),
            start=int(raw["start"]),
            length=int(raw["length"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def remember_window(call_id: str, window: paging.Window | None) -> None:
    """Keep the ``fetch`` window of a call that became a task (its arguments keep only the
    URL and the mode), for as long as the call may wait and its page may be paged over.

    Lost (another process's cache, a restart), the task answers with the whole stored
    result, as ``fetch_external_url`` gives it (fenced, at most the fence's 20,000
    characters)."""
    if window is None:
        return
    timeout = conf.WEBFETCH_APPROVAL_TTL + conf.WEBFETCH_MCP_PAGE_TTL
    cache.set(_WINDOW_KEY.format(call_id), window.__dict__.copy(), timeout)


def view(call: ToolCall, reader: Any) -> TaskView:
    """``call`` as a task for ``reader`` (its requester)."""
    base: dict[str, Any] = {
        "task_id": str(call.pk),
        "created_at": call.created,
        "last_updated_at": call.updated,
        "ttl_ms": _ttl_ms(call),
    }
    if not call.finished:
        after = runs.poll_after(call)
        return TaskView(
            status="working",
            status_message=_working_message(call),
            poll_interval_ms=int((after or runs.POLL_MIN) * 1000),
            **base,
        )
    if call.state == CallState.CANCELLED:
        result = runs.read_result(reader, call)
        return TaskView(
            status="cancelled",
            status_message=outcome_text(call, result),
            poll_interval_ms=None,
            **base,
        )
    answer = answer_for(call, window_of(str(call.pk)), reader)
    if answer.is_error:
        message = f"The call {call.pk} finished without a result ({call.state})."
    else:
        message = f"The call {call.pk} finished; its result is here."
    return TaskView(
        status="completed",
        status_message=message,
        poll_interval_ms=None,
        answer=answer,
        **base,
    )


def task_of(token: AccessToken, task_id: Any) -> TaskView | None:
    """The task ``task_id`` as ``token`` (its creator) sees it now; ``None`` for any other
    reader, an unknown id, or a malformed one."""
    call = _own_call(token, task_id)
    if call is None:
        return None
    return view(call, token.user)


def withdraw(token: AccessToken, task_id: Any) -> bool:
    """Withdraw the task's call (``runs.cancel`` by its requester): ``True`` if the task is
    the token's (the request is acknowledged whether the call could still be cancelled or
    had already started or finished: cancellation is cooperative), ``False`` if unknown."""
    call = _own_call(token, task_id)
    if call is None:
        return False
    if call.finished or call.state == CallState.RUNNING:
        logger.info(
            "MCP tasks/cancel of call %s by token %s: the call is %s, not cancelled",
            call.pk,
            token.pk,
            call.state,
        )
        return True
    try:
        runs.cancel(call, by=token.user, comment=WITHDRAWN_COMMENT)
    except runs.RunError as exc:
        # It started (or ended) between the read and the lock: too late, as above.
        logger.info(
            "MCP tasks/cancel of call %s by token %s refused: %s", call.pk, token.pk, exc.code
        )
    return True


def refuse_update(token: AccessToken, task_id: Any, fields: list[str]) -> None:
    """Record a ``tasks/update`` that tried to set a task's state (``fields``): refused."""
    logger.warning(
        "MCP tasks/update of task %r by token %s refused: a client may not set %s",
        str(task_id)[:64],
        token.pk,
        ", ".join(sorted(fields))[:200],
    )
