"""The loop: advance a run step by step, as far as it can go now.

A step is

1. ask the provider (``ask.ask``) with the history and the tools offered to the user;
2. record the answer (an assistant ``Message``; the history grows by one ``ModelResponse``);
3. request one durable ``ToolCall`` per tool call (``calls.request_calls``; idempotent);
4. when every call of the step is finished, send their results (bounded) as tool messages
   and go on; when some call waits for a human, release the lease and stop
   (``waiting_for_approval``).  The call's final transition resumes the run
   (``signals``): a Celery task, or in-process on the embedded default.

On the background runner and on Celery workers a step is a state machine, so that a slow
or hung model holds no runner thread and no worker slot: the thread prepares the provider
request and hands it to the provider I/O loop of its process (``aio``), keeping the run's
lease, and is released.  When the request ends, its outcome (the answer, or the failure,
as JSON) is sent by name as the follow-up task :data:`PROVIDER_ANSWERED`
(:func:`answered`): to the background runner of the same process, or as a Celery task any
worker takes.  The follow-up records the answer and goes on.  It is tied to the run's
version at the hand-off: a run changed meanwhile (cancelled, taken over after a lost lease,
or already answered by a duplicate) is left alone.  Tool calls still run on runner threads
(Celery: their own tasks).  Inline runs and eager Celery tasks wait for the request in
their own thread.

A process that exits on purpose (a Celery worker's warm shutdown, a pool child recycled)
releases the runs whose requests its loop still holds (:func:`release_handed_off`): each
is queued again at once, and the request is asked again by whichever worker takes it.  A
process killed outright leaves its leases, which name it: the next sweep on the same
machine finds it dead and takes its runs over (elsewhere, when the lease runs out).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from django_webfetch import runs
from django_webfetch.conf import conf
from django_webfetch.models import CallState, ToolCall
from django_webfetch.models.outage import survive_outage
from django_webfetch.runs.dispatch import PROVIDER_ANSWERED
from django_webfetch.runs.durable import Outcome, keeper, worker_label
from django_webfetch.runs.runner import runner

from .answers import answer_fields, record_provider_failure
from .ask import ProviderRequest, ask
from .calls import (
    request_calls,
    requested_calls,
    result_text,
    with_unreadable_arguments_cut,
)
from .conversations import add_message
from .dispatch import dispatch, follow_up
from .errors import InvalidRunTransition
from .history import dump, load, require_pydantic_ai
from .models import AssistantRun, Message, MessageRole, RunState
from .providers import OFFLINE_LABEL, ProviderFailure, usage_dict
from .state import event, fail, lease_fields, lost, renew, transition
from .stream import StreamStopped, TextStream

__all__ = [
    "MAX_STEP_ATTEMPTS",
    "PROVIDER_ANSWERED",
    "AdvanceOutcome",
    "acquire",
    "advance",
    "advance_in_process",
    "answered",
    "answered_in_process",
    "record_step",
    "release_handed_off",
]

logger = logging.getLogger("django_webfetch.assistant")

#: A step is tried at most this often: a provider failure that is safe to repeat, or a
#: worker lost in the middle of it, gets one more attempt.
MAX_STEP_ATTEMPTS = 2
#: A run stopped by the database going away goes on this often, at most, once it is back.
DATABASE_RESUMES = 3


class AdvanceOutcome(Outcome):
    """What :func:`advance` did: ``action`` is ``advanced``, ``busy``, ``noop`` or
    ``recovered``."""


def acquire(run_id: Any, worker: str) -> AssistantRun | AdvanceOutcome:
    """Take the run's lease, or say why not.  A run whose previous holder was lost counts
    an attempt; past ``MAX_STEP_ATTEMPTS`` it fails with ``worker_lost``."""
    now = timezone.now()
    try:
        run = AssistantRun.objects.get(pk=run_id)
    except (AssistantRun.DoesNotExist, ValueError):
        return AdvanceOutcome("noop", "")
    if run.finished:
        return AdvanceOutcome("noop", run.state)
    if run.lease_expires_at is not None and not lost(run, now):
        wait = (run.lease_expires_at - now).total_seconds()
        return AdvanceOutcome("busy", run.state, retry_after=max(wait, 0.0))
    was_lost = run.lease_expires_at is not None
    attempts = run.attempts + 1 if was_lost else run.attempts
    if was_lost and attempts >= MAX_STEP_ATTEMPTS:
        failed = fail(run, "worker_lost", "The worker running this request was lost.")
        return AdvanceOutcome("recovered", failed.state if failed else run.state)
    try:
        run = transition(
            run,
            RunState.RUNNING,
            version=run.version,
            **lease_fields(now),
            worker=keeper.hold(worker or worker_label()),
            attempts=attempts,
        )
    except (InvalidRunTransition, AssistantRun.DoesNotExist):
        current = AssistantRun.objects.filter(pk=run_id).values_list("state", flat=True).first()
        return AdvanceOutcome("busy", current or "", retry_after=1.0)
    if was_lost:
        logger.warning("assistant run %s: worker lost, resuming (attempt %s)", run.pk, attempts)
        event(run.pk, "worker_lost", {"attempt": attempts})
    if run.step_count == 0:
        # A worker took up the editor's question (again, after a lost worker).
        event(run.pk, "started", {"attempt": attempts + 1})
    return run


def advance(
    run_id: Any,
    *,
    worker: str = "",
    max_provider_calls: int | None = None,
    detach: bool = False,
) -> AdvanceOutcome:
    """Advance a run as far as it can go now.  Idempotent and safe to call at any time:
    a finished run, or one another live worker holds, is left alone.

    ``max_provider_calls``: stop (and queue the rest) after that many provider requests
    (a Celery task does one, so each task stays within its time limit).
    ``detach``: hand each provider request to the provider I/O loop and return (the
    caller is a background runner thread; see the module docstring).
    """
    require_pydantic_ai()
    acquired = acquire(run_id, worker)
    if isinstance(acquired, AdvanceOutcome):
        return acquired
    run = acquired
    return _guarded(
        run,
        lambda: _loop(run, max_provider_calls=max_provider_calls, detach=detach),
        lambda resumed: _loop(resumed, max_provider_calls=max_provider_calls, detach=detach),
    )


def _guarded(
    run: AssistantRun,
    body: Callable[[], AdvanceOutcome],
    resume: Callable[[AssistantRun], AdvanceOutcome],
) -> AdvanceOutcome:
    """``body()``, which advances ``run`` under its lease; a run changed under it is left to
    whoever changed it; the database going away (a restart, a failover) is waited out and
    the run goes on from what it stored, ``resume(run)``, at most ``DATABASE_RESUMES``
    times; any other error fails the run."""
    attempt = body
    for outage in range(DATABASE_RESUMES + 1):
        try:
            return attempt()
        except InvalidRunTransition:
            # Cancelled (or otherwise changed) under us: whoever changed it owns it now.
            current = AssistantRun.objects.filter(pk=run.pk).values_list("state", flat=True).first()
            return AdvanceOutcome("noop", current or "")
        except (OperationalError, InterfaceError):
            if outage == DATABASE_RESUMES or connection.in_atomic_block:
                return _failed_unexpectedly(run)
            resumed = _after_the_outage(run)
            if isinstance(resumed, AdvanceOutcome):
                return resumed
            run = resumed
            attempt = functools.partial(resume, resumed)
        except Exception:
            return _failed_unexpectedly(run)
    raise AssertionError("unreachable")  # pragma: no cover


def _failed_unexpectedly(run: AssistantRun) -> AdvanceOutcome:
    logger.exception("assistant run %s failed unexpectedly", run.pk)
    fresh = AssistantRun.objects.filter(pk=run.pk).first()
    if fresh is not None:
        fail(fresh, "internal_error", "The assistant failed unexpectedly.")
    return AdvanceOutcome("advanced", RunState.FAILED)


def _after_the_outage(run: AssistantRun) -> AssistantRun | AdvanceOutcome:
    """The database went away under the run (a restart, a failover): wait until it answers
    again, then go on from what the run stored, under a renewed lease, instead of failing
    it (``internal_error``) or leaving it stranded until its lease runs out.  A run that
    another worker took meanwhile (its lease ran out during the outage) is left to it.
    What the step did before the outage and did not store (a provider's answer) is asked
    again."""
    logger.warning("assistant run %s: database unavailable; waiting to go on", run.pk)
    fresh = survive_outage(lambda: AssistantRun.objects.filter(pk=run.pk).first(), what="a ping")
    if fresh is None or fresh.state != RunState.RUNNING or fresh.worker != run.worker:
        return AdvanceOutcome("noop", fresh.state if fresh else "")
    if lost(fresh, timezone.now()):
        return AdvanceOutcome("busy", fresh.state, retry_after=0.0)
    try:
        return renew(fresh)
    except (InvalidRunTransition, AssistantRun.DoesNotExist):
        return AdvanceOutcome("noop", fresh.state)


def _loop(
    run: AssistantRun, *, max_provider_calls: int | None, detach: bool = False
) -> AdvanceOutcome:
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    provider_calls = 0
    while True:
        history = load(run.history)
        last = history[-1] if history else None
        step: AssistantRun | AdvanceOutcome
        if isinstance(last, ModelResponse) and any(isinstance(p, ToolCallPart) for p in last.parts):
            step = _take_results(run, last, history)
        elif max_provider_calls is not None and provider_calls >= max_provider_calls:
            return _queue_the_rest(run)
        else:
            # The history ends with a request: ask the provider (one step).
            provider_calls += 1
            step = _ask_step(run, history, detach=detach)
        if isinstance(step, AdvanceOutcome):
            return step
        run = step


def _queue_the_rest(run: AssistantRun) -> AdvanceOutcome:
    """Release the lease and queue the run again (a task does one provider request)."""
    run = transition(
        run,
        RunState.RUNNING,
        version=run.version,
        lease_expires_at=None,
        worker="",
        queued_at=timezone.now(),
    )
    dispatch(run.pk)
    return AdvanceOutcome("advanced", run.state)


def _ask_step(
    run: AssistantRun, history: list[Any], *, detach: bool = False
) -> AssistantRun | AdvanceOutcome:
    """One provider request and its answer recorded; a failure safe to repeat is tried
    once more, any other fails the run.  ``detach``: hand a model's request to the provider
    I/O loop and return (the offline planner is CPU work: it answers right here)."""
    if run.step_count >= conf.WEBFETCH_ASSISTANT_MAX_STEPS:
        failed = fail(
            run,
            "max_steps",
            f"The assistant needed more than {conf.WEBFETCH_ASSISTANT_MAX_STEPS} steps "
            "for this question and stopped.",
        )
        return AdvanceOutcome("advanced", failed.state if failed else run.state)
    stream = TextStream(run, step=run.step_count + 1)
    try:
        if detach and run.provider != "offline":
            return _ask_later(run, history, stream)
        response = ask(run, history, stream=stream)
    except ProviderFailure as failure:
        return _provider_failed(run, failure)
    return _answered(run, history, response)


def _ask_later(run: AssistantRun, history: list[Any], stream: TextStream) -> AdvanceOutcome:
    """Prepare the request here, hand it to the provider I/O loop and release this thread;
    the run keeps its lease, and :data:`PROVIDER_ANSWERED` takes it up again."""
    request = ProviderRequest(run, history, stream)
    send = follow_up()
    run_id, version = str(run.pk), run.version

    def then(finish: Callable[[], Any]) -> None:
        # On the loop's database pool, once the request ended: never raises.
        try:
            outcome = _outcome(run_id, finish)
        finally:
            _handed_off.discard(run_id, version)
        try:
            if outcome is None:
                send.cancel()
            else:
                send(PROVIDER_ANSWERED, run_id, version, outcome)
        except Exception:
            logger.exception("assistant run %s: the follow-up could not be sent", run_id)

    _handed_off.add(run_id, version)
    try:
        request.send_later(then)
    except BaseException:
        _handed_off.discard(run_id, version)
        send.cancel()
        raise
    return AdvanceOutcome("advanced", run.state)


def _outcome(run_id: str, finish: Callable[[], Any]) -> dict[str, Any] | None:
    """What the follow-up needs of a finished request, as JSON: ``{"response": ...}``,
    ``{"failure": ...}``, ``{"outage": true}`` (the database went away while it streamed),
    ``{"error": true}``; ``None`` when the run changed under the stream (nothing to do)."""
    import dataclasses

    try:
        response = finish()
    except ProviderFailure as failure:
        return {"failure": dataclasses.asdict(failure)}
    except StreamStopped:
        return None
    except (OperationalError, InterfaceError):
        return {"outage": True}
    except Exception:
        logger.exception("assistant run %s: the provider request failed unexpectedly", run_id)
        return {"error": True}
    return {"response": dump([response])[0]}


class _HandedOff:
    """The runs whose requests this process's provider I/O loop holds: ``(run, version)``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: set[tuple[str, int]] = set()

    def add(self, run_id: str, version: int) -> None:
        with self._lock:
            self._runs.add((run_id, version))

    def discard(self, run_id: str, version: int) -> None:
        with self._lock:
            self._runs.discard((run_id, version))

    def take(self) -> list[tuple[str, int]]:
        with self._lock:
            runs, self._runs = sorted(self._runs), set()
        return runs


_handed_off = _HandedOff()


def release_handed_off() -> int:
    """Release the runs whose requests this process's provider I/O loop still holds (the
    process is about to exit on purpose: a worker's warm shutdown, a recycled pool child)
    and queue each again at once, counting no lost attempt; how many were released.  A
    run whose request ended meanwhile (its version moved on) is left to its follow-up."""
    released = 0
    for run_id, version in _handed_off.take():
        try:
            run = transition(
                run_id,
                RunState.RUNNING,
                version=version,
                lease_expires_at=None,
                worker="",
                queued_at=timezone.now(),
            )
        except (InvalidRunTransition, AssistantRun.DoesNotExist):
            continue
        except Exception:
            logger.exception("assistant run %s: not released; its lease will run out", run_id)
            continue
        logger.info("assistant run %s: released by an exiting worker, queued again", run_id)
        event(run.pk, "released", {"step": run.step_count + 1})
        dispatch(run.pk)
        released += 1
    return released


def answered(
    run_id: str, version: int, outcome: dict[str, Any], *, worker: str = ""
) -> AdvanceOutcome:
    """The handler of :data:`PROVIDER_ANSWERED`: record the outcome of the run's request
    handed to a provider I/O loop (see :func:`_outcome`) and advance the run further, as
    :func:`advance`, handing its next request off again.  A run whose version is no longer
    the hand-off's (cancelled, taken over, a duplicate follow-up) is left alone; the lease
    is taken over under ``worker`` (a Celery follow-up runs in any worker)."""
    run = AssistantRun.objects.filter(pk=run_id).first()
    if run is None or run.version != version or run.state != RunState.RUNNING:
        return AdvanceOutcome("noop", run.state if run is not None else "")
    if worker and run.worker != worker[:200]:
        try:
            run = renew(run, worker=worker[:200])
        except (InvalidRunTransition, AssistantRun.DoesNotExist):
            return AdvanceOutcome("noop", "")
    history = load(run.history)
    answered_run = run

    def body() -> AdvanceOutcome:
        step: AssistantRun | AdvanceOutcome
        if "response" in outcome:
            [response] = load([outcome["response"]])
            step = _answered(answered_run, history, response)
        elif "failure" in outcome:
            step = _provider_failed(answered_run, ProviderFailure(**outcome["failure"]))
        elif outcome.get("outage"):
            raise OperationalError("the database went away while the answer streamed")
        else:
            raise RuntimeError("the provider request failed unexpectedly")
        if isinstance(step, AdvanceOutcome):
            return step
        return _loop(step, max_provider_calls=None, detach=True)

    return _guarded(run, body, lambda resumed: _loop(resumed, max_provider_calls=None, detach=True))


def answered_in_process(run_id: str, version: int, outcome: dict[str, Any]) -> None:
    """The in-process handler of :data:`PROVIDER_ANSWERED` (a background runner thread):
    :func:`answered`, its errors logged."""
    try:
        answered(run_id, version, outcome, worker=f"in-process:{worker_label()}")
    except Exception:
        logger.exception("assistant run %s: in-process advance failed", run_id)


def _provider_failed(run: AssistantRun, failure: ProviderFailure) -> AssistantRun | AdvanceOutcome:
    record_provider_failure(run, failure)
    if failure.retry_safe and run.attempts + 1 < MAX_STEP_ATTEMPTS:
        run = renew(run, attempts=run.attempts + 1)
        event(run.pk, "provider_retry", {"code": failure.code, "attempt": run.attempts})
        return run
    failed = fail(run, failure.code, failure.message)
    return AdvanceOutcome("advanced", failed.state if failed else run.state)


def _answered(
    run: AssistantRun, history: list[Any], response: Any
) -> AssistantRun | AdvanceOutcome:
    run = record_step(run, history, response)
    if run.finished:
        return AdvanceOutcome("advanced", run.state)
    return run


def _take_results(
    run: AssistantRun, last: Any, history: list[Any]
) -> AssistantRun | AdvanceOutcome:
    """The history ends with the model's tool calls: request them (idempotent), then either
    pause (some call is not finished) or append their results and go on."""
    from pydantic_ai.messages import ModelRequest, ToolReturnPart

    step = run.step_count
    requested = request_calls(run, step, last)
    run = AssistantRun.objects.get(pk=run.pk)
    calls = [(part, runs.refresh(call), problem) for part, call, problem in requested]
    pending = [call for _, call, _ in calls if not call.finished]
    if pending:
        waiting = any(c.state == CallState.AWAITING_APPROVAL for c in pending)
        target = RunState.WAITING_FOR_APPROVAL if waiting else RunState.RUNNING
        previous = run.state
        run = transition(run, target, version=run.version, lease_expires_at=None, worker="")
        if previous != target or waiting:
            calls_data = {"step": step, "calls": [str(c.pk) for c in pending]}
            event(run.pk, "waiting_for_approval" if waiting else "waiting_for_tools", calls_data)
            if waiting:
                # No worker waits: the calls' final transitions resume the run.
                event(run.pk, "paused", calls_data)
        # A call that finished while we held the lease could not resume us: look again.
        if all(ToolCall.objects.get(pk=c.pk).finished for c in pending):
            return acquire(run.pk, run.worker)
        return AdvanceOutcome("advanced", run.state)
    parts = []
    for part, call, problem in calls:
        text = result_text(call, problem, reader=run.user)
        parts.append(ToolReturnPart(part.tool_name, text, tool_call_id=part.tool_call_id))
        if not Message.objects.filter(run=run, tool_call=call).exists():
            add_message(
                run.conversation_id,
                run=run,
                step=step,
                role=MessageRole.TOOL,
                content=text,
                tool_call=call,
                tool_call_ref=str(part.tool_call_id)[:200],
            )
    history.append(ModelRequest(parts=parts))
    run = renew(run, history=dump(history))
    event(
        run.pk,
        "tool_results",
        {
            "step": step,
            "calls": [
                {"call": str(c.pk), "tool": c.tool, "state": c.state, "reason": c.reason}
                for _, c, _ in calls
            ],
        },
    )
    return run


def record_step(run: AssistantRun, history: list[Any], response: Any) -> AssistantRun:
    """Store one provider answer: history, the assistant message, the step count."""
    from pydantic_ai.messages import TextPart

    step = run.step_count + 1
    response = with_unreadable_arguments_cut(response)
    text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
    label = run.provider_label or OFFLINE_LABEL
    history.append(response)
    calls = requested_calls(run, step, response)
    answer = answer_fields(run.provider, response)
    with transaction.atomic():
        run = renew(run, history=dump(history), step_count=step, attempts=0, **answer)
        message = add_message(
            run.conversation_id,
            run=run,
            step=step,
            role=MessageRole.ASSISTANT,
            content=text,
            tool_calls=calls,
            usage=usage_dict(response.usage),
            provider_label=label,
            **answer,
        )
    event(
        run.pk,
        "step",
        {
            "step": step,
            "message": str(message.pk),
            "tool_calls": [{"id": c["id"], "tool": c["tool"]} for c in calls],
            "final": not calls,
        },
    )
    if not calls:
        incomplete = getattr(response, "finish_reason", None) == "length"
        # One commit: a reader that sees the run finished sees its "completed" event too
        # (the SSE stream and the long-poll end at a finished run with no new event).
        with transaction.atomic():
            run = transition(run, RunState.COMPLETED, version=run.version)
            event(run.pk, "completed", {"message": str(message.pk), "incomplete": incomplete})
    return run


def advance_in_process(run_id: Any) -> None:
    """The in-process handler of ``django_webfetch.advance_assistant_run`` (``apps.py``):
    its errors are logged, never raised into the commit that dispatched it."""
    try:
        advance(run_id, worker=f"in-process:{worker_label()}", detach=runner.on_worker_thread())
    except Exception:
        logger.exception("assistant run %s: in-process advance failed", run_id)
