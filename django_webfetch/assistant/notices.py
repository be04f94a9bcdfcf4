"""One notice per step: the calls of one model answer that wait for a human, together.

:func:`announce` sends :data:`step_awaiting_approval` once per step, when the step's calls
are first requested (a repeated step that finds its calls requested already sends
nothing).  A surface that tells approvers (``cms.notify``'s e-mail) listens here rather
than to each call's transition, so an answer with many calls is one notice, not many.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.dispatch import Signal

from django_webfetch.models import CallState, ToolCall

__all__ = ["announce", "step_awaiting_approval"]

#: Sent with ``run`` (``AssistantRun``), ``step`` (``int``) and ``calls`` (the step's
#: ``ToolCall`` rows in ``awaiting_approval``, in the answer's order).
step_awaiting_approval = Signal()


def announce(run: Any, step: int, calls: Sequence[ToolCall]) -> None:
    waiting = [c for c in calls if c.state == CallState.AWAITING_APPROVAL]
    if waiting:
        step_awaiting_approval.send(sender=type(run), run=run, step=step, calls=waiting)
