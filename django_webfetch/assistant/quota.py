"""How many tool calls a model answer and a run may make (issue 19, item 6).

One answer (one step) makes at most ``WEBFETCH_ASSISTANT_MAX_CALLS_PER_STEP`` calls
(default 8, ceiling 32) and one run at most ``WEBFETCH_ASSISTANT_MAX_CALLS_PER_RUN`` over
all its steps (default 32, ceiling 128).  The calls an answer asks for past either bound
are the last ones of the answer: each is recorded as a finished ``ToolCall`` that never
ran (``failed`` / ``too_many_calls``, ``runs.refuse_call``), and the model reads that
reason as the call's result.  The calls within the bound are always a prefix of the
answer's calls, so a repeated step decides the same way.  Pure functions, no queries.
"""

from __future__ import annotations

from django_webfetch.conf import conf

__all__ = ["TOO_MANY_CALLS", "allowed_calls", "call_limits", "refusal_sentence"]

#: The reason code of a call past a bound.
TOO_MANY_CALLS = "too_many_calls"


def call_limits() -> tuple[int, int]:
    """``(per step, per run)``, as clamped by ``conf``."""
    return conf.WEBFETCH_ASSISTANT_MAX_CALLS_PER_STEP, conf.WEBFETCH_ASSISTANT_MAX_CALLS_PER_RUN


def allowed_calls(asked: int, earlier: int) -> int:
    """How many of the ``asked`` calls of one answer are made, when the run's earlier
    steps made ``earlier`` calls (refused ones not counted)."""
    per_step, per_run = call_limits()
    return max(0, min(asked, per_step, per_run - earlier))


def refusal_sentence(index: int, asked: int, allowed: int) -> str:
    """What the model reads for call ``index`` (0-based) of ``asked``, past ``allowed``."""
    per_step, per_run = call_limits()
    return (
        f"Not run: this was tool call {index + 1} of {asked} in one answer, and only "
        f"{allowed} of them were made. One answer may make at most {per_step} tool calls "
        f"and one request at most {per_run}. Ask for fewer calls at a time if you still "
        "need this one."
    )
