"""Celery tasks: thin wrappers around ``django_webfetch.runs`` and the assistant.

The only module that binds the task names (``runs.dispatch``) to Celery tasks; imported by
Celery's ``autodiscover_tasks``, never by a service (they send work by task name).  The app
never creates a Celery app of its own.

The periodic sweep needs no beat schedule: each worker sends it when it is ready and then
every ``WEBFETCH_WORKER_SWEEP_EVERY`` seconds (15; ``0`` turns that off), so expiry, lost
workers and lost messages are handled wherever a worker runs.  A beat schedule may send it
as well (a duplicate sweep is harmless)::

    CELERY_BEAT_SCHEDULE = {
        "django_webfetch.expire_tool_calls": {
            "task": "django_webfetch.expire_tool_calls",
            "schedule": 15.0,
        },
    }
"""

from __future__ import annotations

import logging
import threading
from typing import Any

try:
    from celery import shared_task
    from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from .exceptions import WebFetchImproperlyInstalled

    raise WebFetchImproperlyInstalled("celery", "celery") from exc

from django.db import InterfaceError, OperationalError

from . import runs
from .assistant.loop import advance, answered, release_handed_off
from .assistant.recover import sweep_all
from .broker import survive_lost_connections
from .conf import conf
from .runs.dispatch import ADVANCE_ASSISTANT_RUN, PROVIDER_ANSWERED, RUN_TOOL_CALL, SWEEP
from .runs.durable import worker_label

__all__ = [
    "advance_assistant_run",
    "assistant_provider_answered",
    "expire_tool_calls",
    "run_tool_call",
]

logger = logging.getLogger("django_webfetch.runs")

# A busy worker must outlive a Redis restart (``broker.py``): applied where Celery imports
# the tasks, before the worker consumes.
survive_lost_connections()


#: The options of every task that advances a durable record (a call, a run).
_DURABLE: dict[str, Any] = {
    # Acknowledge only when done: a worker killed mid-task leaves the message to be
    # delivered again; the task decides what a redelivery means (idempotent: the record's
    # lease and state keep it from repeating work).
    "acks_late": True,
    "reject_on_worker_lost": True,
    # A database that is briefly unavailable (SQLite "database is locked", a failover):
    # try again later rather than leave the record waiting for the sweep.
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "max_retries": 8,
    "ignore_result": True,
}


def _worker(task: Any) -> str:
    """The lease holder's label of the worker running ``task``."""
    return worker_label(getattr(task.request, "hostname", None) or "celery")


@shared_task(name=RUN_TOOL_CALL, bind=True, **_DURABLE)
def run_tool_call(self: Any, call_id: str) -> str:
    delivery = getattr(self.request, "delivery_info", None) or {}
    redelivered = bool(delivery.get("redelivered"))
    return runs.execute(call_id, redelivered=redelivered, worker=_worker(self)).action


@shared_task(
    name=SWEEP,
    ignore_result=True,
)
def expire_tool_calls() -> dict[str, int]:
    """Expire approval requests past their time, recover calls of lost workers, queue
    again approved calls whose message went missing."""
    return sweep_all()


@shared_task(name=ADVANCE_ASSISTANT_RUN, bind=True, **_DURABLE)
def advance_assistant_run(self: Any, run_id: str) -> str:
    """Advance an assistant run up to its next provider request, handed to this worker
    process's provider I/O loop (the task ends; :data:`PROVIDER_ANSWERED` goes on).
    Eager, or on a green pool, the task waits for one request itself."""
    detach = _may_detach(self)
    return advance(run_id, worker=_worker(self), max_provider_calls=1, detach=detach).action


@shared_task(name=PROVIDER_ANSWERED, bind=True, **_DURABLE)
def assistant_provider_answered(
    self: Any, run_id: str, version: int, outcome: dict[str, Any]
) -> str:
    """The follow-up of a provider request that ended on a worker's provider I/O loop:
    record its answer and advance the run (``assistant.loop.answered``; a duplicate, or a
    run changed meanwhile, is left alone)."""
    return answered(run_id, version, outcome, worker=_worker(self)).action


def _may_detach(task: Any) -> bool:
    """Hand provider requests to the process's provider I/O loop: not in an eager task
    (it runs in the caller's request), nor under a green pool (gevent, eventlet: their
    patched threads would run the loop as one more greenlet)."""
    if getattr(task.request, "is_eager", False):
        return False
    return not _green()


def _green() -> bool:
    import sys

    gevent = sys.modules.get("gevent.monkey")
    if gevent is not None and gevent.is_module_patched("threading"):
        return True
    eventlet = sys.modules.get("eventlet.patcher")
    return bool(eventlet is not None and eventlet.is_monkey_patched("thread"))


@worker_process_shutdown.connect
def _release_on_exit(sender: Any = None, **kwargs: Any) -> None:
    """A pool child exits on purpose (a warm shutdown, or recycled after
    ``worker_max_tasks_per_child``): the runs whose requests its loop holds are queued
    again at once rather than waiting for the sweep to find it gone."""
    _release()


def _release() -> None:
    try:
        released = release_handed_off()
    except Exception:
        logger.exception("in-flight provider requests not released")
        return
    if released:
        logger.info("released %s assistant run(s) whose provider requests were in flight", released)


class _Sweeper:
    """A thread of the worker's main process that sends the sweep task: at once when the
    worker is ready (a worker started after a crash recovers what the crash left), then
    every ``every`` seconds, to a queue the worker consumes itself (the default queue if it
    does, else its first), so no sweep waits in a queue nobody reads.  Each message
    expires after ``every`` seconds, so sweeps never pile up behind busy workers; a broker
    that is down is tried again at the next tick."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, every: float, queue: str | None = None) -> None:
        if self.thread is not None and self.thread.is_alive():
            return
        self.stopping = threading.Event()
        self.thread = threading.Thread(
            target=self._run,
            args=(self.stopping, every, queue),
            name="webfetch-sweeper",
            daemon=True,
        )
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _run(self, stopping: threading.Event, every: float, queue: str | None) -> None:
        while not stopping.is_set():
            try:
                if queue:
                    expire_tool_calls.apply_async(expires=every, queue=queue)
                else:
                    expire_tool_calls.apply_async(expires=every)
            except Exception as exc:
                logger.warning("the periodic sweep could not be queued: %r", exc)
            if stopping.wait(every):
                return


_sweeper = _Sweeper()


def _own_queue(consumer: Any) -> str | None:
    """``None`` (default routing) when the worker consumes the default queue, else the
    first queue it consumes."""
    task_consumer = getattr(consumer, "task_consumer", None)
    names = [queue.name for queue in getattr(task_consumer, "queues", None) or []]
    app = getattr(consumer, "app", None)
    default = getattr(getattr(app, "conf", None), "task_default_queue", None)
    if not names or default in names:
        return None
    return str(names[0])


@worker_ready.connect
def _start_sweeping(sender: Any = None, **kwargs: Any) -> None:
    every = conf.WEBFETCH_WORKER_SWEEP_EVERY
    if every:
        _sweeper.start(every, _own_queue(sender))


@worker_shutdown.connect
def _stop_sweeping(sender: Any = None, **kwargs: Any) -> None:
    _sweeper.stop()
    # The threads and solo pools run the tasks (and the provider I/O loop) in this process.
    _release()
