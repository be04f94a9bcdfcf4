"""The calls waiting for a human, and how long they have waited (operator page, metrics)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from django_webfetch import metrics
from django_webfetch.models import CallState, ToolCall
from django_webfetch.tools import default_registry as tool_registry

__all__ = ["approval_gauges", "count_transition", "waiting_approvals"]


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


def approval_gauges() -> list[tuple[str, str, dict[tuple[tuple[str, str], ...], float]]]:
    """Scrape-time gauges (``metrics.add_source``): calls waiting, the oldest one's age."""
    waiting = waiting_approvals(limit=1)
    return [
        ("webfetch_approvals_waiting", "Tool calls awaiting approval.", {(): waiting["count"]}),
        (
            "webfetch_approvals_oldest_waiting_seconds",
            "Age of the oldest tool call awaiting approval (0: none).",
            {(): waiting["oldest_age"]},
        ),
    ]


def count_transition(sender: Any, call: ToolCall, previous: str = "", **kwargs: Any) -> None:
    """``call_transitioned`` receiver: ``webfetch_tool_calls_total{tool, state}``; a name
    the registry does not know (a model may ask for any) counts as ``other``."""
    tool = call.tool if tool_registry.get(call.tool) is not None else "other"
    metrics.tool_call_state(tool, call.state)
