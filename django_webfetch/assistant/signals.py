"""Signals: a tool call's state changes become events of the run that asked for it, and
its final transition resumes the run.  The run is the call's typed link (``ToolCall.run``,
written by the run only): a call's free-text ``conversation`` is never read here."""

from __future__ import annotations

from typing import Any

from django_webfetch import runs
from django_webfetch.models import CallState

from .dispatch import dispatch
from .models import RUN_FINISHED_STATES, AssistantRun
from .state import event

__all__ = ["MAX_COMMENT_CHARS", "connect_signals", "on_call_finished", "on_call_transitioned"]

#: The approver's comment as a ``call_state`` event carries it, at most.
MAX_COMMENT_CHARS = 500


def _open_run(run_id: Any) -> Any:
    """``run_id`` if it names an unfinished run, else ``None``."""
    if run_id is None:
        return None
    state = AssistantRun.objects.filter(pk=run_id).values_list("state", flat=True).first()
    if state is None or state in RUN_FINISHED_STATES:
        return None
    return run_id


def on_call_transitioned(sender: Any, call: Any = None, previous: str = "", **kwargs: Any) -> None:
    """``call_state``: the call's new state (inside the transaction that changed it), with
    the decision's comment when a person denied or cancelled it."""
    if call is None or call.state == previous or previous == CallState.PENDING:
        return  # a call's first state is in its ``call_requested`` event
    run_id = _open_run(call.run_id)
    if run_id is None:
        return
    data: dict[str, Any] = {"call": str(call.pk), "tool": call.tool, "state": call.state}
    if call.reason:
        data["reason"] = call.reason[:64]
    if call.state in (CallState.DENIED, CallState.CANCELLED) and call.decision_comment:
        data["comment"] = call.decision_comment[:MAX_COMMENT_CHARS]
    event(run_id, "call_state", data)


def on_call_finished(sender: Any, call_id: Any = None, run_id: Any = None, **kwargs: Any) -> None:
    run_id = _open_run(run_id)
    if run_id is None:
        return
    if AssistantRun.objects.filter(pk=run_id, lease_expires_at__isnull=True).exists():
        # Nobody advances the run (it paused, or waits for its calls): this resumes it.
        event(run_id, "resumed", {"call": str(call_id)})
    dispatch(run_id)


def connect_signals() -> None:
    runs.call_transitioned.connect(
        on_call_transitioned, dispatch_uid="django_webfetch.assistant.call_state"
    )
    runs.call_finished.connect(on_call_finished, dispatch_uid="django_webfetch.assistant.resume")
