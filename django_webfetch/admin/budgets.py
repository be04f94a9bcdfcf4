"""Budgets in the admin: the ceilings per user or group, with the use held against each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from django_webfetch.budgets import budget_lines
from django_webfetch.models import Budget, BudgetUsage

from . import RecordsOnly

if TYPE_CHECKING:
    _BudgetAdmin = admin.ModelAdmin[Budget]
    _UsageAdmin = admin.ModelAdmin[BudgetUsage]
else:
    _BudgetAdmin = _UsageAdmin = admin.ModelAdmin


def use_against_budget(budget: Budget) -> str:
    """``tool calls per day: 3 / 20 (15%)``, one line per ceiling the budget sets."""
    if not budget.pk:
        return "-"
    lines = budget_lines(budget)
    if not lines:
        return str(_("no ceiling set"))
    return format_html_join(
        "",
        '<div class="{}">{}: {} / {} ({}%)</div>',
        (
            (
                "webfetch-budget-exceeded" if line.exceeded else "webfetch-budget",
                line.kind.replace("_", " "),
                line.used,
                line.limit,
                round(line.share * 100),
            )
            for line in lines
        ),
    )


@admin.register(Budget)
class BudgetAdmin(_BudgetAdmin):
    list_display = ("__str__", "enabled", "use")
    list_filter = ("enabled",)
    readonly_fields = ("use", "updated")
    search_fields = ("user__username", "group__name")
    fieldsets = (
        (None, {"fields": ("user", "group", "enabled")}),
        (
            _("Ceilings (empty: none)"),
            {
                "fields": (
                    ("tool_calls_per_day", "tool_calls_per_month"),
                    ("provider_requests_per_day", "provider_requests_per_month"),
                    ("provider_tokens_per_day", "provider_tokens_per_month"),
                    ("cost_per_day", "cost_per_month"),
                )
            },
        ),
        (_("Use"), {"fields": ("use", "updated")}),
    )

    def get_autocomplete_fields(self, request: Any) -> tuple[str, ...]:
        """The user and group are picked by name: with a search box where this admin site
        registers their models with ``search_fields`` (Django's own user and group admins
        do) and the staff user may view them, else from a select list; never by typing a
        raw id."""
        fields = []
        for name in ("user", "group"):
            model = Budget._meta.get_field(name).related_model
            registered = self.admin_site._registry.get(model)  # type: ignore[arg-type]
            if (
                registered is not None
                and registered.search_fields
                and registered.has_view_permission(request)  # the search box asks its admin
            ):
                fields.append(name)
        return tuple(fields)

    @admin.display(description=_("use against budget"))
    def use(self, obj: Budget) -> str:
        return format_html("{}", use_against_budget(obj))


@admin.register(BudgetUsage)
class BudgetUsageAdmin(RecordsOnly, _UsageAdmin):
    list_display = ("day", "user", "tool_calls", "provider_requests", "provider_tokens", "cost")
    list_filter = ("day",)
    search_fields = ("user__username",)
    date_hierarchy = "day"

    def get_queryset(self, request: Any) -> Any:
        return super().get_queryset(request).select_related("user")
