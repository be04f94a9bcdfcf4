"""The operator page's entry in the admin: a proxy of the audit log (no table of its own)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from .events import EgressEvent

__all__ = ["OperationsOverview"]


class OperationsOverview(EgressEvent):
    """Decisions by reason, approvals waiting, budgets in use, the slowest destinations."""

    class Meta:
        proxy = True
        verbose_name = _("operations overview")
        verbose_name_plural = _("operations overview")
