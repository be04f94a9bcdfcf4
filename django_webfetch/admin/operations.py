"""The operator page (admin: *Operations overview*): the egress decisions of the last day
by reason (with a chart per hour), the approvals waiting and their age, the budgets in use
and the slowest destinations.  Plain HTML and an inline SVG; it reads the services."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from django_webfetch.budgets import budgets_in_use
from django_webfetch.egress.stats import (
    decisions_by_reason,
    decisions_per_hour,
    outcome_of,
    slowest_destinations,
)
from django_webfetch.models import OperationsOverview
from django_webfetch.runs.overview import waiting_approvals

from . import RecordsOnly

if TYPE_CHECKING:
    _OverviewAdmin = admin.ModelAdmin[OperationsOverview]
else:
    _OverviewAdmin = admin.ModelAdmin

#: The chart: one bar per hour, stacked allowed / denied / failed.
CHART_WIDTH = 480
CHART_HEIGHT = 120
_BAR_GAP = 2
_LABEL_HEIGHT = 16


#: What a row of the table counts.  A fetch the guard allowed has two rows: its guard
#: decision (one per hop) and the completed fetch, which are not two fetches.
DECISION_LABELS = {
    "allowed": _("guard allowed (one per hop)"),
    "denied": _("guard denied"),
    "fetched": _("fetch completed (one per fetch)"),
    "failed": _("failed"),
}


def hourly_chart(hours: list[dict[str, Any]]) -> dict[str, Any]:
    """Rectangles of the inline SVG (numbers only: the template draws them)."""
    most = max((h["allowed"] + h["denied"] + h["failed"] for h in hours), default=0) or 1
    width = CHART_WIDTH / max(len(hours), 1)
    bars = []
    for index, hour in enumerate(hours):
        y = float(CHART_HEIGHT)
        for outcome in ("allowed", "denied", "failed"):
            count = hour[outcome]
            if not count:
                continue
            height = count / most * (CHART_HEIGHT - 10)
            y -= height
            bars.append(
                {
                    "x": round(index * width + _BAR_GAP / 2, 1),
                    "y": round(y, 1),
                    "width": round(width - _BAR_GAP, 1),
                    "height": round(height, 1),
                    "outcome": outcome,
                    "title": f"{hour['hour']:%H}:00 {outcome}: {count}",
                }
            )
    # The hour of every sixth bar, and of the last, under the bars (the site's TIME_ZONE).
    # The last label ends at the chart's right edge (anchored at its end), never past it.
    labels = [
        {
            "x": round(CHART_WIDTH, 1)
            if index == len(hours) - 1
            else round(index * width + _BAR_GAP / 2, 1),
            "anchor": "end" if index == len(hours) - 1 else "start",
            "text": f"{timezone.localtime(hour['hour']):%H}:00",
        }
        for index, hour in enumerate(hours)
        if index % 6 == 0 or index == len(hours) - 1
    ]
    return {
        "bars": bars,
        "labels": labels,
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT + _LABEL_HEIGHT,
        "label_y": CHART_HEIGHT + _LABEL_HEIGHT - 3,
        "most": most,
    }


def _age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def overview(now: Any = None) -> dict[str, Any]:
    """Everything the page shows (also what its test reads)."""
    now = now or timezone.now()
    since = now - timedelta(days=1)
    reasons = decisions_by_reason(since)
    for row in reasons:
        row["outcome"] = outcome_of(row["decision"])
        row["label"] = DECISION_LABELS.get(row["decision"], row["decision"])
    waiting = waiting_approvals(now)
    return {
        "since": since,
        "reasons": reasons,
        "chart": hourly_chart(decisions_per_hour(now)),
        "waiting": waiting,
        "waiting_calls": [(call, _age(age)) for call, age in waiting["calls"]],
        "oldest_age": _age(waiting["oldest_age"]) if waiting["count"] else "",
        "budgets": budgets_in_use(),
        "slowest": slowest_destinations(since),
    }


@admin.register(OperationsOverview)
class OperationsOverviewAdmin(RecordsOnly, _OverviewAdmin):
    """One read-only page: the change list is the overview."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        user: Any = request.user
        return bool(
            user.has_perm("django_webfetch.view_egressevent")
            or super().has_view_permission(request, obj)
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> Any:
        if not self.has_view_permission(request):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        if request.GET:
            # The page takes no filter: a lookup (even one it would ignore) is refused like
            # every other change list's unknown lookup.
            from django.http import HttpResponseBadRequest

            return HttpResponseBadRequest("The operations page takes no filters.")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": str(self.opts.verbose_name_plural).capitalize(),
            **overview(),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "django_webfetch/operations.html", context)
