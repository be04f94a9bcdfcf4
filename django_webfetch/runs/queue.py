"""Queueing: starting an approved call, which Celery queue it goes to, and getting lost
messages queued again.

:func:`start` starts an approved call: on Celery (``WEBFETCH_ASYNC_RUNS``) its task is
queued once the transaction that approved it has committed; without Celery it goes to the
background runner (``runs.runner``) after the commit, or, with ``WEBFETCH_RUNNER =
"inline"``, runs right here (``dispatch.run_here``).

A broker restarted without persistence (Redis with ``save ""`` and ``appendonly no``, as
many small installs run it) forgets every queued message; a broker that is down when a
call is approved cannot take its message at all.  Either way the call is ``approved`` in
the database and nothing will run it.  The database is the source of truth, so:

- a call whose message could not be published says so: reason ``queued_retry`` on the
  still-``approved`` call (the API response shows it; it is cleared once a message is
  published);
- an ``approved`` call that waited ``WEBFETCH_REQUEUE_AFTER`` seconds (default 30) is
  queued again, by the periodic sweep and by any read of the call (a poll).  The wait
  doubles with each re-queue of the same call (a call waiting behind a long backlog gets a
  few duplicate messages, not one per sweep), capped at 8× the setting.  A duplicate
  message is harmless: ``runs.execute`` runs an approved call once (compare-and-set).

With the sweep every 15 s (the documented beat schedule) and the default 30 s, a lost
message is queued again within 45 s.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from django_webfetch.conf import conf
from django_webfetch.models import CallState, ToolCall
from django_webfetch.net.policy import Scope
from django_webfetch.tools import default_registry as tool_registry

from .dispatch import RUN_TOOL_CALL, enqueue, run_here
from .limits import runner_mode, runs_async, time_limits
from .runner import run_later

__all__ = ["QUEUED_RETRY", "enqueue_call", "mark_queued", "queue_for", "requeue_due", "start"]

logger = logging.getLogger("django_webfetch.runs")

#: Reason of an approved call whose message the broker did not take (yet).
QUEUED_RETRY = "queued_retry"
#: The longest wait between two re-queues of one call, in multiples of the setting.
MAX_BACKOFF = 8


def queue_for(tool_name: str) -> str | None:
    """``WEBFETCH_NETWORK_QUEUE`` for a tool that reaches the network, else ``None`` (the
    default queue)."""
    queue = conf.WEBFETCH_NETWORK_QUEUE
    if not queue or not tool_name:
        return None
    tool = tool_registry.get(tool_name)
    if tool is None or tool.scope == Scope.NONE:
        return None
    return queue


def mark_queued(call_id: Any, reason: str) -> None:
    """Set (``queued_retry``) or clear the queueing reason of a call still approved."""
    try:
        ToolCall.objects.filter(pk=call_id, state=CallState.APPROVED).exclude(reason=reason).update(
            reason=reason
        )
    except DatabaseError:
        logger.exception("tool call %s: could not record its queueing state", call_id)


def _wait_before_requeue(queued_at: datetime, since: datetime) -> timedelta:
    base = timedelta(seconds=conf.WEBFETCH_REQUEUE_AFTER)
    waited = max(queued_at - since, timedelta(0))
    return min(max(base, waited), base * MAX_BACKOFF)


def requeue_due(now: datetime | None = None, *, calls: Any = None, catch_up: bool = False) -> int:
    """Queue again the approved calls whose wait for a worker is over; returns how many.

    ``catch_up``: every approved call, however short its wait (a background runner that
    starts: the queue that held them may have died with its process)."""
    now = now or timezone.now()
    queryset = calls if calls is not None else ToolCall.objects.all()
    base = timedelta(0) if catch_up else timedelta(seconds=conf.WEBFETCH_REQUEUE_AFTER)
    due = queryset.filter(state=CallState.APPROVED, queued_at__lte=now - base).values_list(
        "pk", "tool", "queued_at", "decided_at", "started_at", "created"
    )[:1000]
    count = 0
    for pk, tool, queued_at, decided_at, started_at, created in list(due):
        # When the call was first queued: approved by a person, approved at request time,
        # or put back by a lost worker's retry.
        since = max(t for t in (decided_at, started_at, created) if t is not None)
        if not catch_up and now - queued_at < _wait_before_requeue(queued_at, since):
            continue
        # Compare-and-set on queued_at: of two sweeps (or polls) only one re-queues.
        won = ToolCall.objects.filter(pk=pk, state=CallState.APPROVED, queued_at=queued_at).update(
            queued_at=now
        )
        if not won:
            continue
        logger.warning(
            "tool call %s: approved %ss ago and not started; queued again",
            pk,
            int((now - since).total_seconds()),
        )
        enqueue_call(pk, tool, retrying=True)
        count += 1
    return count


def enqueue_call(
    call_id: Any, tool: str = "", *, retrying: bool = False, countdown: float | None = None
) -> bool:
    """Publish the call's task (``countdown``: not before that many seconds); ``False``
    (and reason ``queued_retry`` on the call) when the broker cannot take it: the sweep
    queues it again (``WEBFETCH_REQUEUE_AFTER``).  Without Celery the call goes to the
    background runner (after ``countdown`` seconds on a timer; a process that ends first
    leaves the call approved, and the sweep queues it again)."""
    if runner_mode() == "background":
        if countdown:
            timer = threading.Timer(countdown, run_later, args=(RUN_TOOL_CALL, str(call_id)))
            timer.daemon = True
            timer.start()
        else:
            run_later(RUN_TOOL_CALL, str(call_id))
        if retrying:
            mark_queued(call_id, "")
        return True
    soft, hard = time_limits()
    queued = enqueue(
        RUN_TOOL_CALL,
        str(call_id),
        what=f"tool call {call_id}",
        soft_time_limit=soft,
        time_limit=hard,
        queue=queue_for(tool),
        countdown=countdown,
    )
    if not queued:
        # The call stays approved, and says so; the sweep queues it again.
        mark_queued(call_id, QUEUED_RETRY)
        return False
    if retrying:
        mark_queued(call_id, "")
    return True


def start(call: ToolCall) -> ToolCall:
    """Start an approved call: queue it after the commit (Celery or the background
    runner), or run it here and now (``inline``)."""
    if call.state != CallState.APPROVED:
        return call
    if runner_mode() == "background":
        transaction.on_commit(partial(run_later, RUN_TOOL_CALL, call.pk))
        return call
    if runs_async():
        if connection.in_atomic_block:
            transaction.on_commit(partial(enqueue_call, call.pk, call.tool))
        elif not enqueue_call(call.pk, call.tool):
            call.reason = QUEUED_RETRY
        return call
    run_here(RUN_TOOL_CALL, call.pk)
    return ToolCall.objects.get(pk=call.pk)
