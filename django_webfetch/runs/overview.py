"""The calls waiting for a human, and how long they have waited (operator page, metrics)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from django_webfetch.models import CallState, ToolCall

__all__ = ["waiting_approvals"]


def waiting_approvals(now: datetime | None = None, *, limit: int = 20) -> dict[str, Any]:
    """``{"count", "oldest_age" (seconds, 0 when none), "calls": [(call, age seconds)]}``:
    the calls awaiting approval, oldest first (``limit`` of them listed)."""
    now = now or timezone.now()
    waiting = ToolCall.objects.filter(state=CallState.AWAITING_APPROVAL)
    calls = list(waiting.select_related("user").order_by("created", "pk")[:limit])
    ages = [(call, max((now - call.created).total_seconds(), 0.0)) for call in calls]
    return {
        "count": waiting.count(),
        "oldest_age": ages[0][1] if ages else 0.0,
        "calls": ages,
    }
