"""Advancing a run in the background: sent by task name after the current commit.

On Celery (``WEBFETCH_ASYNC_RUNS``) the ``django_webfetch.advance_assistant_run`` task is
queued; without Celery (the embedded default) the background runner (``runs.runner``) runs
the handler bound to the same name after the commit, off the request (``apps.py`` binds
``loop.advance_in_process``); with ``WEBFETCH_RUNNER = "inline"`` it runs right after the
commit, in the request (tests).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.db import transaction

from django_webfetch import runs
from django_webfetch.conf import conf
from django_webfetch.exceptions import WebFetchImproperlyInstalled
from django_webfetch.runs.dispatch import ADVANCE_ASSISTANT_RUN, enqueue
from django_webfetch.runs.runner import run_later

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
    (``WEBFETCH_ASYNC_RUNS``), on the background runner (the embedded default), or right
    here (``inline``)."""
    if runs.runs_async():
        transaction.on_commit(partial(_enqueue, run_id))
    else:
        transaction.on_commit(partial(run_later, ADVANCE_ASSISTANT_RUN, run_id))
