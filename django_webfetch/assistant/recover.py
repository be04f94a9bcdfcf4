"""Never stuck: the sweep (and, on read, :func:`refresh`) resumes runs whose worker was
lost and runs whose calls all finished without resuming them (a lost message)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall

from .calls import call_position, run_calls
from .dispatch import dispatch
from .models import AssistantRun, RunState
from .state import lost

__all__ = ["STALE_QUEUE_AFTER", "STALE_RUNNER_QUEUE_AFTER", "refresh", "sweep"]

#: A run queued this long ago and still not taken by a worker is queued again by the sweep.
STALE_QUEUE_AFTER = timedelta(minutes=10)
#: The same on the background runner: its queue is in memory, lost with the process (a
#: duplicate is harmless: the run's lease admits one worker).
STALE_RUNNER_QUEUE_AFTER = timedelta(seconds=60)


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


def sweep(now: datetime | None = None) -> dict[str, int]:
    """Never stuck: resume runs whose worker was lost (or fail them ``worker_lost``), and
    runs whose calls all finished without resuming them (a lost message)."""
    now = now or timezone.now()
    stale_after = STALE_QUEUE_AFTER if runs.runs_async() else STALE_RUNNER_QUEUE_AFTER
    recovered = 0
    resumed = 0
    # Expiry of the calls (their final transition resumes the run).
    runs.expire_due(now, calls=ToolCall.objects.filter(run__isnull=False))
    lost = AssistantRun.objects.filter(
        state__in=[RunState.RUNNING, RunState.WAITING_FOR_APPROVAL], lease_expires_at__lte=now
    ).values_list("pk", flat=True)[:1000]
    for run_id in list(lost):
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
            and run.queued_at <= now - stale_after
        )
        if (step_calls and all(c.finished for c in step_calls)) or stale_queue:
            AssistantRun.objects.filter(pk=run.pk, version=run.version).update(queued_at=now)
            resumed += 1
            dispatch(run.pk)
    return {"assistant_recovered": recovered, "assistant_resumed": resumed}


def sweep_all(now: datetime | None = None) -> dict[str, int]:
    """The periodic task's work: the tool calls' sweep, then the assistant runs'."""
    from dataclasses import asdict

    report: dict[str, int] = asdict(runs.sweep(now))
    report.update(sweep(now))
    return report
