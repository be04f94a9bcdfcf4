"""The tool calls of a run: one durable ``ToolCall`` per call the model asked for.

A call is linked to its run by a typed relation the run writes itself (``ToolCall.run``,
``run_step``, ``run_index``: ``runs.request_call(origin=...)``), so a repeated step finds
the call it already requested instead of requesting it again.  Its ``conversation`` text
(:func:`call_ref`, ``assistant:<run>:<step>:<index>``) is for people reading the record;
nothing parses it, so a client's text that looks the same links nothing.  The model's
arguments are read defensively (:func:`arguments_of`), and what the model reads back
for a finished call is bounded (:func:`result_text`).
Calls past the per-step or per-run bound (``quota``) are recorded refused, never run; the
step's calls that wait for a human are announced together, once (``notices``).  Each call
carries the URLs its conversation showed so far (``provenance``), for the approval rule.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import partial
from typing import Any

from django_webfetch import runs
from django_webfetch.conf import conf
from django_webfetch.models import RunOrigin, ToolCall
from django_webfetch.runs.bounds import InputRejected

from .bounds import MIN_RESULT_BYTES, bound_result
from .models import AssistantRun
from .notices import announce
from .provenance import seen_urls
from .quota import TOO_MANY_CALLS, allowed_calls, refusal_sentence
from .state import event, renew

__all__ = [
    "arguments_of",
    "requested_calls",
    "with_unreadable_arguments_cut",
    "call_position",
    "call_ref",
    "cut_unreadable",
    "request_calls",
    "result_text",
    "run_calls",
]


def call_ref(run: AssistantRun, step: int, index: int) -> str:
    return f"{run.call_ref_prefix}{step}:{index}"


def run_calls(run: AssistantRun) -> list[ToolCall]:
    """The calls this run requested (``ToolCall.run``, written by the run only)."""
    return list(ToolCall.objects.filter(run=run).order_by("created"))


def call_position(call: ToolCall) -> tuple[int, int] | None:
    """``(step, index)`` of a run's call; ``None`` for a call no run asked for."""
    if call.run_id is None or call.run_step is None or call.run_index is None:
        return None
    return call.run_step, call.run_index


_MAX_RAW_ARGUMENTS = 10_000
#: Arguments nested deeper than this are treated as unreadable (no recursion on them).
_MAX_ARGUMENT_DEPTH = 32


def _too_deep(value: Any) -> bool:
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > _MAX_ARGUMENT_DEPTH:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def cut_unreadable(part: Any) -> str:
    """Unreadable arguments, cut to 1,000 characters; the cut stays unreadable (unbalanced
    or invalid JSON stays invalid when shortened; a marker replaces anything else)."""
    raw = part.args if isinstance(part.args, str) else ""
    cut = raw[:1000]
    try:
        json.loads(cut)
    except (ValueError, RecursionError):
        return cut
    return "(unreadable arguments)"


def arguments_of(part: Any) -> tuple[Any, bool]:
    """The call's arguments as the model sent them, and whether they are readable JSON
    (unparsable or absurdly nested arguments are passed on as a cut string, which fails
    the tool's schema: the model reads a tool error)."""
    args = part.args
    if args is None:
        return {}, True
    if isinstance(args, str):
        if not args.strip():
            return {}, True
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return part.args[:_MAX_RAW_ARGUMENTS], False
    if _too_deep(args):
        raw = part.args if isinstance(part.args, str) else "(nested too deeply)"
        return raw[:_MAX_RAW_ARGUMENTS], False
    return args, True


_REFUSED_PREFIX = "(arguments refused: "


def _storable_name(name: Any) -> str:
    """The tool name as recorded: printable, at most 100 characters."""
    text = str(name)[:100]
    return "".join(c if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF else "?" for c in text)


def _request_one(
    name: str,
    arguments: Any,
    *,
    run: AssistantRun,
    ref: str,
    origin: RunOrigin,
    seen: frozenset[str],
) -> ToolCall:
    try:
        return runs.request_call(
            name, arguments, user=run.user, conversation=ref, seen_urls=seen, origin=origin
        )
    except runs.ToolNotOfferedError:
        call = (
            ToolCall.objects.filter(run=run, run_step=origin.step, run_index=origin.index)
            .order_by("-created")
            .first()
        )
        if call is None:  # pragma: no cover - request_call records it
            raise
        return call


