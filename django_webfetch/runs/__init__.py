"""Tool calls as durable runs: the state machine and the services around it.

Every change of ``ToolCall.state`` goes through :func:`transition`, which locks the row
(``select_for_update``) and then writes the new state with a compare-and-set ``UPDATE``
(``WHERE state = <the state it read>``).  The lock serialises competing writers on
PostgreSQL/MySQL; the compare-and-set keeps the guarantee on SQLite, where
``select_for_update`` is a no-op: two admins approving at once, or an approval racing the
expiry, end in exactly one outcome and the other gets :class:`InvalidTransition`.

Errors::

    WebFetchError
    └── RunError                               .code
        ├── InvalidTransition                  .current .target
        │   └── CallExpiredError
        ├── ToolNotOfferedError
        ├── ApprovalPermissionDenied
        │   └── SelfApprovalDenied
        ├── CancelPermissionDenied
        └── CancelReasonRequired

Runs happen in-process (synchronously, right where the call was approved) unless
``WEBFETCH_ASYNC_RUNS`` is on; then the ``django_webfetch.run_tool_call`` Celery task runs
them on a worker once the transaction that approved them has committed.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.core.exceptions import ValidationError
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Q
from django.dispatch import Signal
from django.utils import timezone

from django_webfetch.conf import conf
from django_webfetch.exceptions import WebFetchImproperlyInstalled
from django_webfetch.models import CallState, ToolCall
from django_webfetch.models.calls import FINISHED_STATES, TRANSITIONS
from django_webfetch.net.errors import WebFetchError
from django_webfetch.runs.bounds import (
    MAX_COMMENT_CHARS,
    InputRejected,
    check_storable,
    check_text,
    make_storable,
)
from django_webfetch.tools import (
    Effect,
    Tool,
    ToolApprovalRule,
    ToolContext,
    ToolInvocation,
    ToolResult,
)
from django_webfetch.tools import default_registry as tool_registry
from django_webfetch.tools.registry import validate_arguments

__all__ = [
    "APPROVE_PERMISSION",
    "MAX_ATTEMPTS",
    "ApprovalPermissionDenied",
    "CallExpiredError",
    "CancelPermissionDenied",
    "CancelReasonRequired",
    "ExecuteOutcome",
    "InputRejected",
    "InvalidTransition",
    "RunError",
    "SelfApprovalDenied",
    "ToolNotOfferedError",
    "approve",
    "call_finished",
    "call_transitioned",
    "can_approve",
    "can_cancel",
    "can_read",
    "can_read_result",
    "cancel",
    "deny",
    "execute",
    "expire_due",
    "lease_seconds",
    "recover_lost",
    "preflight",
    "prune_calls",
    "readable_result",
    "reads_every_result",
    "refresh",
    "request_call",
    "runs_async",
    "sweep",
    "time_limits",
    "transition",
    "visible_calls",
]

logger = logging.getLogger("django_webfetch.runs")

APPROVE_PERMISSION = "django_webfetch.approve_toolcall"
#: A call is run at most this often: a call whose worker was lost is retried once.
MAX_ATTEMPTS = 2
#: SQLite reports a lost race as "database is locked" (without waiting, when a reading
#: transaction wants to write); the transition is re-read this often.
_SQLITE_RETRIES = 10


#: Sent inside the transaction of each state change: ``call`` (the updated row) and
#: ``previous`` (the state it left).  A receiver with side effects defers them with
#: ``transaction.on_commit`` (the django CMS integration mails approvers so).
call_transitioned = Signal()

#: Sent when a call reaches a finished state, inside the transaction that finishes it:
#: ``call_finished.send(sender=ToolCall, call_id=..., conversation=...)``.  A receiver that
#: acts on it defers the work with ``transaction.on_commit``; receivers' errors are logged,
#: never raised.  The assistant resumes the run that asked for the call.
call_finished = Signal()


# -- errors ---------------------------------------------------------------------------------


class RunError(WebFetchError):
    code = "run_error"
    default_message = "the tool call cannot be changed"


class InvalidTransition(RunError):
    """The call is not in a state that allows the change (it may have just changed)."""

    code = "invalid_transition"

    def __init__(self, current: str, target: str, message: str | None = None) -> None:
        self.current = current
        self.target = target
        super().__init__(message or f"a {current} call cannot become {target}")


class CallExpiredError(InvalidTransition):
    code = "expired"

    def __init__(self, target: str) -> None:
        super().__init__(CallState.EXPIRED, target, "the approval request has expired")


class ToolNotOfferedError(RunError):
    """``why``: ``no_such_tool``, ``admin_only``, ``group_disabled``, ``group_scope``..."""

    code = "tool_not_offered"
    default_message = "this tool is not offered to you"

    def __init__(self, message: str | None = None, *, why: str = "tool_not_offered") -> None:
        self.why = why
        super().__init__(message)


class ApprovalPermissionDenied(RunError):
    code = "approval_not_permitted"
    default_message = "you may not approve or deny tool calls"


class SelfApprovalDenied(ApprovalPermissionDenied):
    code = "self_approval"
    default_message = "you may not approve or deny your own tool call"


class CancelPermissionDenied(RunError):
    code = "cancel_not_permitted"
    default_message = "you may not cancel this tool call"


class CancelReasonRequired(RunError):
    """Only its requester cancels an approved call without a word: an approver overturning
    another's approval must say why (the reason is shown with the call)."""

    code = "cancel_reason_required"
    default_message = "cancelling an approved call needs a comment saying why"


