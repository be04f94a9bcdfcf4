"""Settings-derived values of runs: where they run, their time limits and leases."""

from __future__ import annotations

from django_webfetch.conf import conf

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_HEARTBEAT_LEASES",
    "lease_seconds",
    "off_request",
    "runner_mode",
    "runs_async",
    "time_limits",
]

#: A call is run at most this often: a call whose worker was lost is retried once.
MAX_ATTEMPTS = 2

#: A heartbeat renews a lease at most this many times the lease's length after the start:
#: an attempt that runs longer than that is stuck, not slow, and may be declared lost.
MAX_HEARTBEAT_LEASES = 4


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
    """How long a running attempt owns its call.  Past the hard time limit the worker
    process is gone (killed by the pool, or dead), so past the lease the call is lost.
    A live attempt renews its lease (``durable.Heartbeat``) for as long as it runs."""
    return time_limits()[1] + 2.0
