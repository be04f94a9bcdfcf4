"""The plumbing of a durable record that one worker at a time may hold.

Tool calls (``runs``) and assistant runs (``assistant``) are both rows that change state
only through a compare-and-set under a row lock, held by a worker through a *lease*
(``lease_expires_at``) that the holder renews while it works.  What they share lives here:

- :class:`TransitionRefused`: the base of both "this change is not allowed now" errors;
- :func:`retry_while_locked`: SQLite refuses the loser of a write race with "database is
  locked" instead of making it wait; the operation is tried again with a short backoff;
- :class:`Heartbeat`: renews a lease from a thread of its own while the work runs;
- :func:`worker_label` and :func:`holder_gone`: who holds a lease, and whether that process
  is known to be dead;
- :func:`lease_lost`, :func:`lease_expired`, :func:`is_active`, :class:`Outcome`.

A lease names its holder: ``host:pid~boot.ns.start``, the process's kernel boot id, PID
namespace and start time (``/proc``).  Those identify one process on one machine for its
whole life, so a sweep on the same machine (same boot id and PID namespace) that finds the
PID gone, a zombie, or reused by a younger process knows the holder is dead and takes the
record over at once, rather than after the lease (the longest a step may take).  A holder
on another machine, in another PID namespace or without ``/proc`` is judged by its lease
alone.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import re
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
    "holder_gone",
    "is_active",
    "lease_expired",
    "lease_lost",
    "local_marker",
    "process_identity",
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


#: The ``worker`` field's length (both models).
_LABEL_LENGTH = 200
_IDENTITY = re.compile(
    r":(?P<pid>[0-9]{1,10})~(?P<boot>[0-9a-f]{8})\.(?P<ns>[0-9]{1,20})\.(?P<start>[0-9]{1,20})\Z"
)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def _machine() -> tuple[str, str] | None:
    """``(boot id prefix, PID namespace inode)`` of this process; ``None`` without
    ``/proc`` (then no holder is ever judged dead by its identity)."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    inode = re.fullmatch(r"pid:\[([0-9]+)\]", namespace)
    if boot is None or inode is None or not re.fullmatch(r"[0-9a-f]{8}", boot[:8]):
        return None
    return boot[:8], inode.group(1)


def _process(pid: int) -> tuple[str, str] | None:
    """``(state, start time)`` of a process (``/proc/<pid>/stat``), ``None`` when gone."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat or ")" not in stat:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    if len(fields) < 20:
        return None
    return fields[0], fields[19]


@functools.lru_cache(maxsize=4)
def _identity(pid: int) -> str:
    machine = _machine()
    process = _process(pid)
    if machine is None or process is None:
        return ""
    return f"~{machine[0]}.{machine[1]}.{process[1]}"


def process_identity() -> str:
    """``~boot.ns.start`` of this process (``""`` without ``/proc``): appended to
    ``host:pid`` it names this process for its whole life (:func:`holder_gone`)."""
    return _identity(os.getpid())


def worker_label(name: str = "") -> str:
    """``name`` (default: the host name), ``:pid`` and :func:`process_identity`, as stored
    in a record's ``worker`` field; the identity is kept whole when the name is cut."""
    suffix = f":{os.getpid()}{process_identity()}"
    return (name or socket.gethostname())[: _LABEL_LENGTH - len(suffix)] + suffix


def local_marker() -> str | None:
    """The part every label of this machine and PID namespace contains (a cheap filter
    before :func:`holder_gone`); ``None`` without ``/proc``."""
    machine = _machine()
    return None if machine is None else f"~{machine[0]}.{machine[1]}."


def holder_gone(worker: str) -> bool:
    """The process named by ``worker`` (a :func:`worker_label`) is known to be dead: it
    ran on this machine, in this PID namespace, and its PID is gone, a zombie, or names a
    process started at another time.  ``False`` when that cannot be known."""
    match = _IDENTITY.search(worker or "")
    machine = _machine()
    if match is None or machine is None or (match["boot"], match["ns"]) != machine:
        return False
    process = _process(int(match["pid"]))
    return process is None or process[0] in ("Z", "X") or process[1] != match["start"]


def lease_lost(lease_expires_at: datetime | None, worker: str, now: datetime | None = None) -> bool:
    """A lease that was taken and is lost: it ran out, or its holder is known dead."""
    if lease_expires_at is None:
        return False
    return lease_expired(lease_expires_at, now) or holder_gone(worker)


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