# -- settings-derived values ----------------------------------------------------------------


def runs_async() -> bool:
    """Run calls on Celery workers (``WEBFETCH_ASYNC_RUNS``) or in-process (default)."""
    return conf.WEBFETCH_ASYNC_RUNS


def time_limits() -> tuple[float, float]:
    """``(soft, hard)`` Celery time limits of one run: above the whole-fetch budget."""
    # The fetch budget covers DNS, connects, redirects and the transfer; what is left is
    # bounded text extraction and a few writes.
    soft = conf.WEBFETCH_TIMEOUT + 2.0
    return soft, soft + 3.0


def lease_seconds() -> float:
    """How long a running attempt owns its call.  Past the hard time limit the worker
    process is gone (killed by the pool, or dead), so past the lease the call is lost.
    A live attempt renews its lease (:class:`_Heartbeat`) for as long as it runs."""
    return time_limits()[1] + 2.0


#: A heartbeat renews a lease at most this many times the lease's length after the start:
#: an attempt that runs longer than that is stuck, not slow, and may be declared lost.
MAX_HEARTBEAT_LEASES = 4


class _Heartbeat:
    """Renews a running attempt's lease every third of the lease while the attempt runs
    (fetching, extracting), so that reading the call never declares a live attempt lost.

    A thread of its own: the tool's work is never interrupted for it.  When the process
    dies, the beats stop and the lease runs out as before.  The renewal is a compare-and-
    set on (state, attempts): it never revives a call that another writer has moved on.
    """

    def __init__(self, call_id: Any, attempt: int) -> None:
        self.call_id = call_id
        self.attempt = attempt
        self.lease = lease_seconds()
        self.until = time.monotonic() + MAX_HEARTBEAT_LEASES * self.lease
        self.stopped = threading.Event()
        self.beats = 0
        self.thread = threading.Thread(
            target=self._run, name=f"webfetch-lease-{call_id}", daemon=True
        )

    def __enter__(self) -> _Heartbeat:
        # Inside a caller's transaction (ATOMIC_REQUESTS) the running state is not visible
        # to other connections, so there is nothing to renew, and a renewal would wait for
        # the row lock that this very thread holds.
        if not connection.in_atomic_block:
            self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            # A beat blocked on a busy database finishes on its own; never wait long for it.
            self.thread.join(timeout=5.0)

    def _run(self) -> None:
        try:
            while not self.stopped.wait(self.lease / 3) and time.monotonic() < self.until:
                self.beat()
        finally:
            connection.close()  # this thread's own database connection

    def beat(self) -> None:
        try:
            renewed = ToolCall.objects.filter(
                pk=self.call_id, state=CallState.RUNNING, attempts=self.attempt
            ).update(lease_expires_at=timezone.now() + timedelta(seconds=self.lease))
        except Exception:  # a busy database: the next beat tries again
            logger.warning("tool call %s: lease not renewed", self.call_id, exc_info=True)
            return
        self.beats += renewed


# -- permissions ----------------------------------------------------------------------------


def _is_active(user: Any) -> bool:
    return bool(
        user is not None
        and getattr(user, "is_authenticated", False)
        and getattr(user, "is_active", False)
    )


def _may_approve(user: Any) -> bool:
    return _is_active(user) and bool(user.has_perm(APPROVE_PERMISSION))


def can_approve(user: Any, call: ToolCall) -> bool:
    """May ``user`` approve or deny ``call`` (ignoring its state)?"""
    if not _may_approve(user):
        return False
    return conf.WEBFETCH_ALLOW_SELF_APPROVAL or call.user_id != user.pk


def reads_every_result(user: Any) -> bool:
    """Superusers read every call's result (the one exception to "the requester only")."""
    return _is_active(user) and bool(getattr(user, "is_superuser", False))


def _requested_or_superuser(user: Any, call: ToolCall) -> bool:
    return _is_active(user) and (call.user_id == user.pk or reads_every_result(user))


