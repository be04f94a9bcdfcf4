"""What the egress audit log says over a window: decisions by reason, decisions per hour,
the slowest destinations (the operator page in the admin reads these)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, Max
from django.db.models.functions import TruncHour

from django_webfetch.models import Decision, EgressEvent

__all__ = ["decisions_by_reason", "decisions_per_hour", "outcome_of", "slowest_destinations"]

#: A decision's outcome as operators count it: allowed, denied or failed.
_OUTCOMES: dict[str, str] = {
    Decision.ALLOWED.value: "allowed",
    Decision.FETCHED.value: "allowed",
    Decision.DENIED.value: "denied",
    Decision.FAILED.value: "failed",
}


def outcome_of(decision: str) -> str:
    return _OUTCOMES.get(decision, "failed")


def decisions_by_reason(since: datetime, *, limit: int = 50) -> list[dict[str, Any]]:
    """``[{"decision", "reason", "count"}]`` since ``since``, most frequent first."""
    rows = (
        EgressEvent.objects.filter(created__gte=since)
        .values("decision", "reason")
        .annotate(count=Count("id"))
        .order_by("-count", "decision", "reason")[:limit]
    )
    return [dict(r) for r in rows]


def decisions_per_hour(now: datetime, *, hours: int = 24) -> list[dict[str, Any]]:
    """One entry per hour of the last ``hours`` (oldest first, empty hours included):
    ``{"hour": datetime, "allowed": n, "denied": n, "failed": n}``: the guard's decisions
    and the failures (a completed fetch is counted by its guard decision only)."""
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(hours=hours)
    slots = [
        {"hour": start + timedelta(hours=i), "allowed": 0, "denied": 0, "failed": 0}
        for i in range(hours)
    ]
    rows = (
        EgressEvent.objects.filter(created__gte=start, created__lt=end)
        .annotate(hour=TruncHour("created"))
        .values("hour", "decision")
        .annotate(count=Count("id"))
    )
    for row in rows:
        index = int((row["hour"] - start).total_seconds() // 3600)
        # A completed fetch also has its guard decision ("allowed"): counting both would
        # show every fetch twice.
        if row["decision"] == Decision.FETCHED:
            continue
        if 0 <= index < hours:
            slots[index][outcome_of(row["decision"])] += row["count"]
    return slots


def slowest_destinations(since: datetime, *, limit: int = 10) -> list[dict[str, Any]]:
    """Hosts by mean duration of their fetches (first hops, fetched or failed) since
    ``since``: ``[{"url_host", "count", "mean", "worst", "failed"}]``."""
    rows = (
        EgressEvent.objects.filter(
            created__gte=since, hop=0, decision__in=[Decision.FETCHED, Decision.FAILED]
        )
        .exclude(url_host="")
        .values("url_host")
        .annotate(count=Count("id"), mean=Avg("duration"), worst=Max("duration"))
        .order_by("-mean", "url_host")[:limit]
    )
    result = [dict(r) for r in rows]
    failed: dict[str, int] = dict(
        EgressEvent.objects.filter(
            created__gte=since,
            hop=0,
            decision=Decision.FAILED,
            url_host__in=[r["url_host"] for r in result],
        )
        .values("url_host")
        .annotate(n=Count("id"))
        .values_list("url_host", "n")
    )
    for row in result:
        row["failed"] = failed.get(str(row["url_host"]), 0)
    return result
