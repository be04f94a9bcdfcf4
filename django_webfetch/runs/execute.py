"""Running an approved call once: take it (compare-and-set), run the tool under a lease
that the process's heartbeat renews (``durable.keeper``) until the attempt's step
deadline, and record the result even through a brief database outage.

Runs happen in-process (synchronously, right where the call was approved) unless
``WEBFETCH_ASYNC_RUNS`` is on; then the ``django_webfetch.run_tool_call`` Celery task runs
them on a worker once the transaction that approved them has committed (``runs.queue``).
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from django_webfetch.models import CallState, ToolCall
from django_webfetch.models.outage import survive_outage
from django_webfetch.plugins.budget import Lease
from django_webfetch.plugins.services import instance_for
from django_webfetch.tools import ToolContext, ToolResult
from django_webfetch.tools import default_registry as tool_registry

from .destinations import Deferred, reserve
from .durable import Outcome, keeper, worker_label
from .errors import InvalidTransition
from .limits import lease_seconds, step_deadline_seconds, step_seconds
from .recover import expire_one, recover_one
from .state import expired, lost, transition

__all__ = [
    "ExecuteOutcome",
    "execute",
    "execute_in_process",
    "finish",
    "finish_surviving_the_database",
]

logger = logging.getLogger("django_webfetch.runs")


class ExecuteOutcome(Outcome):
    """What :func:`execute` did: ``action`` is ``ran``, ``noop``, ``busy``, ``recovered``,
    ``discarded`` or ``deferred`` (its destination was full; queued again).
    ``retry_after``: when another attempt holds the call, the seconds until its lease runs
    out; when deferred, the countdown."""


def execute(
    call_id: uuid.UUID | str, *, redelivered: bool = False, worker: str = ""
) -> ExecuteOutcome:
    """Run an approved call once.  Idempotent: a finished call, a call that is not
    approved, or one that another live attempt holds is left alone.  Never raises for a
    tool's failure (the result records it).

    A call whose destination host has all its slots in use (``runs.destinations``) is not
    taken: on Celery it is queued again with a countdown (``deferred``)."""
    try:
        slot = reserve(call_id)
    except Deferred as deferred:
        return ExecuteOutcome("deferred", CallState.APPROVED, retry_after=deferred.countdown)
    refusal = slot if isinstance(slot, ToolResult) else None
    try:
        return _execute(call_id, redelivered=redelivered, worker=worker, refusal=refusal)
    finally:
        if isinstance(slot, Lease):
            slot.release()


def _execute(
    call_id: uuid.UUID | str, *, redelivered: bool, worker: str, refusal: ToolResult | None
) -> ExecuteOutcome:
    taken = _take(call_id, redelivered=redelivered, worker=worker)
    if isinstance(taken, ExecuteOutcome):
        return taken
    call = taken
    if refusal is not None:
        return finish_surviving_the_database(call.pk, call.attempts, refusal)
    attempt = call.attempts
    context = ToolContext(
        user=call.user,
        call_id=str(call.pk),
        # Only a human decision is an approval.  A call approved at once (no approval
        # needed when it was requested) is checked again against the live rule: an
        # operator who turned the skip flag off or emptied the allowlist while it waited
        # in the queue (or before a sweep re-queued it) gets ``approval_required``.
        approved=bool(call.requires_approval),
        plugin_instance=_plugin_instance(call.tool),
    )
    try:
        result = _run_surviving_the_database(call, context)
    except BaseException as exc:  # run_tool never raises; a time limit or a kill may
        if not isinstance(exc, Exception):
            raise
        logger.exception("tool call %s: run_tool raised", call.pk)
        result = ToolResult.failure("internal_error", "The tool failed unexpectedly.")
    return finish_surviving_the_database(call.pk, attempt, result)


#: A tool stopped by the database (not by its own failure) is run again this often, at
#: most, once the database answers again (within the same attempt and lease).
DATABASE_RERUNS = 3


def _run_surviving_the_database(call: ToolCall, context: ToolContext) -> ToolResult:
    """Run the tool; when the database went away under it (a restart, a failover), wait
    until it answers again and run the tool once more, in the same attempt, instead of
    failing the call (``internal_error``) or leaving it to the sweep after its lease.

    The tool's writes after its request (the decision row, the text it keeps) wait for
    the database themselves (``models.outage``), so what reaches here is a read before
    the request or between two hops: running the tool again repeats at most a read-only
    guarded request."""
    for rerun in range(DATABASE_RERUNS + 1):
        try:
            return tool_registry.run(
                call.tool,
                dict(call.arguments),
                user=call.user,
                context=context,
                raise_database_errors=rerun < DATABASE_RERUNS,
            )
        except (OperationalError, InterfaceError):
            logger.warning("tool call %s: database unavailable while it ran; waiting", call.pk)
            survive_outage(lambda: ToolCall.objects.filter(pk=call.pk).exists(), what="a ping")
    raise AssertionError("unreachable")  # pragma: no cover


def _take(call_id: uuid.UUID | str, *, redelivered: bool, worker: str) -> ToolCall | ExecuteOutcome:
    """Move the approved call to ``running`` under a fresh lease, or say why not."""
    now = timezone.now()
    try:
        call = ToolCall.objects.get(pk=call_id)
    except (ToolCall.DoesNotExist, ValueError, ValidationError):
        logger.warning("tool call %s does not exist", call_id)
        return ExecuteOutcome("noop", "")
    if call.state == CallState.RUNNING:
        if not lost(call, now):
            # Another attempt holds the call (a duplicate message, or a redelivery that
            # came before the lease ran out): leave it; the sweep recovers it if that
            # attempt is lost.
            assert call.lease_expires_at is not None
            wait = max((call.lease_expires_at - now).total_seconds(), 0.0)
            logger.info(
                "tool call %s is held by %s (redelivered=%s)", call.pk, call.worker, redelivered
            )
            return ExecuteOutcome("busy", call.state, retry_after=wait)
        # The attempt's worker is gone: retry here (once), or fail with worker_lost.
        recovered = recover_one(call.pk, dispatch=False)
        if recovered is None or recovered.state != CallState.APPROVED:
            return ExecuteOutcome("recovered", recovered.state if recovered else call.state)
        call = recovered
    if call.state == CallState.AWAITING_APPROVAL and expired(call, now):
        expire_one(call.pk)
        return ExecuteOutcome("noop", CallState.EXPIRED)
    if call.state != CallState.APPROVED:
        return ExecuteOutcome("noop", call.state)

    try:
        call = transition(
            call,
            CallState.RUNNING,
            attempts=call.attempts + 1,
            started_at=now,
            lease_expires_at=now + timedelta(seconds=lease_seconds()),
            step_deadline=now + timedelta(seconds=step_deadline_seconds()),
            worker=keeper.hold(worker or worker_label()),
        )
    except (InvalidTransition, ToolCall.DoesNotExist):
        # Another worker took it (a duplicate message), or it was cancelled meanwhile.
        current = ToolCall.objects.filter(pk=call.pk).values_list("state", flat=True).first()
        return ExecuteOutcome("noop", current or "")
    return call


def finish_surviving_the_database(call_id: Any, attempt: int, result: ToolResult) -> ExecuteOutcome:
    """:func:`finish`, retried while the database is unavailable (a restart, a failover) for
    as long as a healthy attempt may last: the result is in memory, and losing it would
    make the sweep run the call a second time once the lease ran out."""
    deadline = time.monotonic() + step_seconds()
    delay = 0.25
    while True:
        try:
            return finish(call_id, attempt, result)
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block or time.monotonic() + delay > deadline:
                raise
            logger.warning("tool call %s: database unavailable, result kept; retrying", call_id)
            connection.close()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _plugin_instance(tool_name: str) -> Any:
    """The plugin instance a plugin's tool runs with (DESIGN.md §8); ``None`` for others."""
    plugin = getattr(tool_registry.get(tool_name), "plugin", None)
    if not isinstance(plugin, str):
        return None
    return instance_for(plugin)


def finish(call_id: Any, attempt: int, result: ToolResult) -> ExecuteOutcome:
    def check(call: ToolCall) -> None:
        if call.attempts != attempt:
            raise InvalidTransition(call.state, "finished", "a newer attempt owns the call")

    target = CallState.SUCCEEDED if result.ok else CallState.FAILED
    try:
        call = transition(
            call_id, target, check=check, reason=result.error or "", result=result.to_dict()
        )
    except (InvalidTransition, ToolCall.DoesNotExist):
        logger.warning("tool call %s: result of attempt %s discarded", call_id, attempt)
        current = ToolCall.objects.filter(pk=call_id).values_list("state", flat=True).first()
        return ExecuteOutcome("discarded", current or "")
    return ExecuteOutcome("ran", call.state)


def execute_in_process(call_id: uuid.UUID | str) -> ExecuteOutcome:
    """The in-process handler of ``django_webfetch.run_tool_call`` (bound in ``apps.py``)."""
    return execute(call_id, worker=f"in-process:{worker_label()}")
