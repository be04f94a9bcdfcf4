"""Waiting for a run's next event without a polling thread or a database connection per waiter.

One :class:`Notifier` per event loop (one per ASGI process) serves every waiter: an
``asyncio.Event`` per waiter, and one task that reads the ``(last_event, state)`` of every
watched run in one query every ``POLL_INTERVAL`` seconds and wakes the waiters whose run
moved past what they have seen, or finished.  The query runs in the notifier's own worker
thread, whose database connection is closed as soon as nobody waits: the connections a
process holds for its waiters are one, however many wait.  Events may be written by any
process (Celery workers, another server), so the notifier reads the database rather than
trusting an in-process signal; a write in this process also wakes it at once
(:func:`poke`, called on commit by ``state.event``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connections

from .models import RUN_FINISHED_STATES, AssistantRun

__all__ = ["POLL_INTERVAL", "Notifier", "notifier", "poke", "wait_for_event"]

logger = logging.getLogger("django_webfetch.assistant")

#: Seconds between two reads of the watched runs.
POLL_INTERVAL = 0.1
#: Runs read by one query, at most (the rest in the next queries of the same round).
_CHUNK = 500


class _Waiter:
    __slots__ = ("event", "run_id", "since")

    def __init__(self, run_id: str, since: int) -> None:
        self.run_id = run_id
        self.since = since
        self.event = asyncio.Event()


def _marks(run_ids: list[str]) -> dict[str, tuple[int, str]]:
    """``run id -> (last_event, state)`` of the runs that exist."""
    found: dict[str, tuple[int, str]] = {}
    for start in range(0, len(run_ids), _CHUNK):
        rows = AssistantRun.objects.filter(pk__in=run_ids[start : start + _CHUNK]).values_list(
            "pk", "last_event", "state"
        )
        for pk, last_event, state in rows:
            found[str(pk)] = (last_event, state)
    return found


def _close() -> None:
    connections.close_all()


class Notifier:
    """The waiters of one event loop, and the one task that reads their runs."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiters: set[_Waiter] = set()
        self.task: asyncio.Task[None] | None = None
        self.wake = asyncio.Event()
        self.reads = 0  # queries made (tests and benchmarks count work, not time)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webfetch-watch")

    async def wait(self, run_id: Any, since: int, timeout: float) -> bool:
        """Until run ``run_id`` has an event after ``since``, is finished or gone (``True``),
        or ``timeout`` seconds passed (``False``)."""
        waiter = _Waiter(str(run_id), since)
        self.waiters.add(waiter)
        if self.task is None or self.task.done():
            self.task = self.loop.create_task(self._run())
        else:
            self.wake.set()
        try:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(waiter.event.wait(), timeout)
        finally:
            self.waiters.discard(waiter)
        return waiter.event.is_set()

    async def _run(self) -> None:
        try:
            while self.waiters:
                ids = sorted({w.run_id for w in self.waiters})
                try:
                    marks = await self.loop.run_in_executor(self.executor, _marks, ids)
                except Exception:
                    logger.exception("the run notifier could not read the runs")
                    marks = {}
                    await self.loop.run_in_executor(self.executor, _close)
                self.reads += 1
                for waiter in list(self.waiters):
                    mark = marks.get(waiter.run_id)
                    if mark is None or mark[0] > waiter.since or mark[1] in RUN_FINISHED_STATES:
                        waiter.event.set()
                self.wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), POLL_INTERVAL)
        finally:
            # Nobody waits: the notifier's connection is not kept.
            await self.loop.run_in_executor(self.executor, _close)


_NOTIFIERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Notifier] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def notifier() -> Notifier:
    """The running loop's notifier (one per loop, made on first use)."""
    loop = asyncio.get_running_loop()
    with _LOCK:
        found = _NOTIFIERS.get(loop)
        if found is None:
            found = _NOTIFIERS[loop] = Notifier(loop)
    return found


async def wait_for_event(run_id: Any, since: int, timeout: float) -> bool:
    """Wait (no polling thread, no connection of its own) until the run has an event after
    ``since`` or is finished (``True``), or ``timeout`` passed (``False``)."""
    return await notifier().wait(run_id, since, timeout)


def poke() -> None:
    """Something was written: every notifier reads its runs now (thread-safe)."""
    with _LOCK:
        found = list(_NOTIFIERS.values())
    for item in found:
        if not item.loop.is_closed():
            with contextlib.suppress(RuntimeError):
                item.loop.call_soon_threadsafe(item.wake.set)
