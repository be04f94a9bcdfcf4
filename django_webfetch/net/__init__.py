"""The guarded-fetch core.  Pure Python: nothing in this package imports Django."""

from __future__ import annotations

from .errors import *  # noqa: F403
from .errors import __all__ as _errors_all
from .policy import DEFAULT_MEDIA_TYPES, HARD_LIMITS, EgressPolicy, Scope

__all__ = sorted([*_errors_all, "DEFAULT_MEDIA_TYPES", "HARD_LIMITS", "EgressPolicy", "Scope"])
