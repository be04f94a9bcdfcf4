"""A write that must survive a brief database outage (a restart, a failover).

A fetch in flight when PostgreSQL restarts finds its thread's connection dead at its next
write (the decision row of the allowed request, the text it keeps): the page is in memory,
and failing the call there would waste it and, once the call's lease ran out, make the
sweep run it a second time.  :func:`survive_outage` runs the write again, on a new
connection, until the database is back or ``seconds`` have passed.

Only outside a transaction: inside one the work before the write was rolled back with the
connection, so the caller's transaction must fail (and be retried whole) instead.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connection

__all__ = ["OUTAGE_SECONDS", "survive_outage"]

logger = logging.getLogger("django_webfetch.runs")

#: How long a write waits for the database to come back, at most (a restart takes a few
#: seconds; a longer outage fails the write, as before).
OUTAGE_SECONDS = 60.0

_T = TypeVar("_T")


def survive_outage(
    operation: Callable[[], _T], *, seconds: float = OUTAGE_SECONDS, what: str = "a write"
) -> _T:
    """Run ``operation``; while it fails with ``OperationalError``/``InterfaceError`` (the
    connection or the server is gone), close the connection and run it again, with a
    backoff from 0.25 s to 2 s, for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    delay = 0.25
    while True:
        try:
            return operation()
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block or time.monotonic() + delay > deadline:
                raise
            logger.warning("database unavailable during %s; retrying", what)
            with contextlib.suppress(DatabaseError):
                connection.close()
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
