"""Who may do what.  The rules live in ``django_webfetch.runs``; these adapt them to DRF."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from django_webfetch import runs

__all__ = ["CanApprove", "CanReadCall", "IsActiveUser"]


class IsActiveUser(BasePermission):
    """Authenticated and active: anonymous users get nothing."""

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_active)


class CanReadCall(IsActiveUser):
    """A call's owner, or an approver."""

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        return runs.can_read(request.user, obj)


class CanApprove(IsActiveUser):
    """Holds ``django_webfetch.approve_toolcall`` (self-approval is refused by the service,
    with its own code)."""

    message = "You may not approve or deny tool calls."
    code = "approval_not_permitted"

    def has_permission(self, request: Any, view: Any) -> bool:
        return super().has_permission(request, view) and bool(
            request.user.has_perm(runs.APPROVE_PERMISSION)
        )
