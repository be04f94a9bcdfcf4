"""What the system-check modules share; it registers nothing.

Each package's ``checks`` module only defines its checks (``django_webfetch.checks``,
``assistant.checks``); ``apps.py``, the composition root, registers them all.  This module
sits below every one of them, so no checks module imports another (DESIGN.md §1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.core.checks import CheckMessage
from django.db import DatabaseError

__all__ = ["from_database"]


def from_database(
    messages: Callable[[], Iterable[CheckMessage]], databases: Iterable[str] | None
) -> list[CheckMessage]:
    """The messages of a check that reads rows: only when Django asks for database checks,
    and none before the tables exist."""
    if not databases:
        return []
    try:
        return list(messages())
    except DatabaseError:
        return []  # not migrated yet
