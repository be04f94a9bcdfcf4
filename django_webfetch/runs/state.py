"""The one place that changes a tool call's state, and the signals it sends.

Every change of ``ToolCall.state`` goes through :func:`transition`, which locks the row
(``select_for_update``) and then writes the new state with a compare-and-set ``UPDATE``
(``WHERE state = <the state it read>``).  The lock serialises competing writers on
PostgreSQL/MySQL; the compare-and-set keeps the guarantee on SQLite, where
``select_for_update`` is a no-op: two admins approving at once, or an approval racing the
expiry, end in exactly one outcome and the other gets :class:`InvalidTransition`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from django_webfetch.models import CallState, ToolCall
from django_webfetch.models.calls import FINISHED_STATES, TRANSITIONS

from .bounds import make_storable
from .durable import lease_lost, retry_while_locked
from .errors import InvalidTransition

__all__ = [
    "call_finished",
    "call_id_of",
    "call_transitioned",
    "expired",
    "lost",
    "transition",
]

logger = logging.getLogger("django_webfetch.runs")

#: Sent inside the transaction of each state change: ``call`` (the updated row) and
#: ``previous`` (the state it left).  A receiver with side effects defers them with
#: ``transaction.on_commit`` (the django CMS integration mails approvers so).
call_transitioned = Signal()

#: Sent when a call reaches a finished state, inside the transaction that finishes it:
#: ``call_finished.send(sender=ToolCall, call_id=..., run_id=..., conversation=...)``
#: (``run_id``: the assistant run that asked for it, ``ToolCall.run``, or ``None``; the
#: ``conversation`` is the caller's free text, never a reference).  A receiver that acts on
#: it defers the work with ``transaction.on_commit``; receivers' errors are logged, never
#: raised.  The assistant resumes the run that asked for the call.
call_finished = Signal()


def call_id_of(call: ToolCall | uuid.UUID | str) -> Any:
    return call.pk if isinstance(call, ToolCall) else call


def expired(call: ToolCall, now: datetime | None = None) -> bool:
    """An approval request past its time (it is expired on the next write or read)."""
    return (
        call.state == CallState.AWAITING_APPROVAL
        and call.expires_at is not None
        and call.expires_at <= (now or timezone.now())
    )


def lost(call: ToolCall, now: datetime | None = None) -> bool:
    """A running call whose attempt's lease ran out, whose step outlived its deadline, or
    whose holder is known dead (``durable.holder_gone``): its worker is gone."""
    return call.state == CallState.RUNNING and lease_lost(
        call.lease_expires_at, call.worker, now, call.step_deadline
    )


def transition(
    call: ToolCall | uuid.UUID | str,
    target: str,
    *,
    check: Callable[[ToolCall], None] | None = None,
    **changes: Any,
) -> ToolCall:
    """Move a call to ``target`` under a row lock; return the updated call.

    ``check(call)`` runs under the lock and may raise to refuse.  Raises
    ``ToolCall.DoesNotExist`` and :class:`InvalidTransition` (also when another writer won
    a race for the same call).  On SQLite a lost race is read again (it now sees the
    winner's state).
    """
    call_id = call_id_of(call)
    return retry_while_locked(lambda: _transition(call_id, target, check=check, changes=changes))


def _transition(
    call_id: Any,
    target: str,
    *,
    check: Callable[[ToolCall], None] | None,
    changes: Mapping[str, Any],
) -> ToolCall:
    with transaction.atomic():
        call = ToolCall.objects.select_for_update().get(pk=call_id)
        current = call.state
        if target not in TRANSITIONS.get(current, frozenset()):
            raise InvalidTransition(current, target)
        if check is not None:
            check(call)
        values: dict[str, Any] = {**changes, "state": target, "updated": timezone.now()}
        if values.get("result") is not None:
            # A tool's output: a NUL or a lone surrogate in it, or a NaN, would be refused
            # by PostgreSQL (DataError) or by the JSON renderer; it is repaired, not lost.
            values["result"] = make_storable(values["result"])
        if target in FINISHED_STATES:
            values.setdefault("finished_at", values["updated"])
            values.setdefault("lease_expires_at", None)
        won = ToolCall.objects.filter(pk=call.pk, state=current, attempts=call.attempts).update(
            **values
        )
        if won != 1:
            raise InvalidTransition(current, target, "the call was changed concurrently")
        for name, value in values.items():
            setattr(call, name, value)
        _announce(call, current)
        if target in FINISHED_STATES:
            for receiver, error in call_finished.send_robust(
                sender=ToolCall,
                call_id=call.pk,
                run_id=call.run_id,
                conversation=call.conversation,
            ):
                if isinstance(error, Exception):
                    logger.error("call_finished receiver %r failed: %r", receiver, error)
    logger.info("tool call %s: %s -> %s", call.pk, current, target)
    return call


def _announce(call: ToolCall, previous: str) -> None:
    # A receiver's failure must not fail the transition.
    for receiver, response in call_transitioned.send_robust(
        sender=ToolCall, call=call, previous=previous
    ):
        if isinstance(response, Exception):
            logger.error(
                "call_transitioned receiver %r failed: %r", receiver, response, exc_info=response
            )
