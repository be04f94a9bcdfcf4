"""Human decisions on a call: approve, deny, cancel."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from django_webfetch.conf import conf
from django_webfetch.models import CallState, ToolCall
from django_webfetch.runs.bounds import MAX_COMMENT_CHARS, check_text
from django_webfetch.tools import ToolResult

from .errors import (
    ApprovalPermissionDenied,
    CallExpiredError,
    CancelPermissionDenied,
    CancelReasonRequired,
    InvalidTransition,
    SelfApprovalDenied,
)
from .permissions import can_cancel, may_approve
from .queue import start
from .recover import expire_one
from .request import user_label
from .state import call_id_of, expired, transition

__all__ = ["approve", "cancel", "deny"]


def _decision_check(by: Any, target: str) -> Callable[[ToolCall], None]:
    def check(call: ToolCall) -> None:
        # TRANSITIONS also has running -> approved (the retry of a lost worker's call): a
        # human decision must not take that edge, or approving a running call runs it again.
        if call.state != CallState.AWAITING_APPROVAL:
            raise InvalidTransition(call.state, target)
        if not may_approve(by):
            raise ApprovalPermissionDenied()
        if call.user_id == by.pk and not conf.WEBFETCH_ALLOW_SELF_APPROVAL:
            raise SelfApprovalDenied()
        if expired(call):
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
        expire_one(call_id_of(call))
        raise


def approve(call: ToolCall | uuid.UUID | str, *, by: Any, comment: str = "") -> ToolCall:
    """Approve a call awaiting approval and start it."""
    approved = _decide(call, CallState.APPROVED, by=by, comment=comment, queued_at=timezone.now())
    return start(approved)


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

    current = ToolCall.objects.filter(pk=call_id_of(call)).select_related("decided_by").first()
    after_approval = current is not None and current.state == CallState.APPROVED
    result, reason, expected = _cancellation(current, by=by, text=text)

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


def _cancellation(current: ToolCall | None, *, by: Any, text: str) -> tuple[ToolResult, str, str]:
    """The cancelled call's result, reason code and the state it is expected to leave."""
    after_approval = current is not None and current.state == CallState.APPROVED
    who = user_label(by)
    if after_approval:
        assert current is not None
        approver = user_label(current.decided_by) if current.decided_by_id else ""
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
    return result, reason, expected
