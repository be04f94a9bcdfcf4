"""Signals: a tool call's final transition resumes the run that asked for it."""

from __future__ import annotations

from typing import Any

from django_webfetch import runs

from .calls import parse_ref
from .dispatch import dispatch
from .models import RUN_FINISHED_STATES, AssistantRun

__all__ = ["connect_signals", "on_call_finished"]


def on_call_finished(
    sender: Any, call_id: Any = None, conversation: str = "", **kwargs: Any
) -> None:
    parsed = parse_ref(conversation or "")
    if parsed is None:
        return
    run_id = parsed[0]
    state = AssistantRun.objects.filter(pk=run_id).values_list("state", flat=True).first()
    if state is None or state in RUN_FINISHED_STATES:
        return
    dispatch(run_id)


def connect_signals() -> None:
    runs.call_finished.connect(on_call_finished, dispatch_uid="django_webfetch.assistant.resume")
