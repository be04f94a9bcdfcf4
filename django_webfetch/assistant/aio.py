"""The provider I/O loop: one asyncio event loop thread per process streams every provider
request the background runner (or a Celery worker process's task) hands it.

Waiting on a model is I/O.  A runner thread that held a provider request for as long as it
streamed (up to ``WEBFETCH_ASSISTANT_TIMEOUT``, and again for its retry) let four hung
models stall every other editor of the process.  Instead, the runner thread prepares the
request (the provider, the tools, the budget charge, the guarded client: database work), hands
the request to this loop (:meth:`ProviderLoop.submit`) and is released; the loop streams any
number of requests at once, at most ``WEBFETCH_ASSISTANT_PROVIDER_CONCURRENCY`` per provider
endpoint (the rest wait their turn on the loop, holding no thread), and when a request ends
its follow-up (record the answer, request the tool calls) is sent by name: queued on the
runner again, or sent as a Celery task (``loop``).

The stream's database writes (``text_delta`` events, the lease renewal) run on a small pool
of their own (:meth:`ProviderLoop.run_db`, ``WEBFETCH_RUNNER_THREADS`` threads), never on the
loop, so a slow write delays no other stream's reading.  The loop starts on first use, once
per process (a forked child starts its own), as a daemon thread: a process that exits drops
what it held, and the run's lease recovers it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from typing import Any, TypeVar

from django.db import close_old_connections

from django_webfetch.conf import conf

__all__ = ["ProviderLoop", "provider_loop"]

logger = logging.getLogger("django_webfetch.assistant")

T = TypeVar("T")

#: Seconds between two renewals of the lease of a run whose request waits for its bound.
KEEPALIVE_EVERY = 5.0


class ProviderLoop:
    """An event loop on a thread of its own, with one semaphore per provider key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._db: concurrent.futures.ThreadPoolExecutor | None = None
        self._pid: int | None = None
        self._limits: dict[Hashable, tuple[int, asyncio.Semaphore]] = {}
        #: Requests handed to the loop and not finished yet.
        self.in_flight = 0
        #: Of those, the requests waiting for their provider's concurrency bound.
        self.waiting = 0

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is not None and self._pid == os.getpid() and self._loop.is_running():
                return self._loop
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            self._thread = threading.Thread(target=serve, name="webfetch-provider-io", daemon=True)
            self._thread.start()
            ready.wait()
            self._db = concurrent.futures.ThreadPoolExecutor(
                max_workers=conf.WEBFETCH_RUNNER_THREADS, thread_name_prefix="webfetch-provider-db"
            )
            self._limits = {}
            self.in_flight = 0
            self.waiting = 0
            self._loop = loop
            self._pid = os.getpid()
            return loop

    def submit(
        self,
        make: Callable[[], Coroutine[Any, Any, T]],
        *,
        key: Hashable,
        keepalive: Callable[[], Awaitable[Any]] | None = None,
    ) -> concurrent.futures.Future[T]:
        """Run the coroutine ``make()`` on the loop, at most
        ``WEBFETCH_ASSISTANT_PROVIDER_CONCURRENCY`` at once per ``key``; its future.
        ``keepalive()`` is awaited every ``KEEPALIVE_EVERY`` seconds while it waits for the
        bound (the run's lease is renewed: a request that waits its turn is not lost); it
        must not raise."""
        loop = self._start()
        limit = conf.WEBFETCH_ASSISTANT_PROVIDER_CONCURRENCY
        with self._lock:
            self.in_flight += 1

        async def bounded() -> T:
            try:
                semaphore = self._semaphore(key, limit)
                self._count("waiting", 1)
                try:
                    await self._acquire(semaphore, keepalive)
                finally:
                    self._count("waiting", -1)
                try:
                    return await make()
                finally:
                    semaphore.release()
            finally:
                self._count("in_flight", -1)

        return asyncio.run_coroutine_threadsafe(bounded(), loop)

    @staticmethod
    async def _acquire(
        semaphore: asyncio.Semaphore, keepalive: Callable[[], Awaitable[Any]] | None
    ) -> None:
        """Take the semaphore, awaiting ``keepalive()`` every ``KEEPALIVE_EVERY`` seconds
        meanwhile (one waiter, never cancelled on a timeout: no permit is lost)."""
        taking = asyncio.ensure_future(semaphore.acquire())
        try:
            while not taking.done():
                await asyncio.wait({taking}, timeout=KEEPALIVE_EVERY)
                if not taking.done() and keepalive is not None:
                    await keepalive()
        except BaseException:
            if taking.done() and not taking.cancelled():
                semaphore.release()
            else:
                taking.cancel()
            raise
        await taking

    def _count(self, name: str, change: int) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + change)

    def _semaphore(self, key: Hashable, limit: int) -> asyncio.Semaphore:
        """The key's semaphore (on the loop's thread; a new one when the limit changed)."""
        held = self._limits.get(key)
        if held is None or held[0] != limit:
            held = self._limits[key] = (limit, asyncio.Semaphore(limit))
        return held[1]

    def run_db(self, action: Callable[[], T]) -> Awaitable[T]:
        """Run ``action`` (database work: a stream's writes) on the loop's database pool,
        off the loop; each thread gives its connection back as a request would."""

        def run() -> T:
            try:
                return action()
            finally:
                close_old_connections()

        assert self._db is not None
        return asyncio.get_running_loop().run_in_executor(self._db, run)


#: The process's provider I/O loop.
provider_loop = ProviderLoop()
