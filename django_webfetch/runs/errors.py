"""The errors of tool-call runs::

WebFetchError
└── RunError                               .code
    ├── InvalidTransition                  .current .target
    │   └── CallExpiredError
    ├── ToolNotOfferedError
    ├── ApprovalPermissionDenied
    │   └── SelfApprovalDenied
    ├── CancelPermissionDenied
    └── CancelReasonRequired
"""

from __future__ import annotations

from django_webfetch.models import CallState
from django_webfetch.net.errors import WebFetchError

from .durable import TransitionRefused

__all__ = [
    "ApprovalPermissionDenied",
    "CallExpiredError",
    "CancelPermissionDenied",
    "CancelReasonRequired",
    "InvalidTransition",
    "RunError",
    "SelfApprovalDenied",
    "ToolNotOfferedError",
]


class RunError(WebFetchError):
    code = "run_error"
    default_message = "the tool call cannot be changed"


class InvalidTransition(TransitionRefused, RunError):
    """The call is not in a state that allows the change (it may have just changed)."""

    code = "invalid_transition"
    noun = "call"


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