#: A call that ended so never ran its tool: its result is the host's account of the
#: outcome (who denied or cancelled it, and why), not anything the tool returned.
_OUTCOME_ONLY = frozenset({CallState.DENIED, CallState.EXPIRED, CallState.CANCELLED})


def can_read_result(user: Any, call: ToolCall) -> bool:
    """May ``user`` read what ``call`` returned (its ``result``)?  The requester and
    superusers; whoever reads the call (:func:`can_read`) also reads the result of a call
    that never ran (denied, expired, cancelled: the outcome, in the host's words).  An
    approver, or a holder of a model's view permission, never reads what a tool returned
    for another user (docs/approval.rst, "Who reads a result")."""
    if _requested_or_superuser(user, call):
        return True
    return call.state in _OUTCOME_ONLY and can_read(user, call)


def can_read(user: Any, call: ToolCall) -> bool:
    """May ``user`` read ``call``'s record (its card, arguments, state and reason)?  The
    requester and superusers, and approvers for a call that went to approval; the result
    itself only by :func:`can_read_result`."""
    if _requested_or_superuser(user, call):
        return True
    return bool(call.requires_approval) and _may_approve(user)


def readable_result(user: Any, call: ToolCall) -> dict[str, Any] | None:
    """``call.result`` as ``user`` may see it: ``None`` when they may not read it."""
    if call.result is None or not can_read_result(user, call):
        return None
    return dict(call.result)


def can_cancel(user: Any, call: ToolCall) -> bool:
    return can_read(user, call)


def visible_calls(user: Any) -> Any:
    """The calls ``user`` may read (:func:`can_read`): their own; approvers also those that
    went to approval; superusers all."""
    if not _is_active(user):
        return ToolCall.objects.none()
    if reads_every_result(user):
        return ToolCall.objects.all()
    if _may_approve(user):
        return ToolCall.objects.filter(Q(user=user) | Q(requires_approval=True))
    return ToolCall.objects.filter(user=user)


# -- the one place that changes state -------------------------------------------------------


def _call_id(call: ToolCall | uuid.UUID | str) -> Any:
    return call.pk if isinstance(call, ToolCall) else call


