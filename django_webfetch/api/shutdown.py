"""The server is stopping: the run streams and the long-polls end, so that a graceful stop
does not wait for them.

An ASGI server stops gracefully by refusing new connections and waiting for the open ones
to finish; a Server-Sent Events stream lasts up to ``MAX_STREAM_SECONDS`` (and a long-poll
up to 25 s), so one editor watching a run held a stopping uvicorn for minutes.  Django has
no shutdown signal of its own and the example serves without the lifespan protocol (whose
shutdown event uvicorn sends only *after* the open connections closed anyway), so
:func:`watch_signals` chains a handler for ``SIGTERM`` and ``SIGINT`` in front of the
server's own: it sets :func:`stopping` and calls the server's handler as before.  A stream
then ends after its next read (a tenth of a second); ``EventSource`` reconnects with
``Last-Event-ID`` to the next process and misses nothing.  A long-poll answers what it has.

Installed by every stream and long-poll when it starts (its view runs in the server's event
loop, in the main thread, where Python lets a handler be set), unless the handler in place is
already this one, and by an ASGI module that calls :func:`watch_signals` at import (the
example's ``asgi.py``): uvicorn sets its own handlers after the import, in front of that one.
The server's own timeout (``--timeout-graceful-shutdown``) stays the bound on anything else
still running.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType
from typing import Any

__all__ = ["stopping", "watch_signals"]

logger = logging.getLogger("django_webfetch.api")

_stopping = threading.Event()
_watched_pid: int | None = None
_lock = threading.Lock()
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stopping() -> bool:
    """Whether this process was asked to stop (``SIGTERM`` or ``SIGINT``)."""
    return _stopping.is_set()


def watch_signals() -> bool:
    """Chain the handler in front of whatever handles ``SIGTERM`` and ``SIGINT`` now, unless
    it is there already; ``False`` off the main thread, where Python allows no handler to be
    set (a later call from the main thread installs it).

    Checked again at every call, not once per process: a server that sets its own handlers
    after the application was imported (uvicorn does, around its serving loop) would
    otherwise shadow the one chained at import, and the streams would see the stop only
    after the server had waited out its graceful-shutdown timeout."""
    global _watched_pid
    if threading.current_thread() is not threading.main_thread():
        return _watched_pid == os.getpid() and _all_chained()
    with _lock:
        if _watched_pid != os.getpid():
            _stopping.clear()  # a forked child starts afresh
            _watched_pid = os.getpid()
        for number in _SIGNALS:
            previous = signal.getsignal(number)
            # A signal the process ignores stops nothing.
            if previous != signal.SIG_IGN and previous not in _handlers:
                _chain(number, previous)
    return True


def _all_chained() -> bool:
    return all(
        signal.getsignal(number) in _handlers or signal.getsignal(number) == signal.SIG_IGN
        for number in _SIGNALS
    )


#: The handlers this module chained (so that a second call chains nothing twice).
_handlers: list[Any] = []


def _chain(number: int, previous: Any) -> None:
    def handler(sig: int, frame: FrameType | None) -> None:
        if not _stopping.is_set():
            logger.info("stopping: the open streams and long-polls end now")
        _stopping.set()
        if callable(previous):
            previous(sig, frame)
        elif previous == signal.SIG_DFL:
            # Nothing of the server's own: behave as before this handler was set.
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)

    _handlers.append(handler)
    signal.signal(number, handler)
