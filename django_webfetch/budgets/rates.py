"""Rates per user and scope (``WEBFETCH_API_RATES``): one history for every surface.

A surface that starts something counts it here before it does: the API's DRF throttle
(``api.throttles``) and the MCP server's ``tools/call`` share one history per user and
scope, so a user over the ``calls`` rate on ``POST /api/calls/`` starts no call over MCP
either.  The history is a list of request times in Django's default cache (DRF's sliding
window); give the cache a shared backend (Redis, Memcached) where several processes serve,
or each counts alone.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from django.core.cache import cache

from django_webfetch import metrics
from django_webfetch.conf import conf

__all__ = ["RATE_SCOPES", "parse_rate", "take", "whole_seconds"]

logger = logging.getLogger("django_webfetch.api")

RATE_SCOPES = ("messages", "calls", "approvals")
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_KEY = "django_webfetch:throttle:{scope}:{ident}"


def parse_rate(rate: str) -> tuple[int, int]:
    """``"30/minute"`` -> ``(30, 60)``: requests per period in seconds (DRF's grammar: the
    period's first letter counts)."""
    count, period = rate.split("/", 1)
    return int(count), _PERIODS[period[0]]


def take(scope: str, ident: Any, *, now: float | None = None) -> float | None:
    """Count one request of ``scope`` for ``ident`` (a user's pk, or an address).

    ``None``: within the rate (counted), or the scope has no rate.  A number: over the rate,
    nothing counted; the seconds until a request would be taken again.
    """
    rate = conf.WEBFETCH_API_RATES.get(scope)
    if rate is None:
        return None
    allowed, duration = parse_rate(rate)
    key = _KEY.format(scope=scope, ident=ident)
    now = time.time() if now is None else now
    history: list[float] = [float(t) for t in cache.get(key, []) if t > now - duration]
    if len(history) >= allowed:
        metrics.refusal(f"rate_limited:{scope}")
        logger.info("rate limit %s reached: %s", scope, ident)
        # DRF's estimate: the time left of the oldest request's window, shared among the
        # requests that will become available.
        remaining = max(duration - (now - history[-1]), 0.0)
        available = allowed - len(history) + 1
        return remaining / available if available > 0 else remaining
    history.insert(0, now)
    cache.set(key, history, duration)
    return None


def whole_seconds(wait: float) -> int:
    """A wait as ``Retry-After`` counts it: whole seconds, rounded up, at least 1."""
    return max(math.ceil(wait), 1)
