"""Recovery: expiry of approval requests, calls of lost workers, lost messages, retention.

The periodic task (:func:`sweep`) does all of it; :func:`refresh` does it for one call on
read, so that an installation without a beat schedule still never shows a stuck call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from django_webfetch import retention
from django_webfetch.models import CallState, ToolCall
from django_webfetch.tools import Effect, ToolResult
from django_webfetch.tools import default_registry as tool_registry

from .durable import holder_gone, local_marker
from .errors import InvalidTransition
from .limits import MAX_ATTEMPTS, off_request
from .queue import requeue_due, start
from .state import expired, lost, transition

__all__ = [
    "SweepReport",
    "expire_due",
    "expire_one",
    "held_by_the_dead",
    "out_of_time",
    "prune_calls",
    "recover_lost",
    "recover_one",
    "refresh",
    "sweep",
]

logger = logging.getLogger("django_webfetch.runs")


def expire_one(call_id: Any) -> ToolCall | None:
    def check(call: ToolCall) -> None:
        if not expired(call):
            raise InvalidTransition(call.state, CallState.EXPIRED, "not due")

    result = ToolResult.failure("approval_expired", "Nobody approved this tool call in time.")
    try:
        return transition(
            call_id,
            CallState.EXPIRED,
            check=check,
            reason="approval_expired",
            result=result.to_dict(),
        )
    except (InvalidTransition, ToolCall.DoesNotExist):
        return None


def expire_due(now: datetime | None = None, *, calls: Any = None) -> int:
    """Expire every call whose approval request is past its time; returns how many."""
    queryset = calls if calls is not None else ToolCall.objects.all()
    due = queryset.filter(state=CallState.AWAITING_APPROVAL, expires_at__lte=now or timezone.now())
    return sum(
        1
        for call_id in list(due.values_list("pk", flat=True)[:1000])
        if expire_one(call_id) is not None
    )


def _may_retry(call: ToolCall) -> bool:
    if call.attempts >= MAX_ATTEMPTS or not off_request():
        return False
    tool = tool_registry.get(call.tool)
    # A write may have happened before the worker died: never repeat it.
    return tool is not None and tool.effect is Effect.READ


class _NoRetryLeft(InvalidTransition):
    pass


def recover_one(call_id: Any, *, dispatch: bool = True) -> ToolCall | None:
    """A running call whose worker was lost (lease run out, step deadline passed, holder
    known dead): retry it once, else fail it (``worker_lost``)."""

    def check_retry(call: ToolCall) -> None:
        if not lost(call):
            raise InvalidTransition(call.state, CallState.APPROVED, "the lease has not expired")
        if not _may_retry(call):
            raise _NoRetryLeft(call.state, CallState.APPROVED, "no retry left")

    def check_fail(call: ToolCall) -> None:
        if not lost(call):
            raise InvalidTransition(call.state, CallState.FAILED, "the lease has not expired")

    try:
        try:
            call = transition(
                call_id,
                CallState.APPROVED,
                check=check_retry,
                queued_at=timezone.now(),
                lease_expires_at=None,
                worker="",
            )
        except _NoRetryLeft:
            failure = ToolResult.failure("worker_lost", "The worker running this call was lost.")
            call = transition(
                call_id,
                CallState.FAILED,
                check=check_fail,
                reason="worker_lost",
                result=failure.to_dict(),
            )
            logger.warning("tool call %s: worker lost, failed", call.pk)
            return call
    except (InvalidTransition, ToolCall.DoesNotExist):
        return None
    logger.warning("tool call %s: worker lost, retrying (attempt %s done)", call.pk, call.attempts)
    return start(call) if dispatch else call


def out_of_time(queryset: Any, now: datetime) -> Any:
    """The records in ``queryset`` (running) whose lease ran out (their process is dead,
    wherever it ran) or whose step outlived its deadline (stuck, alive or not)."""
    return queryset.filter(
        Q(lease_expires_at__lte=now) | Q(lease_expires_at__isnull=False, step_deadline__lte=now)
    )


def held_by_the_dead(queryset: Any, now: datetime) -> list[Any]:
    """The ids of the records in ``queryset`` (running, lease not run out) whose holder is a
    process of this machine that is known dead (``durable.holder_gone``)."""
    marker = local_marker()
    if marker is None:
        return []
    held = queryset.filter(lease_expires_at__gt=now, worker__contains=marker)
    return [pk for pk, worker in held.values_list("pk", "worker")[:1000] if holder_gone(worker)]


def recover_lost(now: datetime | None = None, *, calls: Any = None) -> int:
    """Recover running calls whose lease ran out or whose holder is known dead."""
    now = now or timezone.now()
    queryset = (calls if calls is not None else ToolCall.objects.all()).filter(
        state=CallState.RUNNING
    )
    due = list(out_of_time(queryset, now).values_list("pk", flat=True)[:1000])
    due += held_by_the_dead(queryset, now)
    return sum(1 for call_id in due if recover_one(call_id) is not None)


def _requeue_stale(now: datetime | None = None, *, catch_up: bool = False) -> int:
    """Queue again approved calls that waited past ``WEBFETCH_REQUEUE_AFTER``
    (``runs/queue.py``); ``catch_up``: all of them."""
    if not off_request():
        return 0
    return requeue_due(now, catch_up=catch_up)


@dataclass(frozen=True)
class SweepReport:
    expired: int
    recovered: int
    requeued: int
    #: Rows the retention policy deleted or cleared (``django_webfetch.retention``).
    pruned: int = 0


def sweep(now: datetime | None = None, catch_up: bool = False) -> SweepReport:
    """The periodic task's work: expire due approvals, recover calls of lost workers,
    queue again approved calls whose task message went missing, and apply the retention
    policy (``retention.prune``, at most ``SWEEP_BATCH`` rows per rule).

    ``catch_up`` (the first sweep of a background runner): queue again every approved
    call at once, not only those that waited ``WEBFETCH_REQUEUE_AFTER``: the in-memory
    queue that held them may have died with its process (a duplicate is harmless)."""
    return SweepReport(
        expire_due(now),
        recover_lost(now),
        _requeue_stale(now, catch_up=catch_up),
        retention.prune(now, limit=retention.SWEEP_BATCH).total,
    )


def prune_calls(
    now: datetime | None = None, *, days: int | None = None, dry_run: bool = False
) -> int:
    """Drop the content of calls that finished more than ``days`` ago (default
    ``WEBFETCH_CALL_RETENTION_DAYS``); return how many: the ``calls`` rule of
    ``django_webfetch.retention``, alone."""
    return retention.prune_calls(now, days=days, dry_run=dry_run)


def refresh(call: ToolCall) -> ToolCall:
    """Enforce expiry and worker loss on read; return the current row."""
    if expired(call):
        expire_one(call.pk)
    elif lost(call):
        recover_one(call.pk)
    elif off_request() and call.state == CallState.APPROVED:
        # A poll is a sweep of this one call: a message lost with the broker is queued
        # again even where no beat runs.
        if not requeue_due(calls=ToolCall.objects.filter(pk=call.pk)):
            return call
    else:
        return call
    return ToolCall.objects.get(pk=call.pk)
