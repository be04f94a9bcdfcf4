"""Waiting for a call to settle: the one way to read the outcome of a call just requested
or approved.

A call runs off the request (the background runner's threads, or a Celery worker), so its
state right after :func:`~django_webfetch.runs.request_call` or an approval says nothing
about its outcome.  A surface that answers with the outcome (MCP resources, the CLI) and
every test waits here instead: :func:`settle` returns the fresh row once the call is no
longer ``approved`` or ``running`` (it finished, or it waits for a human), or, at the
timeout, the row as it is then.

Changes made in this process wake the waiters at once (``call_transitioned``, after the
commit); a call that runs in another process is seen by reading its row, every 0.05 s at
first and every 0.5 s at most.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db import transaction

from django_webfetch.models import CallState, ToolCall

from .state import call_id_of, call_transitioned

__all__ = ["SETTLING_STATES", "settle"]

#: The states in which a call moves by itself (no person needs to act).
SETTLING_STATES = frozenset({CallState.APPROVED, CallState.RUNNING})

_changed = threading.Condition()
_generation = 0


def _wake() -> None:
    global _generation
    with _changed:
        _generation += 1
        _changed.notify_all()


def _on_transition(sender: Any, **kwargs: Any) -> None:
    transaction.on_commit(_wake)


call_transitioned.connect(_on_transition, dispatch_uid="django_webfetch.runs.settle")


def settle(call: ToolCall | Any, timeout: float) -> ToolCall:
    """The call's row once it has settled (finished, or waiting for a human), or as it is
    when ``timeout`` seconds have passed."""
    pk = call_id_of(call)
    deadline = time.monotonic() + max(timeout, 0.0)
    interval = 0.05
    while True:
        with _changed:
            seen = _generation
        current = ToolCall.objects.get(pk=pk)
        left = deadline - time.monotonic()
        if current.state not in SETTLING_STATES or left <= 0:
            return current
        with _changed:
            if _generation == seen:
                _changed.wait(min(interval, left))
        interval = min(interval * 2, 0.5)
