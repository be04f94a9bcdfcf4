"""Budgets: the ceilings that apply to a user, their use, and the charge before each call.

- :func:`charge_tool_call` before a tool call is run or put to a human (``runs.request``);
- :func:`charge_provider_request` before a request to the LLM provider (``assistant.ask``),
  and :func:`record_provider_usage` with the tokens it reports afterwards.

Each raises :class:`~django_webfetch.budgets.errors.BudgetExceeded` (code
``budget_exceeded:<kind>``) and charges nothing when a ceiling would be passed.  A
ceiling counts the use of the current day (``TIME_ZONE``) or calendar month: a user's own
row counts theirs, a group's row counts every member's together.  Tokens and cost are
known only after a request, so a request is refused once they *reached* the ceiling (the
last request may pass it by its own size).  Superusers are held to budgets too, unless
``WEBFETCH_BUDGET_EXEMPT_SUPERUSERS`` is True.  Counting takes a row lock on the user's
day, so one user's concurrent charges never pass a user ceiling; concurrent charges of
*different* members of one group may pass the group's by one call each.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from django_webfetch.conf import conf

from .errors import BudgetExceeded
from .models import BUDGET_KINDS, Budget, BudgetUsage

__all__ = [
    "BudgetLine",
    "applicable_budgets",
    "budget_lines",
    "budgets_in_use",
    "charge_provider_request",
    "charge_tool_call",
    "exempt",
    "price_of",
    "record_provider_usage",
    "usage_of",
]

_USAGE_FIELDS = ("tool_calls", "provider_requests", "provider_tokens", "cost")


@dataclass(frozen=True)
class BudgetLine:
    """One ceiling of a budget and the use held against it."""

    kind: str
    used: int | Decimal
    limit: int | Decimal

    @property
    def share(self) -> float:
        return float(self.used) / float(self.limit) if self.limit else 1.0

    @property
    def exceeded(self) -> bool:
        return self.used >= self.limit


def _user_pk(user: Any) -> Any:
    return getattr(user, "pk", None) if getattr(user, "is_authenticated", False) else None


def exempt(user: Any) -> bool:
    """No budget applies: nobody is signed in (system work), or an exempted superuser."""
    if _user_pk(user) is None:
        return True
    return bool(getattr(user, "is_superuser", False)) and conf.WEBFETCH_BUDGET_EXEMPT_SUPERUSERS


def applicable_budgets(user: Any) -> list[Budget]:
    """The enabled budgets of ``user``: their own and their groups'."""
    pk = _user_pk(user)
    if pk is None:
        return []
    own = Budget.objects.filter(enabled=True, user_id=pk)
    groups = Budget.objects.filter(enabled=True, group__user=pk)
    return list(own.union(groups))


def _periods(today: datetime.date) -> dict[str, datetime.date]:
    return {"day": today, "month": today.replace(day=1)}


def usage_of(budget: Budget, *, today: datetime.date | None = None) -> dict[str, Any]:
    """``{"day": {field: use}, "month": {field: use}}`` of the budget's user or group."""
    today = today or timezone.localdate()
    rows = BudgetUsage.objects.all()
    if budget.user_id is not None:
        rows = rows.filter(user_id=budget.user_id)
    else:
        rows = rows.filter(user__groups=budget.group_id)
    result: dict[str, Any] = {}
    for period, since in _periods(today).items():
        sums = rows.filter(day__gte=since, day__lte=today).aggregate(
            **{name: Sum(name) for name in _USAGE_FIELDS}
        )
        result[period] = {
            name: sums[name] or (Decimal(0) if name == "cost" else 0) for name in _USAGE_FIELDS
        }
    return result


def budget_lines(budget: Budget, *, today: datetime.date | None = None) -> list[BudgetLine]:
    """Every ceiling the budget sets, with its use (the admin's "use against budget")."""
    use = usage_of(budget, today=today)
    lines = []
    for kind, field, period in BUDGET_KINDS:
        limit = getattr(budget, kind)
        if limit is not None:
            lines.append(BudgetLine(kind, use[period][field], limit))
    return lines


def budgets_in_use(*, limit: int = 20) -> list[tuple[Budget, list[BudgetLine]]]:
    """The enabled budgets with their use, the most used (largest share of a ceiling)
    first."""
    today = timezone.localdate()
    found = []
    for budget in Budget.objects.filter(enabled=True).select_related("user", "group")[:500]:
        lines = budget_lines(budget, today=today)
        if lines:
            found.append((budget, lines))
    found.sort(key=lambda item: -max(line.share for line in item[1]))
    return found[:limit]


def _check(user: Any, needs: dict[str, int | Decimal]) -> None:
    """Raise ``BudgetExceeded`` for the first ceiling ``needs`` would pass.  A need of 0
    (tokens, cost: unknown before the request) is refused once the use reached the limit."""
    today = timezone.localdate()
    for budget in applicable_budgets(user):
        use = usage_of(budget, today=today)
        group = "" if budget.user_id is not None else str(budget.group_id)
        for kind, field, period in BUDGET_KINDS:
            if field not in needs:
                continue
            limit = getattr(budget, kind)
            if limit is None:
                continue
            used = use[period][field]
            need = needs[field]
            if (used + need > limit) if need else (used >= limit):
                raise BudgetExceeded(kind, used, limit, group=group)


def _charge(user: Any, checks: dict[str, int | Decimal], **add: int | Decimal) -> None:
    if exempt(user):
        return
    with transaction.atomic():
        row, _ = BudgetUsage.objects.get_or_create(user_id=user.pk, day=timezone.localdate())
        # One user's charges queue up here: the check below sees every earlier one.
        BudgetUsage.objects.select_for_update().filter(pk=row.pk).first()
        _check(user, checks)
        if add:
            BudgetUsage.objects.filter(pk=row.pk).update(
                **{name: F(name) + value for name, value in add.items()}
            )


def charge_tool_call(user: Any) -> None:
    """Count one tool call of ``user``, or raise ``BudgetExceeded`` (nothing counted)."""
    _charge(user, {"tool_calls": 1}, tool_calls=1)


def charge_provider_request(user: Any) -> None:
    """Count one provider request of ``user``, or raise ``BudgetExceeded``: its request
    ceilings would be passed, or its token or cost ceilings are reached."""
    _charge(
        user,
        {"provider_requests": 1, "provider_tokens": 0, "cost": Decimal(0)},
        provider_requests=1,
    )


def price_of(model_name: str, input_tokens: int, output_tokens: int) -> Decimal:
    """What the tokens cost under ``WEBFETCH_MODEL_PRICES`` (per million tokens)."""
    prices = conf.WEBFETCH_MODEL_PRICES.get(model_name)
    if prices is None:
        return Decimal(0)
    prompt, completion = prices
    return (prompt * input_tokens + completion * output_tokens) / Decimal(1_000_000)


def record_provider_usage(
    user: Any, model_name: str, input_tokens: int, output_tokens: int
) -> None:
    """Add the tokens a provider reported (and their cost) to ``user``'s day."""
    if exempt(user):
        return
    input_tokens, output_tokens = max(int(input_tokens), 0), max(int(output_tokens), 0)
    if not input_tokens and not output_tokens:
        return
    cost = price_of(model_name, input_tokens, output_tokens)
    with transaction.atomic():
        row, _ = BudgetUsage.objects.get_or_create(user_id=user.pk, day=timezone.localdate())
        BudgetUsage.objects.filter(pk=row.pk).update(
            provider_tokens=F("provider_tokens") + input_tokens + output_tokens,
            cost=F("cost") + cost,
        )
