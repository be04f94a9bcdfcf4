"""Never stuck: the sweep (and, on read, :func:`refresh`) resumes runs whose worker was
lost and runs whose calls all finished without resuming them (a lost message).

A run queued and not taken by a worker (its message lost with the broker, or with the
process whose background runner held it) is queued again as an approved call is
(``runs/queue.py``): after ``WEBFETCH_REQUEUE_AFTER`` seconds (30), the wait doubling with
each re-queue of the same step, capped at 8x.  A duplicate is harmless: the run's lease
admits one worker.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from django_webfetch import runs
from django_webfetch.conf import conf
from django_webfetch.models import CallState, ToolCall
from django_webfetch.runs.queue import MAX_BACKOFF
from django_webfetch.runs.recover import held_by_the_dead, out_of_time

from .calls import call_position, run_calls
from .dispatch import dispatch
from .models import AssistantRun, RunState
from .state import lost

__all__ = ["refresh", "requeue_wait", "sweep"]


def requeue_wait(run: AssistantRun) -> timedelta:
    """How long a queued run waits for a worker before the sweep queues it again:
    ``WEBFETCH_REQUEUE_AFTER``, doubled by each re-queue since the step was queued
    (``updated``: the sweep's re-queue does not touch it), at most 8x."""
    base = timedelta(seconds=conf.WEBFETCH_REQUEUE_AFTER)
    if run.queued_at is None:
        return base
    waited = max(run.queued_at - run.updated, timedelta(0))
    return min(max(base, waited), base * MAX_BACKOFF)


def refresh(run: AssistantRun) -> AssistantRun:
    """Enforce on read what the sweep enforces (for installations without a periodic
    task): expire the run's due approval requests (their final transition resumes the run),
    and resume a run whose worker was lost."""
    if run.finished:
        return run
    due = [
        c
        for c in run_calls(run)
        if c.state == CallState.AWAITING_APPROVAL
        and c.expires_at is not None
        and c.expires_at <= timezone.now()
    ]
    for call in due:
        runs.refresh(call)
    if lost(run):
        dispatch(run.pk)
    return AssistantRun.objects.get(pk=run.pk)


def sweep(now: datetime | None = None, catch_up: bool = False) -> dict[str, int]:
    """Never stuck: resume runs whose worker was lost (or fail them ``worker_lost``), and
    runs whose calls all finished without resuming them (a lost message).

    ``catch_up`` (the first sweep of a background runner): queue again every queued run
    at once, whatever its wait (its queue may have died with its process)."""
    now = now or timezone.now()
    recovered = 0
    resumed = 0
    # Expiry of the calls (their final transition resumes the run).
    runs.expire_due(now, calls=ToolCall.objects.filter(run__isnull=False))
    open_runs = AssistantRun.objects.filter(
        state__in=[RunState.RUNNING, RunState.WAITING_FOR_APPROVAL]
    )
    lost = list(out_of_time(open_runs, now).values_list("pk", flat=True)[:1000])
    # A holder known dead (a process of this machine killed mid-step) is not waited for.
    lost += held_by_the_dead(open_runs, now)
    for run_id in lost:
        recovered += 1
        dispatch(run_id)
    idle = AssistantRun.objects.filter(
        state__in=[RunState.RUNNING, RunState.WAITING_FOR_APPROVAL], lease_expires_at__isnull=True
    )[:1000]
    for run in list(idle):
        calls = run_calls(run)
        step_calls = [c for c in calls if (call_position(c) or (-1, 0))[0] == run.step_count]
        stale_queue = (
            run.state == RunState.RUNNING
            and not step_calls
            and run.queued_at is not None
            and (catch_up or run.queued_at <= now - requeue_wait(run))
        )
        if (step_calls and all(c.finished for c in step_calls)) or stale_queue:
            AssistantRun.objects.filter(pk=run.pk, version=run.version).update(queued_at=now)
            resumed += 1
            dispatch(run.pk)
    return {"assistant_recovered": recovered, "assistant_resumed": resumed}


def sweep_all(now: datetime | None = None, catch_up: bool = False) -> dict[str, int]:
    """The periodic task's work: the tool calls' sweep, then the assistant runs'
    (``catch_up``: see :func:`sweep`; the background runner's first sweep)."""
    from dataclasses import asdict

    report: dict[str, int] = asdict(runs.sweep(now, catch_up))
    report.update(sweep(now, catch_up))
    return report
