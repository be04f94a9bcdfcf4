"""Celery tasks: thin wrappers around ``django_webfetch.runs`` and the assistant.

The only module that binds the task names (``runs.dispatch``) to Celery tasks; imported by
Celery's ``autodiscover_tasks``, never by a service (they send work by task name).  The app
never creates a Celery app of its own.  Register the periodic sweep in your beat
schedule::

    CELERY_BEAT_SCHEDULE = {
        "django_webfetch.expire_tool_calls": {
            "task": "django_webfetch.expire_tool_calls",
            "schedule": 15.0,
        },
    }
"""

from __future__ import annotations

import os
from typing import Any

try:
    from celery import shared_task
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from .exceptions import WebFetchImproperlyInstalled

    raise WebFetchImproperlyInstalled("celery", "celery") from exc

from django.db import InterfaceError, OperationalError

from . import runs
from .assistant.loop import advance
from .assistant.recover import sweep_all
from .runs.dispatch import ADVANCE_ASSISTANT_RUN, RUN_TOOL_CALL, SWEEP

__all__ = ["advance_assistant_run", "expire_tool_calls", "run_tool_call"]


@shared_task(
    name=RUN_TOOL_CALL,
    bind=True,
    # Acknowledge only when done: a worker killed mid-run leaves the message to be
    # delivered again; runs.execute decides what a redelivery means (idempotent).
    acks_late=True,
    reject_on_worker_lost=True,
    # A database that is briefly unavailable (SQLite "database is locked", a failover):
    # try again later rather than leave an approved call waiting for the sweep.
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=8,
    ignore_result=True,
)
def run_tool_call(self: Any, call_id: str) -> str:
    request = self.request
    delivery = getattr(request, "delivery_info", None) or {}
    worker = f"{getattr(request, 'hostname', None) or 'celery'}:{os.getpid()}"
    outcome = runs.execute(call_id, redelivered=bool(delivery.get("redelivered")), worker=worker)
    return outcome.action


@shared_task(
    name=SWEEP,
    ignore_result=True,
)
def expire_tool_calls() -> dict[str, int]:
    """Expire approval requests past their time, recover calls of lost workers, queue
    again approved calls whose message went missing."""
    return sweep_all()


@shared_task(
    name=ADVANCE_ASSISTANT_RUN,
    bind=True,
    # As run_tool_call: a killed worker's message is delivered again, and advance() is
    # idempotent (the run's lease and the calls' references keep it from repeating work).
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=8,
    ignore_result=True,
)
def advance_assistant_run(self: Any, run_id: str) -> str:
    """One provider request of an assistant run (and the tool calls it asks for)."""
    worker = f"{getattr(self.request, 'hostname', None) or 'celery'}:{os.getpid()}"
    outcome = advance(run_id, worker=worker, max_provider_calls=1)
    return outcome.action
