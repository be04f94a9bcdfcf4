"""Budget rows: ceilings per user or per group, and the daily use they are held against.

Rows only (DESIGN.md §1); ``budgets.services`` reads and writes them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

__all__ = ["BUDGET_KINDS", "Budget", "BudgetUsage"]

#: ``(field of Budget, field of BudgetUsage, period)`` of every ceiling; the refusal code
#: of a ceiling is ``budget_exceeded:<field of Budget>``.
BUDGET_KINDS: tuple[tuple[str, str, str], ...] = (
    ("tool_calls_per_day", "tool_calls", "day"),
    ("tool_calls_per_month", "tool_calls", "month"),
    ("provider_requests_per_day", "provider_requests", "day"),
    ("provider_requests_per_month", "provider_requests", "month"),
    ("provider_tokens_per_day", "provider_tokens", "day"),
    ("provider_tokens_per_month", "provider_tokens", "month"),
    ("cost_per_day", "cost", "day"),
    ("cost_per_month", "cost", "month"),
)


def _count(label: Any) -> models.PositiveBigIntegerField[int | None, int | None]:
    return models.PositiveBigIntegerField(
        label, null=True, blank=True, help_text=_("Empty: no ceiling.")
    )


def _money(label: Any) -> models.DecimalField[Decimal | None, Decimal | None]:
    return models.DecimalField(
        label,
        max_digits=14,
        decimal_places=4,
        null=True,
        blank=True,
        # A negative ceiling would refuse everything while looking like a typo.
        validators=[MinValueValidator(Decimal(0))],
        help_text=_("In the currency of WEBFETCH_MODEL_PRICES. Empty: no ceiling."),
    )


class Budget(models.Model):
    """Ceilings for one user, or for one group (its members' use counted together).

    Every ceiling that applies to a user holds: their own row's and each of their groups'.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="webfetch_budget",
        verbose_name=_("user"),
    )
    group = models.OneToOneField(
        "auth.Group",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="webfetch_budget",
        verbose_name=_("group"),
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    tool_calls_per_day = _count(_("tool calls per day"))
    tool_calls_per_month = _count(_("tool calls per month"))
    provider_requests_per_day = _count(_("provider requests per day"))
    provider_requests_per_month = _count(_("provider requests per month"))
    provider_tokens_per_day = _count(_("provider tokens per day"))
    provider_tokens_per_month = _count(_("provider tokens per month"))
    cost_per_day = _money(_("cost per day"))
    cost_per_month = _money(_("cost per month"))
    updated = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("budget")
        verbose_name_plural = _("budgets")
        constraints = [
            models.CheckConstraint(
                condition=(Q(user__isnull=False) & Q(group__isnull=True))
                | (Q(user__isnull=True) & Q(group__isnull=False)),
                name="webfetch_budget_user_xor_group",
            )
        ]

    def __str__(self) -> str:
        if self.user_id is not None:
            return f"budget of user {self.user}"
        return f"budget of group {self.group}"


class BudgetUsage(models.Model):
    """One user's use on one day (the local date of ``TIME_ZONE``)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="webfetch_budget_usage",
        verbose_name=_("user"),
    )
    day = models.DateField(_("day"))
    tool_calls = models.PositiveIntegerField(_("tool calls"), default=0)
    provider_requests = models.PositiveIntegerField(_("provider requests"), default=0)
    provider_tokens = models.PositiveBigIntegerField(_("provider tokens"), default=0)
    cost = models.DecimalField(_("cost"), max_digits=18, decimal_places=6, default=Decimal(0))

    class Meta:
        ordering = ["-day"]
        verbose_name = _("budget use")
        verbose_name_plural = _("budget use")
        constraints = [
            models.UniqueConstraint(fields=["user", "day"], name="webfetch_budget_usage_day")
        ]

    def __str__(self) -> str:
        return f"use of {self.user} on {self.day}"
