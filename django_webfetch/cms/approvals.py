"""What approvers see where they work: the waiting calls they may decide, with the
guard's pre-flight verdict."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from django_webfetch import runs
from django_webfetch.conf import conf
from django_webfetch.models import CallState, ToolCall

from .reasons import plain_reason

__all__ = ["Preflight", "preflight", "waiting_count", "waiting_for"]

logger = logging.getLogger("django_webfetch.cms")

#: The assistant page shows at most this many approval cards.
MAX_CARDS = 20


def waiting_for(user: Any) -> QuerySet[ToolCall]:
    """The calls awaiting approval that ``user`` may decide now (oldest first)."""
    if not (
        user is not None
        and getattr(user, "is_active", False)
        and user.has_perm(runs.APPROVE_PERMISSION)
    ):
        return ToolCall.objects.none()
    calls = ToolCall.objects.filter(
        state=CallState.AWAITING_APPROVAL, expires_at__gt=timezone.now()
    )
    if not conf.WEBFETCH_ALLOW_SELF_APPROVAL:
        calls = calls.exclude(user=user)
    return calls.select_related("user").order_by("created", "pk")


def waiting_count(user: Any) -> int:
    return waiting_for(user).count()


@dataclass(frozen=True)
class Preflight:
    allowed: bool
    reason: str
    addresses: tuple[str, ...]

    @property
    def plain(self) -> str:
        return plain_reason(self.reason) if self.reason else ""


def preflight(call: ToolCall) -> Preflight | None:
    """The guard's verdict for the call's URL under its group's live policy, now (DNS is
    looked up; nothing is connected).  ``None`` when the call has no URL."""
    from django_webfetch.egress import policy_for
    from django_webfetch.net import explain
    from django_webfetch.net.errors import EgressDenied
    from django_webfetch.tools import default_registry

    preview = call.approval_preview or {}
    url = preview.get("url")
    tool = default_registry.get(call.tool)
    if not isinstance(url, str) or tool is None:
        return None
    try:
        policy = policy_for(call.group, require_scope=tool.scope)
        explanation = explain(url, policy=policy)
    except EgressDenied as exc:
        return Preflight(False, exc.reason, ())
    except Exception:
        logger.exception("pre-flight of tool call %s failed", call.pk)
        return None
    destination = explanation.destination
    addresses = tuple(str(a) for a in destination.addresses) if destination is not None else ()
    return Preflight(explanation.allowed, explanation.reason or "", addresses)
