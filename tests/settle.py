"""Waiting for work to settle, in the tests as in the product.

The suite runs the shipped default, the background runner: a request that starts a call or
a run answers before the work is done (``202``).  A test never reads a state "right after"
the request; it waits here for the work to settle: a call until it finished or waits for a
human (``runs.settle``, the product's own door), a run until it is no longer ``running``.
The timeout is a far safety net (a busy machine only makes the wait longer, never the
answer different); reaching it fails the test with what was seen.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = [
    "SAFETY_NET",
    "approve",
    "deny",
    "resumed_run",
    "runner_idle",
    "settled_call",
    "settled_run",
]

#: Seconds after which a wait fails the test: far above any healthy wait.
SAFETY_NET = 120.0


def settled_call(call: Any, timeout: float = SAFETY_NET) -> Any:
    from django_webfetch import runs

    settled = runs.settle(call, timeout=timeout)
    assert settled.state not in runs.SETTLING_STATES, (
        f"call {settled.pk} did not settle in {timeout}s: {settled.state}"
    )
    return settled


def _run_pk(run: Any) -> Any:
    return getattr(run, "pk", None) or (run["id"] if isinstance(run, dict) else run)


def settled_run(run: Any, timeout: float = SAFETY_NET) -> Any:
    """The assistant run once it is no longer ``running`` (finished, or paused for an
    approval), its calls settled too."""
    from django_webfetch.models import AssistantRun, ToolCall

    pk = _run_pk(run)
    deadline = time.monotonic() + timeout
    interval = 0.02
    while True:
        row = AssistantRun.objects.get(pk=pk)
        if row.state != "running":
            open_calls = ToolCall.objects.filter(run_id=pk, state__in=("approved", "running"))
            if not open_calls.exists():
                return row
        if time.monotonic() > deadline:
            raise AssertionError(f"run {pk} did not settle in {timeout}s: {row.state}")
        time.sleep(interval)
        interval = min(interval * 2, 0.25)


def resumed_run(run: Any, timeout: float = SAFETY_NET) -> Any:
    """The assistant run once nothing moves it by itself: finished, or paused on a call
    that waits for a person (``awaiting_approval``).

    Use it after a decision (an approval, a denial, an expiry): the decided call's final
    transition writes a ``resumed`` event and resumes the run from the background, so
    until the runner takes it up the run still reads ``waiting_for_approval``, which
    :func:`settled_run` counts as paused.  Here a paused run counts only when it paused
    (a ``paused`` event) after the last resume and a call of it waits for a person.
    """
    from django_webfetch.models import CallState, RunEvent, ToolCall

    pk = _run_pk(run)
    deadline = time.monotonic() + timeout
    while True:
        row = settled_run(pk, timeout=max(deadline - time.monotonic(), 0.0))
        if row.state != "waiting_for_approval":
            return row
        last = dict(
            RunEvent.objects.filter(run_id=pk, kind__in=("paused", "resumed"))
            .order_by("seq")
            .values_list("kind", "seq")
        )
        waits = ToolCall.objects.filter(run_id=pk, state=CallState.AWAITING_APPROVAL).exists()
        if waits and last.get("paused", 0) > last.get("resumed", 0):
            return row
        if time.monotonic() > deadline:
            raise AssertionError(f"run {pk} was not resumed in {timeout}s: {row.state}")
        time.sleep(0.05)


def runner_idle(timeout: float = SAFETY_NET) -> None:
    """Wait until the background runner has no task queued or running: what a task does
    after its last write (a metric counted, a log line, a mail handed over) is done too."""
    from django_webfetch.runs.runner import runner

    assert runner.wait_idle(timeout), f"the background runner was still busy after {timeout}s"


def _decide(client: Any, call_id: Any, verb: str, payload: dict[str, Any] | None) -> Any:
    response = client.post(f"/api/calls/{call_id}/{verb}/", payload or {}, format="json")
    # 202: accepted, the call runs on the background runner; 200: it was already final.
    assert response.status_code in (200, 202), response.content[:500]
    settled_call(call_id)
    return client.get(f"/api/calls/{call_id}/")


def approve(client: Any, call_id: Any, payload: dict[str, Any] | None = None) -> Any:
    """Approve over the API, wait for the call to settle, and return its API answer."""
    return _decide(client, call_id, "approve", payload)


def deny(client: Any, call_id: Any, payload: dict[str, Any] | None = None) -> Any:
    return _decide(client, call_id, "deny", payload)
