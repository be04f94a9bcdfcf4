"""The background runner: work sent by task name runs off the request, in this process.

Where no Celery broker is configured (``WEBFETCH_ASYNC_RUNS`` off) and
``WEBFETCH_RUNNER`` is ``background`` (the default), :func:`run_later` puts the task name
and its arguments on an in-memory queue that a few daemon threads
(``WEBFETCH_RUNNER_THREADS``) take from; each calls the handler bound to the name
(``dispatch.run_here``), exactly as a Celery worker would call the task.  A request that
posts a message or approves a call returns at once.

Nothing durable lives in the queue.  The database is the source of truth, and every
handler takes its record's lease with a compare-and-set (``runs.execute``, the
assistant's ``loop.acquire``), so a duplicate is harmless and a lost one is found again:
the runner sweeps (``dispatch.SWEEP``: expiry, lost workers, lost messages) when it
starts and every ``WEBFETCH_RUNNER_SWEEP_EVERY`` seconds (15), as Celery beat would.  A
web process killed mid-run leaves leases that name it (``durable.worker_label``): the
next process's first sweep on the same machine finds the process gone and takes its runs
and calls over at once, and it queues again everything queued and not started (the dead
queue's work), without waiting for ``WEBFETCH_REQUEUE_AFTER``.  A process that died on
another machine stops renewing its short leases (``WEBFETCH_LEASE_SECONDS``): the runner
sweeps again just after the first lease held elsewhere runs out, sooner than its period.

The runner starts lazily: on the first task sent, and on the first request the process
serves (``apps.py`` connects :func:`start_serving` to ``request_started``), so a restarted
server recovers its runs without waiting for new work.  Management commands that serve
nothing (``migrate``, ``check``) never start it.  A forked child starts its own.

A task that waits on I/O elsewhere (the assistant's provider request, on the provider I/O
loop of ``assistant.aio``) releases its thread: it takes a :meth:`Runner.reserve` ticket,
which counts as busy work (``wait_idle``) until the follow-up task it names is queued.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

from django_webfetch.conf import conf

from .dispatch import SWEEP, run_here
from .durable import next_lease_end
from .limits import runner_mode

__all__ = ["Reservation", "Runner", "run_later", "runner", "start_serving", "warm_up"]

logger = logging.getLogger("django_webfetch.runs")

_STOP = object()


class Runner:
    """A queue, ``threads`` worker threads and a sweeper thread (all daemons: a process
    that exits drops what it held, and the leases recover it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.Queue[Any] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._pid: int | None = None
        self._busy = 0
        self._idle = threading.Condition(self._lock)
        self._warm_ups: list[Callable[[], Any]] = []
        self._local = threading.local()
        self._generation = 0

    def warm_up(self, action: Callable[[], Any]) -> None:
        """Run ``action`` on the sweeper thread when the runner starts, before its first
        sweep (imports the first task would otherwise pay for, e.g. the model stack)."""
        if action not in self._warm_ups:
            self._warm_ups.append(action)

    @property
    def running(self) -> bool:
        return self._pid == os.getpid() and not self._stopping.is_set()

    def start(self) -> None:
        """Start the threads (once per process; again after :meth:`stop` or a fork)."""
        if self.running:
            return
        with self._lock:
            if self._pid == os.getpid() and not self._stopping.is_set():
                return
            self._queue = queue.Queue()
            self._stopping = threading.Event()
            self._busy = 0
            self._generation += 1
            self._pid = os.getpid()
            count = conf.WEBFETCH_RUNNER_THREADS
            self._threads = [
                threading.Thread(
                    target=self._work, name=f"webfetch-runner-{n}", args=(self._queue,), daemon=True
                )
                for n in range(count)
            ]
            self._threads.append(
                threading.Thread(
                    target=self._sweep,
                    name="webfetch-runner-sweep",
                    args=(self._stopping, conf.WEBFETCH_RUNNER_SWEEP_EVERY),
                    daemon=True,
                )
            )
            for thread in self._threads:
                thread.start()
        logger.info("background runner started (%s threads, pid %s)", count, self._pid)

    def submit(self, name: str, *args: Any) -> None:
        """Run the task ``name`` with ``args`` on a runner thread, soon."""
        self.start()
        with self._lock:
            self._busy += 1
        self._queue.put((name, args))

    def on_worker_thread(self) -> bool:
        """Whether the caller is one of this process's runner threads (so it may hand
        I/O off and return, see :meth:`reserve`)."""
        return self.running and getattr(self._local, "worker", False)

    def reserve(self) -> Reservation:
        """Count one task as busy now; the :class:`Reservation` queues it later (from any
        thread) or gives the count back: a task handed to another thread stays busy work
        for :meth:`wait_idle` until its follow-up is queued."""
        with self._lock:
            self._busy += 1
            return Reservation(self, self._generation)

    def _queue_reserved(self, generation: int, name: str, args: tuple[Any, ...]) -> None:
        with self._lock:
            if self.running and generation == self._generation:
                self._queue.put((name, args))
                return
        # The runner stopped (or forked) meanwhile: its count was reset; start afresh.
        self.submit(name, *args)

    def _cancel_reserved(self, generation: int) -> None:
        with self._idle:
            if generation == self._generation:
                self._busy -= 1
                self._idle.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop taking work; wait up to ``timeout`` for the threads (tests, shutdown)."""
        with self._lock:
            if self._pid != os.getpid():
                return
            self._stopping.set()
            threads = list(self._threads)
            for _ in threads:
                self._queue.put(_STOP)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
        self._pid = None

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no submitted task is queued or running; ``False`` on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def _work(self, tasks: queue.Queue[Any]) -> None:
        self._local.worker = True
        while True:
            item = tasks.get()
            if item is _STOP:
                return
            name, args = item
            try:
                run_here(name, *args)
            except Exception:
                logger.exception("background task %s%r failed", name, args)
            finally:
                # Each thread has its own connection: never keep one open between tasks.
                connections.close_all()
                with self._idle:
                    self._busy -= 1
                    self._idle.notify_all()

    def _sweep(self, stopping: threading.Event, every: float) -> None:
        for action in list(self._warm_ups):
            try:
                action()
            except Exception:
                logger.exception("background runner warm-up %r failed", action)
        # The first sweep catches up: work queued in a process that died (this one's
        # predecessor) is queued again at once, not after WEBFETCH_REQUEUE_AFTER.
        catch_up = True
        while not stopping.is_set():
            self.submit(SWEEP, None, catch_up)
            catch_up = False
            if stopping.wait(_until_next_sweep(every)):
                return


#: The sweep that waits for a lease to run out comes this long after it (clock skew
#: between this process and the database, and the sweep's own delay in the queue).
_AFTER_LEASE = 0.5


def _until_next_sweep(every: float) -> float:
    """Seconds until the next sweep: ``every``, or sooner, just after the first lease (or
    step deadline) held by another process runs out (``durable.next_lease_end``), so a
    process that died anywhere is taken over one lease after its last renewal, not up to
    a sweep period later; at least one second."""
    try:
        soonest = next_lease_end()
    except Exception:  # a busy database: sweep on the period
        logger.warning("background runner: next lease end unknown", exc_info=True)
        soonest = None
    finally:
        connections.close_all()
    if soonest is None:
        return every
    return min(every, max(soonest + _AFTER_LEASE, 1.0))


class Reservation:
    """One task counted busy on a :class:`Runner` before it is queued (:meth:`Runner.reserve`):
    call it with the task's name and arguments once, or :meth:`cancel` it."""

    def __init__(self, runner: Runner, generation: int) -> None:
        self._runner = runner
        self._generation = generation
        self._used = threading.Event()

    def _use(self) -> None:
        if self._used.is_set():
            raise RuntimeError("a runner reservation is used once")
        self._used.set()

    def __call__(self, name: str, *args: Any) -> None:
        self._use()
        self._runner._queue_reserved(self._generation, name, args)

    def cancel(self) -> None:
        self._use()
        self._runner._cancel_reserved(self._generation)


#: The process's runner.
runner = Runner()
warm_up = runner.warm_up


def run_later(name: str, *args: Any) -> None:
    """Run the task ``name`` on the background runner (``WEBFETCH_RUNNER = "background"``),
    or right here in ``inline`` mode."""
    if runner_mode() == "inline":
        run_here(name, *args)
    else:
        runner.submit(name, *args)


def start_serving(sender: Any = None, **kwargs: Any) -> None:
    """``request_started``: a serving process starts its runner (it sweeps at once)."""
    if runner.running:
        return
    if runner_mode() == "background":
        runner.start()
