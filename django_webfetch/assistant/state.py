"""The one place that changes an assistant run, its lease and its event log.

Every change of ``AssistantRun.state`` (and every write of its history) goes through
:func:`transition`: the row is locked (``select_for_update``) and written with a
compare-and-set on ``version``, so a cancel racing a worker, or two resumptions racing each
other, end in exactly one outcome (the loser gets :class:`InvalidRunTransition`).

One worker advances a run at a time: it takes the run's *lease* (``lease_expires_at``) with
a compare-and-set; its process's heartbeat (``durable.keeper``) renews it every few seconds,
and every write (:func:`renew`) renews it and the step's deadline (``step_deadline``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, OperationalError, transaction
from django.utils import timezone

from django_webfetch import metrics, runs
from django_webfetch.conf import conf
from django_webfetch.runs.durable import lease_lost, retry_while_locked

from . import watch
from .errors import InvalidRunTransition
from .models import RUN_FINISHED_STATES, RUN_TRANSITIONS, AssistantRun, RunEvent, RunState

__all__ = [
    "event",
    "events_since",
    "fail",
    "lease_fields",
    "lease_seconds",
    "lost",
    "renew",
    "step_seconds",
    "transition",
]

logger = logging.getLogger("django_webfetch.assistant")


def lease_seconds() -> float:
    """How long a worker owns a run it advances without a renewal
    (``WEBFETCH_LEASE_SECONDS``): its process's heartbeat (``durable.keeper``) renews it
    while the process lives, so past it the worker is dead, wherever it ran."""
    return runs.lease_seconds()


def step_seconds() -> float:
    """The longest a step may go without progress: one provider request (plus, inline,
    one tool call), with room to spare.  The step deadline is set this far ahead when a
    step starts and whenever it makes progress (a streamed text, a turn waited for);
    past it the step is stuck and its worker counts as lost, alive or not."""
    tool = 0.0 if runs.off_request() else runs.step_seconds()
    return conf.WEBFETCH_ASSISTANT_TIMEOUT + tool + 5.0


def lease_fields(now: datetime | None = None) -> dict[str, Any]:
    """A fresh lease and step deadline (the values written when a step starts or moves)."""
    now = now or timezone.now()
    return {
        "lease_expires_at": now + timedelta(seconds=lease_seconds()),
        "step_deadline": now + timedelta(seconds=step_seconds()),
    }


def lost(run: AssistantRun, now: datetime | None = None) -> bool:
    """The run's lease was taken and ran out, its step outlived its deadline, or its
    holder is known dead (``durable.holder_gone``): its worker is gone."""
    return lease_lost(run.lease_expires_at, run.worker, now, run.step_deadline)


def _run_id(run: AssistantRun | uuid.UUID | str) -> Any:
    return run.pk if isinstance(run, AssistantRun) else run


def transition(
    run: AssistantRun | uuid.UUID | str,
    target: str,
    *,
    check: Callable[[AssistantRun], None] | None = None,
    version: int | None = None,
    **changes: Any,
) -> AssistantRun:
    """Move a run to ``target`` under a row lock and a compare-and-set; return it.

    ``version``: refuse unless the run is still at that version (nothing wrote it since
    the caller read it).  Raises ``AssistantRun.DoesNotExist`` and
    :class:`InvalidRunTransition`.
    """
    run_id = _run_id(run)
    return retry_while_locked(
        lambda: _transition(run_id, target, check=check, version=version, changes=changes)
    )


def _transition(
    run_id: Any,
    target: str,
    *,
    check: Callable[[AssistantRun], None] | None,
    version: int | None,
    changes: Mapping[str, Any],
) -> AssistantRun:
    with transaction.atomic():
        run = AssistantRun.objects.select_for_update().get(pk=run_id)
        current = run.state
        if target not in RUN_TRANSITIONS.get(current, frozenset()):
            raise InvalidRunTransition(current, target)
        if version is not None and run.version != version:
            raise InvalidRunTransition(current, target, "the run was changed concurrently")
        if check is not None:
            check(run)
        values: dict[str, Any] = {
            **changes,
            "state": target,
            "version": run.version + 1,
            "updated": timezone.now(),
        }
        if target in RUN_FINISHED_STATES:
            values.setdefault("finished_at", values["updated"])
            values["lease_expires_at"] = None
        won = AssistantRun.objects.filter(pk=run.pk, version=run.version).update(**values)
        if won != 1:
            raise InvalidRunTransition(current, target, "the run was changed concurrently")
        for name, value in values.items():
            setattr(run, name, value)
    if current != target:
        logger.info("assistant run %s: %s -> %s", run.pk, current, target)
        if target in RUN_FINISHED_STATES:
            metrics.assistant_run_finished(run.provider, target)
    return run


def renew(run: AssistantRun, **changes: Any) -> AssistantRun:
    """Write ``changes`` and renew the lease and the step deadline (refused if anyone
    else wrote the run)."""
    return transition(run, RunState.RUNNING, version=run.version, **lease_fields(), **changes)


def fail(run: AssistantRun, code: str, message: str) -> AssistantRun | None:
    """End the run ``failed`` with ``code``; ``None`` when it can no longer fail."""
    try:
        # One commit: a reader that sees the run finished sees its "failed" event too (a
        # stream ends at a finished run with no new event).
        with transaction.atomic():
            run = transition(
                run, RunState.FAILED, error_code=code[:64], error_message=message[:500]
            )
            event(run.pk, "failed", {"code": code, "message": message[:500]})
    except (InvalidRunTransition, AssistantRun.DoesNotExist):
        return None
    return run


def event(run_id: Any, kind: str, data: Mapping[str, Any] | None = None) -> None:
    """Append an event to the run's log (numbered 1, 2, ... per run).  Two writers racing
    for the same number: the loser (a lock error, or the unique number taken) tries again."""

    def append() -> None:
        with transaction.atomic():
            row = (
                AssistantRun.objects.select_for_update()
                .filter(pk=run_id)
                .values_list("last_event", flat=True)
                .first()
            )
            if row is None:
                return
            seq = row + 1
            AssistantRun.objects.filter(pk=run_id).update(last_event=seq)
            RunEvent.objects.create(run_id=run_id, seq=seq, kind=kind, data=dict(data or {}))

    retry_while_locked(append, errors=(OperationalError, IntegrityError), sqlite_only=False)
    # Waiters of this process read the run at once (others within ``watch.POLL_INTERVAL``).
    transaction.on_commit(watch.poke)


def events_since(run: AssistantRun, since: int, *, limit: int = 200) -> list[RunEvent]:
    return list(run.events.filter(seq__gt=since).order_by("seq")[:limit])
