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
    #: False: the guard could not decide (a DNS failure); execution checks again anyway.
    checked: bool = True
    #: False: the verdict stored when the call was requested (no live one could be made).
    live: bool = True

    @property
    def plain(self) -> str:
        return plain_reason(self.reason) if self.reason else ""


#: A live verdict is kept this long per call (the approval cards refresh every few
#: seconds; the guard looks DNS up once, not at every refresh).
PREFLIGHT_CACHE_SECONDS = 30


def _stored(preview: dict[str, Any]) -> Preflight | None:
    """The verdict the run service stored on the card when the call was requested."""
    stored = preview.get("preflight")
    if not isinstance(stored, dict) or stored.get("verdict") not in ("allowed", "unchecked"):
        return None
    addresses = stored.get("addresses") or ()
    return Preflight(
        allowed=stored["verdict"] == "allowed",
        reason=str(stored.get("reason") or "")[:64],
        addresses=tuple(str(a)[:64] for a in addresses[:16]),
        checked=stored["verdict"] == "allowed",
        live=False,
    )


def preflight(call: ToolCall) -> Preflight | None:
    """The guard's verdict for the call's URL: the one stored when the call was requested
    (``live`` False: the card says "when it was requested", since a list may have changed
    since; the guard checks again when the call runs), else the group's live policy now
    (DNS is looked up, nothing is connected; cached for ``PREFLIGHT_CACHE_SECONDS``).
    ``None`` when the call has no URL."""
    from django.core.cache import cache

    preview = call.approval_preview or {}
    stored = _stored(preview)
    if stored is not None:
        return stored
    key = f"django_webfetch.cms.preflight:{call.pk}"
    cached = cache.get(key)
    if isinstance(cached, Preflight):
        return cached
    verdict = _live(call, preview)
    if verdict is not None:
        cache.set(key, verdict, PREFLIGHT_CACHE_SECONDS)
    return verdict


def _live(call: ToolCall, preview: dict[str, Any]) -> Preflight | None:
    from django_webfetch.egress.preflight import live_verdict
    from django_webfetch.net.errors import EgressDenied
    from django_webfetch.tools import default_registry

    url = preview.get("url")
    tool = default_registry.get(call.tool)
    if not isinstance(url, str) or tool is None:
        return None
    try:
        _policy, explanation = live_verdict(url, call.group, require_scope=tool.scope)
    except EgressDenied as exc:
        return Preflight(False, exc.reason, ())
    except Exception:
        logger.exception("pre-flight of tool call %s failed", call.pk)
        return None
    destination = explanation.destination
    addresses = tuple(str(a) for a in destination.addresses) if destination is not None else ()
    reason = explanation.reason or ""
    return Preflight(explanation.allowed, reason, addresses, checked=reason != "dns_error")
