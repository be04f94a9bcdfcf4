"""Advancing a run in the background: sent by task name after the current commit.

On Celery (``WEBFETCH_ASYNC_RUNS``) the ``django_webfetch.advance_assistant_run`` task is
queued; without Celery (the embedded default) the background runner (``runs.runner``) runs
the handler bound to the same name after the commit, off the request (``apps.py`` binds
``loop.advance_in_process``); with ``WEBFETCH_RUNNER = "inline"`` it runs right after the
commit, in the request (tests).

:func:`follow_up` is the door for the follow-up of a provider request handed to the
provider I/O loop (``loop``): reserved when the request is handed off, sent by name when it
ends, to the background runner of this process or, on Celery, as a task any worker takes.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, Protocol

from django.db import transaction

from django_webfetch import runs
from django_webfetch.conf import conf
from django_webfetch.exceptions import WebFetchImproperlyInstalled
from django_webfetch.runs.dispatch import ADVANCE_ASSISTANT_RUN, enqueue
from django_webfetch.runs.runner import run_later, runner

__all__ = ["FollowUp", "dispatch", "follow_up"]

logger = logging.getLogger("django_webfetch.assistant")


def _limits() -> dict[str, float]:
    soft = conf.WEBFETCH_ASSISTANT_TIMEOUT + runs.time_limits()[0] + 10.0
    return {"soft_time_limit": soft, "time_limit": soft + 5.0}


def _enqueue(run_id: Any) -> None:
    try:
        # The run stays as it is when the broker refuses it; the sweep queues it again.
        enqueue(
            ADVANCE_ASSISTANT_RUN,
            str(run_id),
            what=f"assistant run {run_id}",
            **_limits(),
        )
    except WebFetchImproperlyInstalled:  # pragma: no cover - depends on the installed extras
        logger.exception("assistant run %s: Celery is not installed", run_id)


def dispatch(run_id: Any) -> None:
    """Advance the run after the current transaction commits: queued on Celery
    (``WEBFETCH_ASYNC_RUNS``), on the background runner (the embedded default), or right
    here (``inline``)."""
    if runs.runs_async():
        transaction.on_commit(partial(_enqueue, run_id))
    else:
        transaction.on_commit(partial(run_later, ADVANCE_ASSISTANT_RUN, run_id))


class FollowUp(Protocol):
    """A task reserved now and sent later, once, from any thread: called with the task's
    name and arguments (JSON values), or cancelled."""

    def __call__(self, name: str, *args: Any) -> None: ...

    def cancel(self) -> None: ...


class _CeleryFollowUp:
    """The follow-up as a Celery task (by name): any worker takes it up."""

    def __call__(self, name: str, *args: Any) -> None:
        # Not sent (the broker is down): the run keeps its lease until it runs out, and
        # the sweep takes the run up again then.
        enqueue(name, *args, what=f"the follow-up {name} of {args[0] if args else ''}", **_limits())

    def cancel(self) -> None:
        return None


def follow_up() -> FollowUp:
    """Reserve the follow-up of work handed to another thread: a Celery task
    (``WEBFETCH_ASYNC_RUNS``), else a reservation on this process's background runner
    (counted as busy work until it is queued)."""
    if runs.runs_async():
        return _CeleryFollowUp()
    return runner.reserve()
