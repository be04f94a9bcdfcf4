"""When a client should ask about an open call again: the ``retry_after`` hint.

An open call answers with the seconds after which another poll is worth making: a quarter
of the time it has spent in its present state (waiting for a human since it was requested,
queued since it was approved, running since it started), from :data:`POLL_MIN` to
:data:`POLL_MAX`.  It is the rule a deferred call follows in the queue
(``runs.destinations``): a call queued a moment ago is asked about again soon, one held by a
slow destination or by a human is not asked four times a second, and a client that follows
the hint is at most a quarter late.  A finished call has no hint.

The API gives it as ``retry_after`` (seconds, a float) on the call and, while the call is
open, as the ``Retry-After`` header (whole seconds, at least 1, as HTTP allows).
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from django_webfetch.models import CallState, ToolCall
from django_webfetch.models.calls import FINISHED_STATES

__all__ = ["POLL_MAX", "POLL_MIN", "poll_after", "retry_after_header"]

#: The shortest and the longest hint, in seconds.
POLL_MIN = 0.25
POLL_MAX = 5.0


def _since(call: ToolCall) -> datetime | None:
    """When the call entered the state it is in."""
    if call.state == CallState.RUNNING:
        return call.started_at or call.decided_at or call.created
    if call.state == CallState.APPROVED:
        return call.decided_at or call.created
    return call.created


def poll_after(call: ToolCall, now: datetime | None = None) -> float | None:
    """Seconds until another poll of ``call`` is worth it; ``None`` once it finished."""
    if call.state in FINISHED_STATES:
        return None
    since = _since(call)
    waited = ((now or timezone.now()) - since).total_seconds() if since is not None else 0.0
    return round(min(max(waited / 4, POLL_MIN), POLL_MAX), 2)


def retry_after_header(seconds: float) -> str:
    """The ``Retry-After`` value for a hint: HTTP counts whole seconds."""
    return str(max(1, round(seconds)))
