"""API rate limits per user and scope (``WEBFETCH_API_RATES``), with DRF's throttling.

A view names its scope (``throttle_scope``: ``messages``, ``calls`` or ``approvals``);
only requests that change something (not ``GET``/``HEAD``/``OPTIONS``: polling a call or a
run is never limited) count.  A request over the rate is answered ``429`` with
``Retry-After`` and the API's JSON error (``code``: ``throttled``).  The history lives in
Django's default cache: give it a shared backend (Redis, Memcached) where several
processes serve the API, or each counts alone.
"""

from __future__ import annotations

import logging
from typing import Any

from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import SimpleRateThrottle

from django_webfetch import metrics
from django_webfetch.conf import conf

__all__ = ["THROTTLE_SCOPES", "ScopedUserThrottle"]

logger = logging.getLogger("django_webfetch.api")

THROTTLE_SCOPES = ("messages", "calls", "approvals")


class ScopedUserThrottle(SimpleRateThrottle):
    """The rate of the view's ``throttle_scope`` per signed-in user (per address
    otherwise), read from the settings on every request (``override_settings`` works)."""

    cache_format = "django_webfetch:throttle:%(scope)s:%(ident)s"

    def __init__(self) -> None:
        # The rate depends on the view: it is read in ``allow_request``.
        self.scope: str | None = None
        self.rate: str | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        self.scope = getattr(view, "throttle_scope", None)
        if self.scope is None or request.method in SAFE_METHODS:
            return True
        self.rate = conf.WEBFETCH_API_RATES.get(self.scope)
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        allowed = super().allow_request(request, view)
        if not allowed:
            metrics.refusal(f"rate_limited:{self.scope}")
            logger.info(
                "rate limit %s reached: user=%s", self.scope, getattr(request.user, "pk", None)
            )
        return allowed

    def get_cache_key(self, request: Any, view: Any) -> str:
        user = request.user
        ident = user.pk if getattr(user, "is_authenticated", False) else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
