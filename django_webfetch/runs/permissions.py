"""Who may approve, read and cancel a tool call."""

from __future__ import annotations

from typing import Any

from django_webfetch.conf import conf
from django_webfetch.models import ToolCall

from .durable import is_active

__all__ = [
    "APPROVE_PERMISSION",
    "can_approve",
    "can_cancel",
    "can_read",
    "may_approve",
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


def can_read(user: Any, call: ToolCall) -> bool:
    if not is_active(user):
        return False
    return call.user_id == user.pk or may_approve(user)


def can_cancel(user: Any, call: ToolCall) -> bool:
    return can_read(user, call)


def visible_calls(user: Any) -> Any:
    """The calls ``user`` may read: their own; approvers see all."""
    if not is_active(user):
        return ToolCall.objects.none()
    if may_approve(user):
        return ToolCall.objects.all()
    return ToolCall.objects.filter(user=user)
