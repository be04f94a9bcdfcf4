"""The refusal of a budget::

WebFetchError
└── BudgetExceeded          .kind .code ("budget_exceeded:<kind>") .used .limit
"""

from __future__ import annotations

from decimal import Decimal

from django_webfetch.net.errors import WebFetchError

__all__ = ["BudgetExceeded", "describe"]

_WHAT = {
    "tool_calls": "tool calls",
    "provider_requests": "requests to the language model",
    "provider_tokens": "language model tokens",
    "cost": "language model cost",
}


def describe(kind: str, used: int | Decimal, limit: int | Decimal, *, group: str = "") -> str:
    """The refusal in plain words, for the editor and for the model (no names)."""
    what, _, period = kind.rpartition("_per_")
    whose = "Your group's" if group else "Your"
    when = "today" if period == "day" else "this month"
    again = "tomorrow" if period == "day" else "next month"
    return (
        f"{whose} budget of {_WHAT.get(what, what)} for {when} is used up "
        f"({used} of {limit}). Try again {again}, or ask an administrator to raise it."
    )


class BudgetExceeded(WebFetchError):
    """A ceiling of a budget is reached: nothing was run or sent.  ``kind`` is the field of
    the ceiling (``tool_calls_per_day``...), ``code`` is ``budget_exceeded:<kind>``."""

    code = "budget_exceeded"
    default_message = "the budget is used up"

    def __init__(
        self, kind: str, used: int | Decimal, limit: int | Decimal, *, group: str = ""
    ) -> None:
        self.kind = kind
        self.used = used
        self.limit = limit
        self.group = group
        self.code = f"budget_exceeded:{kind}"
        super().__init__(describe(kind, used, limit, group=group))
