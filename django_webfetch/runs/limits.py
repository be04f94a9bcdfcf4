"""Settings-derived values of runs: where they run, their time limits and leases."""

from __future__ import annotations

from django_webfetch.conf import conf

from . import durable

__all__ = [
    "MAX_ATTEMPTS",
    "STEP_DEADLINE_FACTOR",
    "lease_seconds",
    "off_request",
    "runner_mode",
    "runs_async",
    "step_deadline_seconds",
    "step_seconds",
    "time_limits",
]

#: A call is run at most this often: a call whose worker was lost is retried once.
MAX_ATTEMPTS = 2

#: An attempt's step deadline is this many times :func:`step_seconds` after its start: an
#: attempt that runs longer than that is stuck, not slow, and is declared lost even though
#: its process is alive (its heartbeat stops renewing it).
STEP_DEADLINE_FACTOR = 4


def runs_async() -> bool:
    """Run calls on Celery workers (``WEBFETCH_ASYNC_RUNS``) or in-process (default)."""
    return conf.WEBFETCH_ASYNC_RUNS


def runner_mode() -> str:
    """``celery`` (``WEBFETCH_ASYNC_RUNS``), ``background`` (the in-process runner, the
    default) or ``inline`` (``WEBFETCH_RUNNER = "inline"``: in the request, for tests)."""
    if conf.WEBFETCH_ASYNC_RUNS:
        return "celery"
    return conf.WEBFETCH_RUNNER


def off_request() -> bool:
    """Work is queued (Celery or the background runner), not run in the request: a
    message can be lost, so the sweep queues stale work again."""
    return runner_mode() != "inline"


def time_limits() -> tuple[float, float]:
    """``(soft, hard)`` Celery time limits of one run: above the whole-fetch budget."""
    # The fetch budget covers DNS, connects, redirects and the transfer; what is left is
    # bounded text extraction and a few writes.
    soft = conf.WEBFETCH_TIMEOUT + 2.0
    return soft, soft + 3.0


def lease_seconds() -> float:
    """How long a running attempt owns its call without a renewal
    (``WEBFETCH_LEASE_SECONDS``): its process's heartbeat (``durable.keeper``) renews it
    while the process lives, so past it the process is dead."""
    return durable.lease_seconds()


def step_seconds() -> float:
    """The longest a healthy attempt runs: past the hard time limit the worker process is
    gone (killed by the pool), and the fetch budget bounds an in-process attempt."""
    return time_limits()[1] + 2.0


def step_deadline_seconds() -> float:
    """Seconds from an attempt's start to its ``step_deadline``: past it the attempt is
    stuck and lost, alive or not (:data:`STEP_DEADLINE_FACTOR` times :func:`step_seconds`)."""
    return STEP_DEADLINE_FACTOR * step_seconds()
