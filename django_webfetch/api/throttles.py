"""API rate limits per user and scope (``WEBFETCH_API_RATES``), as a DRF throttle.

A view names its scope (``throttle_scope``: ``messages``, ``calls`` or ``approvals``);
only requests that change something (not ``GET``/``HEAD``/``OPTIONS``: polling a call or a
run is never limited) count.  A request over the rate is answered ``429`` with
``Retry-After`` and the API's JSON error (``code``: ``throttled``).  The counting is
``budgets.rates``, shared with the MCP server: one history per user and scope on every
surface.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import BaseThrottle

from django_webfetch.budgets import rates

__all__ = ["THROTTLE_SCOPES", "ScopedUserThrottle"]

THROTTLE_SCOPES = rates.RATE_SCOPES


class ScopedUserThrottle(BaseThrottle):
    """The rate of the view's ``throttle_scope`` per signed-in user (per address
    otherwise), read from the settings on every request (``override_settings`` works)."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        scope = getattr(view, "throttle_scope", None)
        if scope is None or request.method in SAFE_METHODS:
            return True
        user = request.user
        ident = user.pk if getattr(user, "is_authenticated", False) else self.get_ident(request)
        self._wait = rates.take(scope, ident)
        return self._wait is None

    def wait(self) -> float | None:
        return self._wait
