"""The plumbing of a durable record that one worker at a time may hold.

Tool calls (``runs``) and assistant runs (``assistant``) are both rows that change state
only through a compare-and-set under a row lock, held by a worker through a *lease*
(``lease_expires_at``) that the holder renews while it works.  What they share lives here:

- :class:`TransitionRefused`: the base of both "this change is not allowed now" errors;
- :func:`retry_while_locked`: SQLite refuses the loser of a write race with "database is
  locked" instead of making it wait; the operation is tried again with a short backoff;
- :data:`keeper` (:class:`LeaseKeeper`): the one heartbeat of a process, renewing every
  lease the process holds every few seconds;
- :func:`worker_label` and :func:`holder_gone`: who holds a lease, and whether that process
  is known to be dead;
- :func:`lease_lost`, :func:`lease_expired`, :func:`is_active`, :class:`Outcome`.

Two bounds, kept apart: the *lease* (``lease_expires_at``, ``WEBFETCH_LEASE_SECONDS``, 15 s)
says the holder's process is alive, and is renewed by that process's heartbeat whatever
the step does; the *step deadline* (``step_deadline``) says how long the step may take
(the provider timeout, a call's time limit), counted from when it started or last made
progress.  A dead process anywhere loses its records one lease after its last beat; a
live process whose step is stuck loses it at the step's deadline (the heartbeat stops
renewing it); a live, healthy step is never taken over, however long it streams.

A lease names its holder: ``host:pid~boot.ns.start``, the process's kernel boot id, PID
namespace and start time (``/proc``).  Those identify one process on one machine for its
whole life, so a sweep on the same machine (same boot id and PID namespace) that finds the
PID gone, a zombie, or reused by a younger process knows the holder is dead and takes the
record over at once, rather than after the lease.  A holder on another machine, in
another PID namespace or without ``/proc`` is judged by its lease alone, which is short.
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
from django.db.models import Min, Q
from django.utils import timezone

from django_webfetch.conf import conf
from django_webfetch.net.errors import WebFetchError

__all__ = [
    "LEASED",
    "MIN_LEASE_SECONDS",
    "SQLITE_RETRIES",
    "LeaseKeeper",
    "Leased",
    "Outcome",
    "TransitionRefused",
    "holder_gone",
    "is_active",
    "keeper",
    "lease_expired",
    "lease_lost",
    "lease_seconds",
    "local_marker",
    "next_lease_end",
    "process_identity",
    "register_leased",
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


def lease_lost(
    lease_expires_at: datetime | None,
    worker: str,
    now: datetime | None = None,
    step_deadline: datetime | None = None,
) -> bool:
    """A lease that was taken and is lost: it ran out, its step outlived its deadline
    (a live holder that is stuck), or its holder is known dead."""
    if lease_expires_at is None:
        return False
    return (
        lease_expired(lease_expires_at, now)
        or lease_expired(step_deadline, now)
        or holder_gone(worker)
    )


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


#: Below this many seconds a lease can run out under a live holder whose database
#: stalls for a moment (a checkpoint, a failover): system check ``W064``.
MIN_LEASE_SECONDS = 5.0


def lease_seconds() -> float:
    """How long a running record stays owned without a renewal (``WEBFETCH_LEASE_SECONDS``):
    the :data:`keeper` of the holder's process renews it every third of that, so past
    it the holder is dead, wherever it ran."""
    return conf.WEBFETCH_LEASE_SECONDS


@dataclass(frozen=True)
class Leased:
    """A model whose rows are held through ``lease_expires_at``, ``step_deadline`` and
    ``worker`` while their ``state`` is ``running``."""

    model: Any
    running: str


#: The leased models (``apps.py`` registers the tool calls and the assistant runs).
LEASED: list[Leased] = []


def register_leased(model: Any, running: str) -> None:
    if all(leased.model is not model for leased in LEASED):
        LEASED.append(Leased(model, running))


def _renewable(leased: Leased, labels: list[str], now: datetime) -> Any:
    """The records held by ``labels`` whose step is within its deadline."""
    return leased.model.objects.filter(
        Q(step_deadline__isnull=True) | Q(step_deadline__gt=now),
        state=leased.running,
        worker__in=labels,
        lease_expires_at__isnull=False,
    )


class LeaseKeeper:
    """The one heartbeat of a process: a thread that renews, every third of the lease,
    the lease of every running record held under a label this process took a lease with
    (:meth:`hold`), with one ``UPDATE`` per leased model, however many records it holds.

    Each beat is a compare-and-set: it names the holder (``worker``), the running state
    and a step within its deadline, so it never revives a record another worker took or
    moved on, and never keeps alive a step that outlived its bound (``step_deadline``):
    a stuck step loses its lease at most one lease after its deadline.  When the process
    dies the beats stop and its leases run out within one lease, wherever it ran.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._labels: set[str] = set()
        self._pid = 0
        self._thread: threading.Thread | None = None
        #: A label was held since the last beat (its record may not be committed yet).
        self._fresh = False
        self._failed = 0
        self.beats = 0

    def hold(self, label: str) -> str:
        """``label`` as stored in a record's ``worker`` field (cut to its length), kept
        alive from now on by this process's heartbeat (started on first use)."""
        label = label[:_LABEL_LENGTH]
        if connection.in_atomic_block:
            # Inside a caller's transaction (ATOMIC_REQUESTS) the running state is not
            # visible to other connections: nothing to renew, and a renewal would wait
            # for the row lock that this very thread holds.
            return label
        with self._lock:
            if self._pid != os.getpid():  # a forked child holds nothing of its parent's
                self._labels = set()
                self._thread = None
                self._pid = os.getpid()
            self._labels.add(label)
            self._fresh = True
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="webfetch-lease-keeper", daemon=True
                )
                self._thread.start()
        return label

    def forget(self) -> None:
        """Hold nothing from now on (a process whose work was all stopped, a test that
        ended): the heartbeat stops at its next beat instead of renewing, or failing to
        renew, leases nobody here holds any more."""
        with self._lock:
            self._labels = set()
            self._fresh = False

    def labels(self) -> list[str]:
        with self._lock:
            return sorted(self._labels) if self._pid == os.getpid() else []

    def _run(self) -> None:
        last = time.monotonic()
        while True:
            # A short tick (no query) so that a changed lease applies at once.
            time.sleep(min(lease_seconds() / 3, 1.0))
            if time.monotonic() - last < lease_seconds() / 3:
                continue
            last = time.monotonic()
            try:
                renewed = self.beat()
            except Exception:  # pragma: no cover - beat() logs its own failures
                logger.exception("lease keeper: beat failed")
                renewed = None
            finally:
                connection.close()  # never keep a connection between two beats
            if renewed == 0 and self._rest():
                return

    def _rest(self) -> bool:
        """Nothing renewed and nothing held since the last beat: forget the labels and
        stop (the next :meth:`hold` starts the heartbeat again)."""
        with self._lock:
            if self._fresh or self._thread is not threading.current_thread():
                return False
            self._labels = set()
            self._thread = None
            return True

    def beat(self) -> int | None:
        """Renew every lease this process holds; the number of records renewed, ``None``
        when the database refused a renewal (the next beat tries again)."""
        with self._lock:
            self._fresh = False
        labels = self.labels()
        if not labels:
            return 0
        now = timezone.now()
        until = now + timedelta(seconds=lease_seconds())
        renewed: int | None = 0
        error: Exception | None = None
        for leased in list(LEASED):
            try:
                count = _renewable(leased, labels, now).update(lease_expires_at=until)
            except Exception as exc:  # a busy database: the next beat tries again
                renewed, error = None, exc
            else:
                renewed = None if renewed is None else renewed + count
        self.beats += 1
        self._failed = 0 if renewed is not None else self._failed + 1
        if self._failed in (1, 3):  # once when it starts, once when the leases lapse
            logger.warning(
                "lease keeper: %s beat(s) in a row could not renew this process's leases",
                self._failed,
                exc_info=error,
            )
        return renewed


#: The process's heartbeat.
keeper = LeaseKeeper()


def next_lease_end(now: datetime | None = None) -> float | None:
    """Seconds until the first lease or step deadline of a record held by *another*
    process runs out (the soonest a sweep can take something over); ``None``: none."""
    now = now or timezone.now()
    own = keeper.labels()
    ends: list[datetime] = []
    for leased in list(LEASED):
        held = leased.model.objects.filter(
            state=leased.running, lease_expires_at__isnull=False
        ).exclude(worker__in=own)
        for field in ("lease_expires_at", "step_deadline"):
            end = held.filter(**{f"{field}__isnull": False}).aggregate(end=Min(field))["end"]
            if end is not None:
                ends.append(end)
    if not ends:
        return None
    return max((min(ends) - now).total_seconds(), 0.0)
