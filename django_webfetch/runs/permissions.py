"""Who may approve, read and cancel a tool call."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from django_webfetch.conf import conf
from django_webfetch.models import CallState, ToolCall

from .durable import is_active

__all__ = [
    "APPROVE_PERMISSION",
    "can_approve",
    "can_cancel",
    "can_read",
    "can_read_result",
    "may_approve",
    "reads_every_result",
    "visible_calls",
]

APPROVE_PERMISSION = "django_webfetch.approve_toolcall"


def may_approve(user: Any) -> bool:
    """Is ``user`` an approver at all (active, with the approve permission)?"""
    return is_active(user) and bool(user.has_perm(APPROVE_PERMISSION))


def can_approve(user: Any, call: ToolCall) -> bool:
    """May ``user`` approve or deny ``call`` (ignoring its state)?"""
    if not may_approve(user):
        return False
    return conf.WEBFETCH_ALLOW_SELF_APPROVAL or call.user_id != user.pk


def reads_every_result(user: Any) -> bool:
    """Superusers read every call's result (the one exception to "the requester only")."""
    return is_active(user) and bool(getattr(user, "is_superuser", False))


def requested_or_superuser(user: Any, call: ToolCall) -> bool:
    """Is ``user`` the call's requester, or a superuser?"""
    return is_active(user) and (call.user_id == user.pk or reads_every_result(user))


#: A call that ended so never ran its tool: its result is the host's account of the
#: outcome (who denied or cancelled it, and why), not anything the tool returned.
OUTCOME_ONLY = frozenset({CallState.DENIED, CallState.EXPIRED, CallState.CANCELLED})


def can_read_result(user: Any, call: ToolCall) -> bool:
    """May ``user`` read what ``call`` returned (its ``result``)?  The requester and
    superusers; whoever reads the call (:func:`can_read`) also reads the result of a call
    that never ran (denied, expired, cancelled: the outcome, in the host's words).  An
    approver, or a holder of a model's view permission, never reads what a tool returned
    for another user (docs/approval.rst, "Who reads a result")."""
    if requested_or_superuser(user, call):
        return True
    return call.state in OUTCOME_ONLY and can_read(user, call)


def can_read(user: Any, call: ToolCall) -> bool:
    """May ``user`` read ``call``'s record (its card, arguments, state and reason)?  The
    requester and superusers, and approvers for a call that went to approval; the result
    itself only by :func:`can_read_result`, read through ``runs.results``."""
    if requested_or_superuser(user, call):
        return True
    return bool(call.requires_approval) and may_approve(user)


def can_cancel(user: Any, call: ToolCall) -> bool:
    return can_read(user, call)


def visible_calls(user: Any) -> Any:
    """The calls ``user`` may read (:func:`can_read`): their own; approvers also those that
    went to approval; superusers all."""
    if not is_active(user):
        return ToolCall.objects.none()
    if reads_every_result(user):
        return ToolCall.objects.all()
    if may_approve(user):
        return ToolCall.objects.filter(Q(user=user) | Q(requires_approval=True))
    return ToolCall.objects.filter(user=user)
