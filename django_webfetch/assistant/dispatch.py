"""Advancing a run in the background: sent by task name after the current commit.

On Celery (``WEBFETCH_ASYNC_RUNS``) the ``django_webfetch.advance_assistant_run`` task is
queued; in-process (the embedded default) the handler bound to the same name runs right
after the commit (``runs.dispatch``; ``apps.py`` binds ``loop.advance_in_process``).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.db import transaction

from django_webfetch import runs
from django_webfetch.conf import conf
from django_webfetch.exceptions import WebFetchImproperlyInstalled
from django_webfetch.runs.dispatch import ADVANCE_ASSISTANT_RUN, enqueue, run_here

__all__ = ["dispatch"]

logger = logging.getLogger("django_webfetch.assistant")


def _enqueue(run_id: Any) -> None:
    soft = conf.WEBFETCH_ASSISTANT_TIMEOUT + runs.time_limits()[0] + 10.0
    try:
        # The run stays as it is when the broker refuses it; the sweep queues it again.
        enqueue(
            ADVANCE_ASSISTANT_RUN,
            str(run_id),
            what=f"assistant run {run_id}",
            soft_time_limit=soft,
            time_limit=soft + 5.0,
        )
    except WebFetchImproperlyInstalled:  # pragma: no cover - depends on the installed extras
        logger.exception("assistant run %s: Celery is not installed", run_id)


def dispatch(run_id: Any) -> None:
    """Advance the run after the current transaction commits: queued on Celery
    (``WEBFETCH_ASYNC_RUNS``), or right here in-process (the embedded default)."""
    if runs.runs_async():
        transaction.on_commit(partial(_enqueue, run_id))
    else:
        transaction.on_commit(partial(run_here, ADVANCE_ASSISTANT_RUN, run_id))
