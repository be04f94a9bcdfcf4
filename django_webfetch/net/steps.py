"""One decision, two ways to wait: a generator decides, a driver does its I/O.

The guard and the resolver are written once, as generators that ``yield`` what they need
done (a lookup, one exchange with one DNS server) and receive the result, or have the
failure thrown in at the ``yield``.  ``drive`` performs each request with blocking calls;
``drive_async`` awaits a coroutine for it on the running event loop, with no thread.
Both run the same generator, so the sync and the async paths cannot differ in a rule:
only in how they wait (the sans-I/O split of h11).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar

__all__ = ["Steps", "drive", "drive_async"]

E = TypeVar("E")
R = TypeVar("R")
T = TypeVar("T")

#: A decision that yields requests ``E``, is sent results ``R`` and returns ``T``.
Steps = Generator[E, R, T]


def drive(steps: Generator[E, R, T], perform: Callable[[E], R]) -> T:
    """Run ``steps`` to its end, performing each request with ``perform`` (blocking)."""
    try:
        request = next(steps)
        while True:
            try:
                result = perform(request)
            except Exception as exc:
                request = steps.throw(exc)
            else:
                request = steps.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        steps.close()


async def drive_async(steps: Generator[E, R, T], perform: Callable[[E], Awaitable[R]]) -> T:
    """Run ``steps`` to its end, awaiting ``perform`` for each request (no thread)."""
    try:
        request = next(steps)
        while True:
            try:
                result = await perform(request)
            except Exception as exc:
                request = steps.throw(exc)
            else:
                request = steps.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        steps.close()