def transition(
    call: ToolCall | uuid.UUID | str,
    target: str,
    *,
    check: Callable[[ToolCall], None] | None = None,
    **changes: Any,
) -> ToolCall:
    """Move a call to ``target`` under a row lock; return the updated call.

    ``check(call)`` runs under the lock and may raise to refuse.  Raises
    ``ToolCall.DoesNotExist`` and :class:`InvalidTransition` (also when another writer won
    a race for the same call).
    """
    call_id = _call_id(call)
    for attempt in range(_SQLITE_RETRIES):
        try:
            return _transition(call_id, target, check=check, changes=changes)
        except OperationalError:
            # SQLite refuses the loser of a write race with "database is locked" instead of
            # making it wait; read again (it now sees the winner's state).
            if connection.vendor != "sqlite" or attempt == _SQLITE_RETRIES - 1:
                raise
            time.sleep(random.uniform(0.02, 0.06) * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def _transition(
    call_id: Any,
    target: str,
    *,
    check: Callable[[ToolCall], None] | None,
    changes: Mapping[str, Any],
) -> ToolCall:
    with transaction.atomic():
        call = ToolCall.objects.select_for_update().get(pk=call_id)
        current = call.state
        if target not in TRANSITIONS.get(current, frozenset()):
            raise InvalidTransition(current, target)
        if check is not None:
            check(call)
        values: dict[str, Any] = {**changes, "state": target, "updated": timezone.now()}
        if values.get("result") is not None:
            # A tool's output: a NUL or a lone surrogate in it, or a NaN, would be refused
            # by PostgreSQL (DataError) or by the JSON renderer; it is repaired, not lost.
            values["result"] = make_storable(values["result"])
        if target in FINISHED_STATES:
            values.setdefault("finished_at", values["updated"])
            values.setdefault("lease_expires_at", None)
        won = ToolCall.objects.filter(pk=call.pk, state=current, attempts=call.attempts).update(
            **values
        )
        if won != 1:
            raise InvalidTransition(current, target, "the call was changed concurrently")
        for name, value in values.items():
            setattr(call, name, value)
        _announce(call, current)
        if target in FINISHED_STATES:
            for receiver, error in call_finished.send_robust(
                sender=ToolCall, call_id=call.pk, conversation=call.conversation
            ):
                if isinstance(error, Exception):
                    logger.error("call_finished receiver %r failed: %r", receiver, error)
    logger.info("tool call %s: %s -> %s", call.pk, current, target)
    return call


def _announce(call: ToolCall, previous: str) -> None:
    # A receiver's failure must not fail the transition.
    for receiver, response in call_transitioned.send_robust(
        sender=ToolCall, call=call, previous=previous
    ):
        if isinstance(response, Exception):
            logger.error(
                "call_transitioned receiver %r failed: %r", receiver, response, exc_info=response
            )


# -- requesting a call ----------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    import json

    return make_storable(json.loads(json.dumps(value, default=str)))


def _user_label(user: Any) -> str:
    if user is None:
        return ""
    get_username = getattr(user, "get_username", None)
    return str(get_username() if callable(get_username) else user)[:150]


def _preview(tool: Tool, invocation: ToolInvocation, user: Any) -> dict[str, Any]:
    preview: dict[str, Any] = {"tool": tool.name, "group": tool.group, "user": _user_label(user)}
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
    policy.  Returns ``(verdict, None)`` for the approval card (the verdict and the resolved
    addresses as of the request; execution checks everything again, DNS can change), or
    ``(None, refusal)``: the call fails at once with the guard's reason code, and the
    refusal is an ``EgressEvent``.  A DNS failure is not a refusal: the card says the
    destination could not be checked.
    """
    from django_webfetch.egress import EgressRecorder, policy_for
    from django_webfetch.net.errors import EgressDenied
    from django_webfetch.net.guard import explain
    from django_webfetch.tools._egress import requested_host

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
        policy = policy_for(tool.group, user=user, require_scope=tool.scope)
    except EgressDenied as exc:
        recorder.record(
            decision="denied", reason=exc.reason, url_host=host, port=port, detail="pre-flight"
        )
        return None, ToolResult.from_exception(exc)
    explanation = explain(url, policy=policy)
    if explanation.allowed:
        destination = explanation.destination
        addresses = [str(a) for a in destination.addresses] if destination else []
        return {
            "verdict": "allowed",
            "addresses": addresses,
            "checked_at": checked_at,
        }, None
    reason = explanation.reason or "denied"
    if reason == "dns_error":
        return {"verdict": "unchecked", "reason": reason, "checked_at": checked_at}, None
    recorder.record(decision="denied", reason=reason, url_host=host, port=port, detail="pre-flight")
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
) -> ToolCall:
    """Record a call the assistant asked for, and start it as far as it may go.

    - invalid arguments: the call ends ``failed`` / ``invalid_arguments``, nothing runs;
    - needs approval: it stops in ``awaiting_approval`` (nothing holds a worker);
    - otherwise it is approved at once and run (in-process, or queued on Celery).

    Raises :class:`ToolNotOfferedError` when the tool is not offered to ``user``, and
    :class:`~django_webfetch.runs.bounds.InputRejected` (nothing stored, one audit line in
    the log) when the tool name, the conversation or the arguments cannot be stored: a
    NUL or a lone surrogate anywhere, nesting deeper than 32 levels, arguments over 16 KiB
    as JSON (``runs/bounds.py``) — whatever the tool, offered or not.
    """
    try:
        check_text(str(tool_name), where="tool")
        check_text(str(conversation or ""), where="conversation")
        try:
            check_storable(arguments)
        except InputRejected as exc:
            if exc.code != "not_json":
                raise
            # Not plain JSON (a Python object): recorded as invalid arguments below.
    except InputRejected as exc:
        logger.warning(
            "tool call refused before it was stored: %s (%s) tool=%.100r user=%s",
            exc.code,
            exc,
            str(tool_name)[:100],
            getattr(user, "pk", None),
        )
        raise
    offered = {t.name: t for t in tool_registry.tools_for_user(user)}
    tool = offered.get(tool_name)
    try:
        stored_arguments = _jsonable(arguments)
        if stored_arguments is None:
            stored_arguments = {}
        check_storable(stored_arguments)
    except (TypeError, ValueError, RecursionError):
        stored_arguments = {}
        arguments = None
    if tool is None:
        # A refused request stays on record (a prompt-injected attempt is worth an audit
        # trail): a finished call, nothing run.
        known = tool_registry.get(str(tool_name)[:100])
        why, sentence = tool_registry.why_not_offered(user, tool_name)
        with transaction.atomic():
            refused = ToolCall.objects.create(
                tool=str(tool_name)[:100],
                group=known.group if known is not None else "",
                arguments=stored_arguments,
                user=user if getattr(user, "pk", None) is not None else None,
                conversation=(conversation or "")[:200],
            )
            transition(
                refused,
                CallState.FAILED,
                reason="tool_not_offered",
                result=ToolResult.failure("tool_not_offered", sentence, why=why).to_dict(),
            )
        raise ToolNotOfferedError(sentence, why=why)

    with transaction.atomic():
        call = ToolCall.objects.create(
            tool=tool.name,
            group=tool.group,
            arguments=stored_arguments,
            user=user,
            conversation=(conversation or "")[:200],
        )
        invalid = validate_arguments(tool, arguments)
        if invalid is not None:
            return transition(
                call, CallState.FAILED, reason="invalid_arguments", result=invalid.to_dict()
            )
        invocation = ToolInvocation(
            tool=tool.name, arguments=dict(arguments), user=user, call_id=str(call.pk)
        )
        needs_approval = ToolApprovalRule.requires_approval(
            tool, invocation, ToolContext(user=user, call_id=str(call.pk))
        )
        if needs_approval:
            # Pre-flight: the guard without connecting, before a human is asked.
            verdict, refusal = preflight(tool, invocation, user)
            if refusal is not None:
                why = str(refusal.meta.get("reason") or refusal.error or "")[:64]
                return transition(call, CallState.FAILED, reason=why, result=refusal.to_dict())
            now = timezone.now()
            preview = _preview(tool, invocation, user)
            if verdict is not None:
                preview["preflight"] = verdict
            return transition(
                call,
                CallState.AWAITING_APPROVAL,
                requires_approval=True,
                approval_preview=preview,
                expires_at=now + timedelta(seconds=conf.WEBFETCH_APPROVAL_TTL),
            )
        call = transition(
            call, CallState.APPROVED, requires_approval=False, queued_at=timezone.now()
        )
    return _dispatch(call)


# -- human decisions ------------------------------------------------------------------------


def _expired(call: ToolCall, now: datetime | None = None) -> bool:
    return (
        call.state == CallState.AWAITING_APPROVAL
        and call.expires_at is not None
        and call.expires_at <= (now or timezone.now())
    )


def _decision_check(by: Any, target: str) -> Callable[[ToolCall], None]:
    def check(call: ToolCall) -> None:
        # TRANSITIONS also has running -> approved (the retry of a lost worker's call): a
        # human decision must not take that edge, or approving a running call runs it again.
        if call.state != CallState.AWAITING_APPROVAL:
            raise InvalidTransition(call.state, target)
        if not _may_approve(by):
            raise ApprovalPermissionDenied()
        if call.user_id == by.pk and not conf.WEBFETCH_ALLOW_SELF_APPROVAL:
            raise SelfApprovalDenied()
        if _expired(call):
            raise CallExpiredError(target)

    return check


def _comment(comment: str) -> str:
    text = str(comment or "")[:MAX_COMMENT_CHARS]
    check_text(text, where="comment")
    return text


def _decide(
    call: ToolCall | uuid.UUID | str, target: str, *, by: Any, comment: str, **changes: Any
) -> ToolCall:
    try:
        return transition(
            call,
            target,
            check=_decision_check(by, target),
            decided_by=by,
            decided_at=timezone.now(),
            decision_comment=_comment(comment),
            **changes,
        )
    except CallExpiredError:
        _expire_one(_call_id(call))
        raise


def approve(call: ToolCall | uuid.UUID | str, *, by: Any, comment: str = "") -> ToolCall:
    """Approve a call awaiting approval and start it."""
    approved = _decide(call, CallState.APPROVED, by=by, comment=comment, queued_at=timezone.now())
    return _dispatch(approved)


def deny(call: ToolCall | uuid.UUID | str, *, by: Any, comment: str = "") -> ToolCall:
    result = ToolResult.failure("approval_denied", "A reviewer denied this tool call.")
    return _decide(
        call,
        CallState.DENIED,
        by=by,
        comment=comment,
        reason="approval_denied",
        result=result.to_dict(),
    )


def cancel(call: ToolCall | uuid.UUID | str, *, by: Any, comment: str = "") -> ToolCall:
    """Cancel a call that has not started running.

    - awaiting approval: its owner or an approver, comment optional;
    - approved (queued, not yet running): its owner, who withdraws the request; anyone else
      (an approver) only with a ``comment`` giving the reason, which the call's result
      shows next to the approver it overrides (:class:`CancelReasonRequired` otherwise).

    The result says who cancelled, in which state, and whose approval it overturned; the
    reason code is ``cancelled`` or ``cancelled_after_approval``.
    """
    text = _comment(comment)

    def check(row: ToolCall) -> None:
        if not can_cancel(by, row):
            raise CancelPermissionDenied()
        if row.state == CallState.APPROVED and row.user_id != by.pk and not text.strip():
            raise CancelReasonRequired()

    current = ToolCall.objects.filter(pk=_call_id(call)).select_related("decided_by").first()
    after_approval = current is not None and current.state == CallState.APPROVED
    who = _user_label(by)
    if after_approval:
        assert current is not None
        approver = _user_label(current.decided_by) if current.decided_by_id else ""
        message = f"The tool call was cancelled by {who} after " + (
            f"{approver} approved it." if approver else "it was approved."
        )
        if text:
            message += f" Reason: {text}"
        result = ToolResult.failure(
            "cancelled",
            message,
            cancelled_by=who,
            cancelled_state=CallState.APPROVED,
            overrode_approval_by=approver,
            cancel_comment=text,
        )
        reason = "cancelled_after_approval"
        expected = str(CallState.APPROVED)
    else:
        result = ToolResult.failure(
            "cancelled",
            f"The tool call was cancelled by {who}." + (f" Reason: {text}" if text else ""),
            cancelled_by=who,
            cancelled_state=current.state if current is not None else "",
            cancel_comment=text,
        )
        reason = "cancelled"
        expected = str(current.state) if current is not None else ""

    def check_state(row: ToolCall) -> None:
        # The state changed between the read above and the lock: decide again (the message
        # must describe the state actually cancelled).
        if row.state != expected:
            raise InvalidTransition(row.state, CallState.CANCELLED, "the call was just changed")
        check(row)

    changes: dict[str, Any] = {"reason": reason, "result": result.to_dict()}
    if not after_approval:
        changes["decision_comment"] = text
    return transition(call, CallState.CANCELLED, check=check_state, **changes)


# -- expiry and recovery (periodic task, and on read) ---------------------------------------


def _expire_one(call_id: Any) -> ToolCall | None:
    def check(call: ToolCall) -> None:
        if not _expired(call):
            raise InvalidTransition(call.state, CallState.EXPIRED, "not due")

    result = ToolResult.failure("approval_expired", "Nobody approved this tool call in time.")
    try:
        return transition(
            call_id,
            CallState.EXPIRED,
            check=check,
            reason="approval_expired",
            result=result.to_dict(),
        )
    except (InvalidTransition, ToolCall.DoesNotExist):
        return None


def expire_due(now: datetime | None = None, *, calls: Any = None) -> int:
    """Expire every call whose approval request is past its time; returns how many."""
    queryset = calls if calls is not None else ToolCall.objects.all()
    due = queryset.filter(state=CallState.AWAITING_APPROVAL, expires_at__lte=now or timezone.now())
    return sum(
        1
        for call_id in list(due.values_list("pk", flat=True)[:1000])
        if _expire_one(call_id) is not None
    )


def _lost(call: ToolCall, now: datetime | None = None) -> bool:
    return (
        call.state == CallState.RUNNING
        and call.lease_expires_at is not None
        and call.lease_expires_at <= (now or timezone.now())
    )


def _may_retry(call: ToolCall) -> bool:
    if call.attempts >= MAX_ATTEMPTS or not runs_async():
        return False
    tool = tool_registry.get(call.tool)
    # A write may have happened before the worker died: never repeat it.
    return tool is not None and tool.effect is Effect.READ


class _NoRetryLeft(InvalidTransition):
    pass


def _recover_one(call_id: Any, *, dispatch: bool = True) -> ToolCall | None:
    """A running call whose lease expired: retry it once, else fail it (``worker_lost``)."""

    def check_retry(call: ToolCall) -> None:
        if not _lost(call):
            raise InvalidTransition(call.state, CallState.APPROVED, "the lease has not expired")
        if not _may_retry(call):
            raise _NoRetryLeft(call.state, CallState.APPROVED, "no retry left")

    def check_fail(call: ToolCall) -> None:
        if not _lost(call):
            raise InvalidTransition(call.state, CallState.FAILED, "the lease has not expired")

    try:
        try:
            call = transition(
                call_id,
                CallState.APPROVED,
                check=check_retry,
                queued_at=timezone.now(),
                lease_expires_at=None,
                worker="",
            )
        except _NoRetryLeft:
            lost = ToolResult.failure("worker_lost", "The worker running this call was lost.")
            call = transition(
                call_id,
                CallState.FAILED,
                check=check_fail,
                reason="worker_lost",
                result=lost.to_dict(),
            )
            logger.warning("tool call %s: worker lost, failed", call.pk)
            return call
    except (InvalidTransition, ToolCall.DoesNotExist):
        return None
    logger.warning("tool call %s: worker lost, retrying (attempt %s done)", call.pk, call.attempts)
    return _dispatch(call) if dispatch else call


def recover_lost(now: datetime | None = None, *, calls: Any = None) -> int:
    queryset = calls if calls is not None else ToolCall.objects.all()
    due = queryset.filter(state=CallState.RUNNING, lease_expires_at__lte=now or timezone.now())
    return sum(
        1
        for call_id in list(due.values_list("pk", flat=True)[:1000])
        if _recover_one(call_id) is not None
    )


def _requeue_stale(now: datetime | None = None) -> int:
    """Queue again approved calls that waited past ``WEBFETCH_REQUEUE_AFTER``
    (``runs/queue.py``)."""
    if not runs_async():
        return 0
    from django_webfetch.runs.queue import requeue_due

    return requeue_due(now)


@dataclass(frozen=True)
class SweepReport:
    expired: int
    recovered: int
    requeued: int
    pruned: int = 0


def sweep(now: datetime | None = None) -> SweepReport:
    """The periodic task's work: expire due approvals, recover calls of lost workers,
    queue again approved calls whose task message went missing, and drop the content of
    calls past ``WEBFETCH_CALL_RETENTION_DAYS``."""
    return SweepReport(expire_due(now), recover_lost(now), _requeue_stale(now), prune_calls(now))


def prune_calls(
    now: datetime | None = None, *, days: int | None = None, dry_run: bool = False
) -> int:
    """Drop the content of calls that finished more than ``days`` ago (default
    ``WEBFETCH_CALL_RETENTION_DAYS``); return how many.

    Third-party page text, query strings and the approval card go; the row stays as audit
    metadata: tool, group, user, state, reason, who decided and when, the timestamps, and
    the result's error code.
    """
    now = now or timezone.now()
    days = conf.WEBFETCH_CALL_RETENTION_DAYS if days is None else days
    due = ToolCall.objects.filter(
        state__in=FINISHED_STATES,
        finished_at__lt=now - timedelta(days=days),
        content_pruned_at__isnull=True,
    )
    if dry_run:
        return due.count()
    pruned = 0
    for pk, result in due.values_list("pk", "result").iterator(chunk_size=500):
        error = result.get("error") if isinstance(result, dict) else None
        pruned += ToolCall.objects.filter(pk=pk, content_pruned_at__isnull=True).update(
            arguments={},
            approval_preview={},
            decision_comment="",
            result={"content": "", "error": error, "meta": {}},
            content_pruned_at=now,
        )
    return pruned


def refresh(call: ToolCall) -> ToolCall:
    """Enforce expiry and worker loss on read; return the current row."""
    if _expired(call):
        _expire_one(call.pk)
    elif _lost(call):
        _recover_one(call.pk)
    elif runs_async() and call.state == CallState.APPROVED:
        from django_webfetch.runs.queue import requeue_due

        # A poll is a sweep of this one call: a message lost with the broker is queued
        # again even where no beat runs.
        if not requeue_due(calls=ToolCall.objects.filter(pk=call.pk)):
            return call
    else:
        return call
    return ToolCall.objects.get(pk=call.pk)


# -- running --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecuteOutcome:
    """What :func:`execute` did.  ``retry_after``: when another attempt holds the call,
    the seconds until its lease runs out."""

    action: str  # "ran" | "noop" | "busy" | "recovered" | "discarded"
    state: str
    retry_after: float | None = None


def _worker_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"[:200]


def execute(
    call_id: uuid.UUID | str, *, redelivered: bool = False, worker: str = ""
) -> ExecuteOutcome:
    """Run an approved call once.  Idempotent: a finished call, a call that is not
    approved, or one that another live attempt holds is left alone.  Never raises for a
    tool's failure (the result records it)."""
    now = timezone.now()
    try:
        call = ToolCall.objects.get(pk=call_id)
    except (ToolCall.DoesNotExist, ValueError, ValidationError):
        logger.warning("tool call %s does not exist", call_id)
        return ExecuteOutcome("noop", "")
    if call.state == CallState.RUNNING:
        if not _lost(call, now):
            # Another attempt holds the call (a duplicate message, or a redelivery that
            # came before the lease ran out): leave it; the sweep recovers it if that
            # attempt is lost.
            assert call.lease_expires_at is not None
            wait = max((call.lease_expires_at - now).total_seconds(), 0.0)
            logger.info(
                "tool call %s is held by %s (redelivered=%s)", call.pk, call.worker, redelivered
            )
            return ExecuteOutcome("busy", call.state, retry_after=wait)
        # The attempt's worker is gone: retry here (once), or fail with worker_lost.
        recovered = _recover_one(call.pk, dispatch=False)
        if recovered is None or recovered.state != CallState.APPROVED:
            return ExecuteOutcome("recovered", recovered.state if recovered else call.state)
        call = recovered
    if call.state == CallState.AWAITING_APPROVAL and _expired(call, now):
        _expire_one(call.pk)
        return ExecuteOutcome("noop", CallState.EXPIRED)
    if call.state != CallState.APPROVED:
        return ExecuteOutcome("noop", call.state)

    try:
        call = transition(
            call,
            CallState.RUNNING,
            attempts=call.attempts + 1,
            started_at=now,
            lease_expires_at=now + timedelta(seconds=lease_seconds()),
            worker=(worker or _worker_label())[:200],
        )
    except (InvalidTransition, ToolCall.DoesNotExist):
        # Another worker took it (a duplicate message), or it was cancelled meanwhile.
        current = ToolCall.objects.filter(pk=call.pk).values_list("state", flat=True).first()
        return ExecuteOutcome("noop", current or "")

    attempt = call.attempts
    context = ToolContext(
        user=call.user,
        call_id=str(call.pk),
        # Only a human decision is an approval.  A call approved at once (no approval
        # needed when it was requested) is checked again against the live rule: an
        # operator who turned the skip flag off or emptied the allowlist while it waited
        # in the queue (or before a sweep re-queued it) gets ``approval_required``.
        approved=bool(call.requires_approval),
        plugin_instance=_plugin_instance(call.tool),
    )
    try:
        with _Heartbeat(call.pk, attempt):
            result = tool_registry.run(
                call.tool, dict(call.arguments), user=call.user, context=context
            )
    except BaseException as exc:  # run_tool never raises; a time limit or a kill may
        if not isinstance(exc, Exception):
            raise
        logger.exception("tool call %s: run_tool raised", call.pk)
        result = ToolResult.failure("internal_error", "The tool failed unexpectedly.")
    return _finish_surviving_the_database(call.pk, attempt, result)


def _finish_surviving_the_database(
    call_id: Any, attempt: int, result: ToolResult
) -> ExecuteOutcome:
    """``_finish``, retried while the database is unavailable (a restart, a failover) for
    as long as the attempt's lease lasts: the result is in memory, and losing it would make
    the sweep run the call a second time once the lease ran out."""
    deadline = time.monotonic() + lease_seconds()
    delay = 0.25
    while True:
        try:
            return _finish(call_id, attempt, result)
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block or time.monotonic() + delay > deadline:
                raise
            logger.warning("tool call %s: database unavailable, result kept; retrying", call_id)
            connection.close()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def _plugin_instance(tool_name: str) -> Any:
    """The plugin instance a plugin's tool runs with (DESIGN.md §8); ``None`` for others."""
    plugin = getattr(tool_registry.get(tool_name), "plugin", None)
    if not isinstance(plugin, str):
        return None
    from django_webfetch.plugins.services import instance_for

    return instance_for(plugin)


def _finish(call_id: Any, attempt: int, result: ToolResult) -> ExecuteOutcome:
    def check(call: ToolCall) -> None:
        if call.attempts != attempt:
            raise InvalidTransition(call.state, "finished", "a newer attempt owns the call")

    target = CallState.SUCCEEDED if result.ok else CallState.FAILED
    try:
        call = transition(
            call_id, target, check=check, reason=result.error or "", result=result.to_dict()
        )
    except (InvalidTransition, ToolCall.DoesNotExist):
        logger.warning("tool call %s: result of attempt %s discarded", call_id, attempt)
        current = ToolCall.objects.filter(pk=call_id).values_list("state", flat=True).first()
        return ExecuteOutcome("discarded", current or "")
    return ExecuteOutcome("ran", call.state)


# -- dispatching ----------------------------------------------------------------------------


def _enqueue(call_id: Any, tool: str = "", *, retrying: bool = False) -> bool:
    """Publish the call's task; ``False`` (and reason ``queued_retry`` on the call) when the
    broker cannot take it: the sweep queues it again (``WEBFETCH_REQUEUE_AFTER``)."""
    try:
        from django_webfetch import tasks
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise WebFetchImproperlyInstalled("celery", "celery") from exc
    from django_webfetch.runs.queue import QUEUED_RETRY, mark_queued, queue_for

    soft, hard = time_limits()
    options: dict[str, Any] = {}
    queue = queue_for(tool)
    if queue:
        options["queue"] = queue
    try:
        tasks.run_tool_call.apply_async(
            args=(str(call_id),),
            # celery-types declares the limits as int, but Celery takes seconds as float:
            # they travel in the message's ``timelimit`` header and billiard's timers
            # compare them as floats.
            soft_time_limit=soft,  # type: ignore[arg-type]
            time_limit=hard,  # type: ignore[arg-type]
            **options,
        )
    except Exception:
        # The call stays approved, and says so; the sweep queues it again.
        logger.exception("tool call %s could not be queued", call_id)
        mark_queued(call_id, QUEUED_RETRY)
        return False
    if retrying:
        mark_queued(call_id, "")
    return True


def _dispatch(call: ToolCall) -> ToolCall:
    """Start an approved call: queue it after the commit, or run it here and now."""
    if call.state != CallState.APPROVED:
        return call
    if runs_async():
        if connection.in_atomic_block:
            transaction.on_commit(partial(_enqueue, call.pk, call.tool))
        elif not _enqueue(call.pk, call.tool):
            from django_webfetch.runs.queue import QUEUED_RETRY

            call.reason = QUEUED_RETRY
        return call
    execute(call.pk, worker=f"in-process:{_worker_label()}")
    return ToolCall.objects.get(pk=call.pk)
