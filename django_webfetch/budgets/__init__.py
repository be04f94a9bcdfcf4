"""Budgets per user and per group (issue 22): ceilings on tool calls, provider requests,
provider tokens and cost per day and per month, charged before the call or request; and
the rates per user and scope every surface counts (``budgets.rates``)."""

from __future__ import annotations

from . import rates
from .errors import BudgetExceeded
from .services import (
    BudgetLine,
    applicable_budgets,
    budget_lines,
    budgets_in_use,
    charge_provider_request,
    charge_tool_call,
    exempt,
    price_of,
    record_provider_usage,
    usage_of,
)

__all__ = [
    "BudgetExceeded",
    "BudgetLine",
    "applicable_budgets",
    "budget_lines",
    "budgets_in_use",
    "charge_provider_request",
    "charge_tool_call",
    "exempt",
    "price_of",
    "rates",
    "record_provider_usage",
    "usage_of",
]