def request_calls(run: AssistantRun, step: int, response: Any) -> list[tuple[Any, ToolCall, str]]:
    """One durable call per tool call of ``response``; idempotent (found by reference).

    Each comes with the problem of its arguments: ``""``, ``"not_json"``, or the code of
    ``runs``' refusal to store them (too large, too deep, NUL or lone surrogates) — then the
    call is recorded with a marker instead of the arguments, and fails like any invalid one.
    """
    from pydantic_ai.messages import ToolCallPart

    parts = [p for p in response.parts if isinstance(p, ToolCallPart)]
    existing = {call_position(c): c for c in run_calls(run)}
    allowed = allowed_calls(len(parts), _earlier_calls(existing.values(), step))
    seen: frozenset[str] | None = None  # read once, when a call is requested
    result: list[tuple[Any, ToolCall, str]] = []
    requested_now = False
    for index, part in enumerate(parts):
        ref = call_ref(run, step, index)
        origin = RunOrigin(run.pk, step, index)
        name = _storable_name(part.tool_name)
        arguments, parsed = arguments_of(part)
        problem = "" if parsed else "not_json"
        call = existing.get((step, index))
        if call is not None and call.tool != name:
            call = None  # not the call this step asked for: never use its result
        if call is not None:
            stored = call.arguments
            if isinstance(stored, str) and stored.startswith(_REFUSED_PREFIX):
                problem = stored[len(_REFUSED_PREFIX) :].rstrip(")")
        else:
            run = renew(run)
            requested_now = True
            if index < allowed:
                if seen is None:
                    seen = seen_urls(run.conversation_id)
                request = partial(_request_one, name, run=run, ref=ref, origin=origin, seen=seen)
            else:
                sentence = refusal_sentence(index, len(parts), allowed)
                request = partial(
                    _refuse_one, name, run=run, ref=ref, origin=origin, sentence=sentence
                )
            try:
                call = request(arguments)
            except InputRejected as exc:
                problem = exc.code
                call = request(f"{_REFUSED_PREFIX}{exc.code})")
            data = {"step": step, "call": str(call.pk), "tool": call.tool, "state": call.state}
            if call.reason == TOO_MANY_CALLS:
                data["reason"] = TOO_MANY_CALLS
            event(run.pk, "call_requested", data)
        result.append((part, call, problem))
    if requested_now:
        announce(run, step, [call for _, call, _ in result])
    return result


def _earlier_calls(calls: Iterable[ToolCall], step: int) -> int:
    """The calls the run's steps before ``step`` made (refused ones not counted)."""
    count = 0
    for call in calls:
        position = call_position(call)
        if position is not None and position[0] < step and call.reason != TOO_MANY_CALLS:
            count += 1
    return count


def _refuse_one(
    name: str, arguments: Any, *, run: AssistantRun, ref: str, origin: RunOrigin, sentence: str
) -> ToolCall:
    return runs.refuse_call(
        name,
        arguments,
        user=run.user,
        conversation=ref,
        code=TOO_MANY_CALLS,
        sentence=sentence,
        origin=origin,
    )


def result_text(call: ToolCall, problem: str = "", *, reader: Any) -> str:
    """What the model reads for a finished call of ``reader``'s run (bounded; errors in our
    words); the result is read through ``runs.results``, as ``reader``."""
    limit = max(conf.WEBFETCH_ASSISTANT_MAX_RESULT_BYTES, MIN_RESULT_BYTES)
    result = runs.read_result(reader, call)
    if result is None:
        text = f"[tool error: {call.reason or call.state}] The tool call ended without a result."
    elif result.ok:
        text = result.content
    elif problem == "not_json" and result.error == "invalid_arguments":
        text = "[tool error: invalid_arguments] The arguments are not valid JSON."
    elif problem and result.error == "invalid_arguments":
        text = f"[tool error: invalid_arguments] The arguments were refused ({problem})."
    else:
        text = f"[tool error: {result.error}] {result.content}"
    return bound_result(text, limit)


def with_unreadable_arguments_cut(response: Any) -> Any:
    """The model's answer as stored: unreadable arguments are kept cut (still unreadable),
    so a megabyte of garbage does not ride along in every later request of the
    conversation."""
    from dataclasses import replace

    from pydantic_ai.messages import ToolCallPart

    return replace(
        response,
        parts=[
            replace(p, args=cut_unreadable(p))
            if isinstance(p, ToolCallPart) and not arguments_of(p)[1]
            else p
            for p in response.parts
        ],
    )


def requested_calls(run: AssistantRun, step: int, response: Any) -> list[dict[str, Any]]:
    """The tool calls of an answer as the assistant message lists them."""
    from pydantic_ai.messages import ToolCallPart

    calls = []
    tool_parts = [p for p in response.parts if isinstance(p, ToolCallPart)]
    for index, part in enumerate(tool_parts):
        arguments, _parsed = arguments_of(part)
        calls.append(
            {
                "id": str(part.tool_call_id)[:200],
                "tool": str(part.tool_name)[:100],
                "arguments": arguments if isinstance(arguments, (dict, list)) else str(arguments),
                "ref": call_ref(run, step, index),
            }
        )
    return calls
