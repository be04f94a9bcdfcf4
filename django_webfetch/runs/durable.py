"""The plumbing of a durable record that one worker at a time may hold.

Tool calls (``runs``) and assistant runs (``assistant``) are both rows that change state
only through a compare-and-set under a row lock, held by a worker through a *lease*
(``lease_expires_at``) that the holder renews while it works.  What they share lives here:

- :class:`TransitionRefused`: the base of both "this change is not allowed now" errors;
- :func:`retry_while_locked`: SQLite refuses the loser of a write race with "database is
  locked" instead of making it wait; the operation is tried again with a short backoff;
- :class:`Heartbeat`: renews a lease from a thread of its own while the work runs;
- :func:`lease_expired`, :func:`worker_label`, :func:`is_active`, :class:`Outcome`.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import OperationalError, connection
from django.utils import timezone

from django_webfetch.net.errors import WebFetchError

__all__ = [
    "SQLITE_RETRIES",
    "Heartbeat",
    "Outcome",
    "TransitionRefused",
    "is_active",
    "lease_expired",
    "retry_while_locked",
    "worker_label",
]

logger = logging.getLogger("django_webfetch.runs")

#: SQLite reports a lost race as "database is locked" (without waiting, when a reading
#: transaction wants to write); the operation is tried this often.
SQLITE_RETRIES = 10

_T = TypeVar("_T")


class TransitionRefused(WebFetchError):
    """The record is not in a state that allows the change (it may have just changed).

    ``noun`` names the record in the default message ("a running call cannot become ...").
    """

    code = "invalid_transition"
    noun = "record"

    def __init__(self, current: str, target: str, message: str | None = None) -> None:
        self.current = current
        self.target = target
        super().__init__(message or f"a {current} {self.noun} cannot become {target}")


def retry_while_locked(
    operation: Callable[[], _T],
    *,
    errors: tuple[type[BaseException], ...] = (OperationalError,),
    sqlite_only: bool = True,
    backoff: bool = True,
    attempts: int = SQLITE_RETRIES,
) -> _T:
    """Run ``operation``; on one of ``errors``, run it again (at most ``attempts`` times).

    ``sqlite_only``: elsewhere the error is raised at once (PostgreSQL and MySQL make the
    loser of a race wait on the row lock instead).  ``backoff``: sleep a little longer
    before each new attempt, with jitter, so that two losers do not collide again.
    """
    for attempt in range(attempts):
        try:
            return operation()
        except errors:
            if (sqlite_only and connection.vendor != "sqlite") or attempt == attempts - 1:
                raise
            if backoff:
                time.sleep(random.uniform(0.02, 0.06) * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def worker_label() -> str:
    """``host:pid`` of this process, as stored in a record's ``worker`` field."""
    return f"{socket.gethostname()}:{os.getpid()}"[:200]


def is_active(user: Any) -> bool:
    """A signed-in, active user (anonymous users and ``None`` are not)."""
    return bool(
        user is not None
        and getattr(user, "is_authenticated", False)
        and getattr(user, "is_active", False)
    )


def lease_expired(lease_expires_at: datetime | None, now: datetime | None = None) -> bool:
    """A lease that was taken and has run out: its holder counts as lost."""
    return lease_expires_at is not None and lease_expires_at <= (now or timezone.now())


@dataclass(frozen=True)
class Outcome:
    """What one attempt at a record did.  ``retry_after``: when another attempt holds the
    record, the seconds until its lease runs out."""

    action: str
    state: str
    retry_after: float | None = None


class Heartbeat:
    """Renews a running attempt's lease every third of the lease while the attempt runs,
    so that reading the record never declares a live attempt lost.

    ``renew`` is a queryset naming the record *as the attempt holds it* (a compare-and-set:
    its id, state and attempt number); each beat updates its ``lease_expires_at``, so a
    beat never revives a record that another writer has moved on.  A thread of its own:
    the work is never interrupted for it.  When the process dies, the beats stop and the
    lease runs out as before.  After ``max_leases`` times the lease the beats stop: an
    attempt that runs longer than that is stuck, not slow, and may be declared lost.
    """

    def __init__(self, renew: Any, *, lease: float, max_leases: int, what: str, name: str) -> None:
        self.renew = renew
        self.what = what
        self.lease = lease
        self.until = time.monotonic() + max_leases * lease
        self.stopped = threading.Event()
        self.beats = 0
        self.name = name
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Heartbeat:
        # Inside a caller's transaction (ATOMIC_REQUESTS) the running state is not visible
        # to other connections, so there is nothing to renew, and a renewal would wait for
        # the row lock that this very thread holds.
        if not connection.in_atomic_block:
            self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            # A beat blocked on a busy database finishes on its own; never wait long for it.
            self.thread.join(timeout=5.0)

    def _run(self) -> None:
        try:
            while not self.stopped.wait(self.lease / 3) and time.monotonic() < self.until:
                self.beat()
        finally:
            connection.close()  # this thread's own database connection

    def beat(self) -> None:
        try:
            renewed = self.renew.update(
                lease_expires_at=timezone.now() + timedelta(seconds=self.lease)
            )
        except Exception:  # a busy database: the next beat tries again
            logger.warning("%s: lease not renewed", self.what, exc_info=True)
            return
        self.beats += renewed
