"""The assistant's services, re-exported from their journey modules.

============================  ==========================================================
``assistant.errors``          the error tree
``assistant.state``           :func:`transition`, the lease, the event log
``assistant.conversations``   conversations, messages, posting a turn, cancelling a run
``assistant.history``         the run's history as JSON, and what a request sends of it
``assistant.calls``           the durable tool calls a run requested, and their results
``assistant.ask``             one provider request
``assistant.loop``            advancing a run step by step
``assistant.dispatch``        advancing in the background, by task name
``assistant.signals``         a finished call resumes its run
``assistant.recover``         the sweep, and the same on read
============================  ==========================================================
"""

from __future__ import annotations

from .calls import call_position, call_ref, run_calls
from .conversations import (
    SYSTEM_PROMPT,
    answers_after_pause,
    cancel_run,
    create_conversation,
    mark_seen,
    post_message,
    rename_conversation,
    visible_conversations,
    visible_runs,
)
from .dispatch import dispatch
from .errors import AssistantError, AssistantNotInstalled, InvalidRunTransition, RunInProgress
from .loop import MAX_STEP_ATTEMPTS, AdvanceOutcome, advance
from .recover import refresh, requeue_wait, sweep
from .signals import connect_signals
from .state import events_since, lease_seconds, transition

__all__ = [
    "MAX_STEP_ATTEMPTS",
    "SYSTEM_PROMPT",
    "AdvanceOutcome",
    "AssistantError",
    "AssistantNotInstalled",
    "InvalidRunTransition",
    "RunInProgress",
    "advance",
    "answers_after_pause",
    "call_position",
    "call_ref",
    "cancel_run",
    "connect_signals",
    "create_conversation",
    "dispatch",
    "events_since",
    "lease_seconds",
    "mark_seen",
    "post_message",
    "refresh",
    "requeue_wait",
    "rename_conversation",
    "run_calls",
    "sweep",
    "transition",
    "visible_conversations",
    "visible_runs",
]
