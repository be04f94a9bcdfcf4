"""Requesting a call: bounds, the offer, validation, the approval rule and the pre-flight.

:func:`request_call` records every call the assistant asks for (a refused one too, for the
audit trail), and starts it as far as it may go; :func:`preflight` runs the guard on the
URL a call would request before a human is asked to approve it (DESIGN.md §7).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from datetime import timedelta
from typing import Any, NoReturn

from django.db import transaction
from django.utils import timezone

from django_webfetch import metrics
from django_webfetch.budgets import BudgetExceeded, charge_tool_call
from django_webfetch.conf import conf
from django_webfetch.egress import EgressRecorder, requested_host
from django_webfetch.egress.preflight import live_verdict
from django_webfetch.models import CallState, RunOrigin, ToolCall
from django_webfetch.net.errors import EgressDenied
from django_webfetch.runs.bounds import InputRejected, check_storable, check_text, make_storable
from django_webfetch.tools import (
    Tool,
    ToolApprovalRule,
    ToolContext,
    ToolInvocation,
    ToolResult,
)
from django_webfetch.tools import default_registry as tool_registry
from django_webfetch.tools.approval import COMPOSED, COMPOSED_NOTE
from django_webfetch.tools.registry import validate_arguments

from .errors import ToolNotOfferedError
from .queue import start
from .state import transition

__all__ = ["DNS_UNREACHABLE_MESSAGE", "preflight", "refuse_call", "request_call", "user_label"]

#: The result of a call whose pre-flight reached no DNS server (reason ``dns_error``).
DNS_UNREACHABLE_MESSAGE = (
    "The destination could not be checked: no DNS server answered for its host name "
    "(rule: dns_error). Nothing was sent and nobody was asked to approve it; "
    "try again when this server's DNS works."
)

logger = logging.getLogger("django_webfetch.runs")


def _jsonable(value: Any) -> Any:
    return make_storable(json.loads(json.dumps(value, default=str)))


def user_label(user: Any) -> str:
    if user is None:
        return ""
    get_username = getattr(user, "get_username", None)
    return str(get_username() if callable(get_username) else user)[:150]


def _preview(tool: Tool, invocation: ToolInvocation, user: Any) -> dict[str, Any]:
    preview: dict[str, Any] = {"tool": tool.name, "group": tool.group, "user": user_label(user)}
    try:
        preview.update(_jsonable(tool.approval_preview(invocation)))
    except Exception:
        logger.exception("approval preview of tool %r failed", tool.name)
        preview["arguments"] = _jsonable(dict(invocation.arguments))
        preview["error"] = "preview_unavailable"
    return preview


def preflight(
    tool: Tool, invocation: ToolInvocation, user: Any
) -> tuple[dict[str, Any] | None, ToolResult | None]:
    """Run the guard on the URL a call would request, without connecting (DESIGN.md §7).

    Syntax, scope, lists, ports, proxy, DNS and address classes, against the group's live
    policy (``egress.live_verdict``).  Returns ``(verdict, None)`` for the approval card
    (the verdict and the resolved addresses as of the request; execution checks everything
    again, DNS can change), or ``(None, refusal)``: the call fails at once with the guard's
    reason code, and the refusal is an ``EgressEvent``.  A DNS server that cannot be
    reached (timeout, no answer, SERVFAIL) fails the call the same way with ``dns_error``:
    a destination nobody could check is not put before an approver.
    """
    try:
        url = tool.preflight_url(invocation.arguments)
    except Exception:
        logger.exception("pre-flight URL of tool %r failed", tool.name)
        url = None
    if url is None:
        return None, None
    checked_at = timezone.now().isoformat()
    recorder = EgressRecorder(
        tool=tool.name, group=tool.group, user=user, call_id=invocation.call_id
    )
    host, port = requested_host(url)
    try:
        _policy, explanation = live_verdict(url, tool.group, user=user, require_scope=tool.scope)
    except EgressDenied as exc:
        recorder.record(
            decision="denied", reason=exc.reason, url_host=host, port=port, detail="pre-flight"
        )
        return None, ToolResult.from_exception(exc)
    if explanation.allowed:
        destination = explanation.destination
        addresses = [str(a) for a in destination.addresses] if destination else []
        return {
            "verdict": "allowed",
            "addresses": addresses,
            "checked_at": checked_at,
        }, None
    reason = explanation.reason or "denied"
    recorder.record(decision="denied", reason=reason, url_host=host, port=port, detail="pre-flight")
    if reason == "dns_error":
        # No DNS server answered: nothing was checked, so nobody is asked to approve blind
        # (docs/decisions/0038-no-approval-without-dns.rst); the caller may try again.
        return None, ToolResult.failure(
            "dns_error",
            DNS_UNREACHABLE_MESSAGE,
            reason=reason,
            preflight=True,
            checked_at=checked_at,
        )
    refusal = ToolResult.from_exception(EgressDenied(reason))
    return None, ToolResult.failure(
        refusal.error or "egress_denied",
        refusal.content,
        reason=reason,
        preflight=True,
        checked_at=checked_at,
    )


def request_call(
    tool_name: str,
    arguments: Any,
    *,
    user: Any,
    conversation: str = "",
    seen_urls: Collection[str] | None = None,
    origin: RunOrigin | None = None,
) -> ToolCall:
    """Record a call the assistant asked for, and start it as far as it may go.

    - invalid arguments: the call ends ``failed`` / ``invalid_arguments``, nothing runs;
    - over a budget of the user (``budgets``): it ends ``failed`` /
      ``budget_exceeded:<kind>``, nothing runs and nobody is asked;
    - needs approval: it stops in ``awaiting_approval`` (nothing holds a worker);
    - otherwise it is approved at once and run (in-process, or queued on Celery).

    Raises :class:`ToolNotOfferedError` when the tool is not offered to ``user``, and
    :class:`~django_webfetch.runs.bounds.InputRejected` (nothing stored, one audit line in
    the log) when the tool name, the conversation or the arguments cannot be stored: a
    NUL or a lone surrogate anywhere, nesting deeper than 32 levels, arguments over 16 KiB
    as JSON (``runs/bounds.py``) — whatever the tool, offered or not.

    ``seen_urls``: the URLs the call's conversation showed, normalised
    (``assistant.provenance``), for the composed-URL rule of ``tools.approval``; ``None``
    for a call made outside a conversation (its caller wrote the URL).

    ``origin``: the assistant run that asks (its step and the call's place in it), written
    on the call as a typed relation; only the run passes it, never a surface (a client's
    ``conversation`` is free text, never parsed into one).
    """
    _refuse_unstorable(tool_name, arguments, user=user, conversation=conversation)
    offered = {t.name: t for t in tool_registry.tools_for_user(user)}
    tool = offered.get(tool_name)
    if tool is not None and isinstance(arguments, Mapping):
        # Stored, checked, shown and run in the tool's canonical form (what is compared is
        # what is sent: ``Tool.canonical_arguments``).
        try:
            arguments = tool.canonical_arguments(arguments)
        except Exception:
            logger.exception("canonical arguments of tool %r failed", tool.name)
    try:
        stored_arguments = _jsonable(arguments)
        if stored_arguments is None:
            stored_arguments = {}
        check_storable(stored_arguments)
    except (TypeError, ValueError, RecursionError):
        stored_arguments = {}
        arguments = None
    if tool is None:
        _record_not_offered(
            tool_name, stored_arguments, user=user, conversation=conversation, origin=origin
        )

    with transaction.atomic():
        call = ToolCall.objects.create(
            tool=tool.name,
            group=tool.group,
            arguments=stored_arguments,
            user=user,
            conversation=(conversation or "")[:200],
            **(origin.fields() if origin is not None else {}),
        )
        invalid = validate_arguments(tool, arguments)
        if invalid is not None:
            return transition(
                call, CallState.FAILED, reason="invalid_arguments", result=invalid.to_dict()
            )
        try:
            charge_tool_call(user)
        except BudgetExceeded as exc:
            return _refuse_over_budget(call, exc)
        invocation = ToolInvocation(
            tool=tool.name, arguments=dict(arguments), user=user, call_id=str(call.pk)
        )
        context = ToolContext(
            user=user,
            call_id=str(call.pk),
            seen_urls=None if seen_urls is None else frozenset(seen_urls),
        )
        needs_approval = ToolApprovalRule.requires_approval(tool, invocation, context)
        if needs_approval:
            return _ask_for_approval(call, tool, invocation, context)
        call = transition(
            call, CallState.APPROVED, requires_approval=False, queued_at=timezone.now()
        )
    return start(call)


def _refuse_over_budget(call: ToolCall, exc: BudgetExceeded) -> ToolCall:
    """The call is recorded and fails before anything runs or a human is asked: the
    editor and the model read the ceiling in plain words (``budgets.errors.describe``)."""
    logger.info(
        "tool call %s refused: %s user=%s", call.pk, exc.code, getattr(call.user, "pk", None)
    )
    metrics.refusal(exc.code)
    result = ToolResult.failure(
        exc.code, str(exc), kind=exc.kind, used=str(exc.used), limit=str(exc.limit)
    )
    return transition(call, CallState.FAILED, reason=exc.code[:64], result=result.to_dict())


def _refuse_unstorable(tool_name: str, arguments: Any, *, user: Any, conversation: str) -> None:
    """Raise ``InputRejected`` (one audit line in the log) for input that cannot be stored."""
    try:
        check_text(str(tool_name), where="tool")
        check_text(str(conversation or ""), where="conversation")
        try:
            check_storable(arguments)
        except InputRejected as exc:
            if exc.code != "not_json":
                raise
            # Not plain JSON (a Python object): recorded as invalid arguments.
    except InputRejected as exc:
        logger.warning(
            "tool call refused before it was stored: %s (%s) tool=%.100r user=%s",
            exc.code,
            exc,
            str(tool_name)[:100],
            getattr(user, "pk", None),
        )
        raise


def _record_not_offered(
    tool_name: str,
    stored_arguments: Any,
    *,
    user: Any,
    conversation: str,
    origin: RunOrigin | None,
) -> NoReturn:
    """A refused request stays on record (a prompt-injected attempt is worth an audit
    trail): a finished call, nothing run; then :class:`ToolNotOfferedError`."""
    why, sentence = tool_registry.why_not_offered(user, tool_name)
    _record_refusal(
        tool_name,
        stored_arguments,
        user=user,
        conversation=conversation,
        origin=origin,
        refusal=ToolResult.failure("tool_not_offered", sentence, why=why),
    )
    raise ToolNotOfferedError(sentence, why=why)


def _record_refusal(
    tool_name: str,
    stored_arguments: Any,
    *,
    user: Any,
    conversation: str,
    origin: RunOrigin | None,
    refusal: ToolResult,
) -> ToolCall:
    """A finished, never-run call ending ``failed`` with ``refusal``'s code as its reason."""
    known = tool_registry.get(str(tool_name)[:100])
    with transaction.atomic():
        refused = ToolCall.objects.create(
            tool=str(tool_name)[:100],
            group=known.group if known is not None else "",
            arguments=stored_arguments,
            user=user if getattr(user, "pk", None) is not None else None,
            conversation=(conversation or "")[:200],
            **(origin.fields() if origin is not None else {}),
        )
        return transition(
            refused,
            CallState.FAILED,
            reason=(refusal.error or "refused")[:64],
            result=refusal.to_dict(),
        )


def refuse_call(
    tool_name: str,
    arguments: Any,
    *,
    user: Any,
    conversation: str = "",
    code: str,
    sentence: str,
    origin: RunOrigin | None = None,
) -> ToolCall:
    """Record a call the assistant asked for and that is refused before anything about it
    is decided (no offer, validation, approval or pre-flight): a finished call, ``failed``
    with ``code`` as its reason and ``sentence`` as what the model reads.  Used for the
    calls past a bound (``too_many_calls``): a refused call is recorded, never dropped.

    Raises :class:`~django_webfetch.runs.bounds.InputRejected` like :func:`request_call`
    for input that cannot be stored.
    """
    _refuse_unstorable(tool_name, arguments, user=user, conversation=conversation)
    try:
        stored_arguments = _jsonable(arguments)
        check_storable(stored_arguments)
    except (TypeError, ValueError, RecursionError):
        stored_arguments = {}
    return _record_refusal(
        tool_name,
        {} if stored_arguments is None else stored_arguments,
        user=user,
        conversation=conversation,
        origin=origin,
        refusal=ToolResult.failure(code, sentence),
    )


def _ask_for_approval(
    call: ToolCall, tool: Tool, invocation: ToolInvocation, context: ToolContext
) -> ToolCall:
    """Pre-flight (the guard without connecting), then wait for a human: or fail at once
    with the guard's reason when it refuses the URL.  The card says whether the URL is one
    the conversation showed or one the model composed (``url_provenance``)."""
    user = context.user
    verdict, refusal = preflight(tool, invocation, user)
    if refusal is not None:
        why = str(refusal.meta.get("reason") or refusal.error or "")[:64]
        return transition(call, CallState.FAILED, reason=why, result=refusal.to_dict())
    now = timezone.now()
    preview = _preview(tool, invocation, user)
    if verdict is not None:
        preview["preflight"] = verdict
    provenance = ToolApprovalRule.url_provenance(tool, invocation, context)
    if provenance is not None:
        preview["url_provenance"] = provenance
        if provenance == COMPOSED:
            preview["url_note"] = COMPOSED_NOTE
    return transition(
        call,
        CallState.AWAITING_APPROVAL,
        requires_approval=True,
        approval_preview=preview,
        expires_at=now + timedelta(seconds=conf.WEBFETCH_APPROVAL_TTL),
    )
