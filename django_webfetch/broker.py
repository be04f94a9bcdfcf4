"""Celery workers that outlive a Redis restart (issue 33).

A worker consuming from Redis loses its broker connection when Redis restarts or crashes.
Celery then collects the connection: the kombu transport is closed and forgets its
``client`` (``kombu.Connection._do_close_transport``).  A task that was running at that
moment still holds its message, bound to a channel of the closed transport.  When it
ends, Celery acknowledges it (``acks_late``) on that channel: the channel has no pool left
(it was disconnected), so it builds a new one from ``self.connection.client``, which is
now ``None``, and raises ``AttributeError: 'NoneType' object has no attribute
'hostname'`` (``kombu/transport/redis.py``, ``Channel._connparams``).  Celery's
``ack_log_error`` only expects the transport's connection errors, so the
``AttributeError`` reaches the worker's event loop and the worker exits: a busy worker
dies, an idle one (no acknowledgement pending) survives.  The same path is kombu#970 (the
restore of unacknowledged messages at shutdown) and kombu#582 (closing a channel).

Checked with kombu 5.7.0 and redis-py 8.2.0; no released kombu avoids it.
:func:`survive_lost_connections` makes a channel whose transport was closed raise the
transport's own connection error instead (``redis.exceptions.ConnectionError``), which
Celery expects there: the acknowledgement is logged as failed ("Couldn't ack") and the
worker goes on reconnecting.  Nothing is lost by that: the message belonged to the
broker that went away (a Redis restarted without persistence has forgotten it; one with
persistence delivers it again after its visibility timeout, and the task then finds its
call finished and does nothing).  Work whose message was lost is queued again by the
sweep (``runs.queue.requeue_due``, ``assistant.recover``).

``tasks.py`` applies it when Celery imports the tasks (workers and publishers alike).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

__all__ = ["survive_lost_connections"]

logger = logging.getLogger("django_webfetch.runs")

_MARK = "_webfetch_survives_lost_connections"


def survive_lost_connections() -> bool:
    """Make kombu's Redis channels of a closed transport raise a connection error (which
    Celery handles) instead of ``AttributeError`` (which ends the worker).  Idempotent;
    ``False`` when kombu's Redis transport is not installed or has changed shape."""
    try:
        import redis.exceptions
        from kombu.transport import redis as kombu_redis
    except ImportError:
        return False
    channel = getattr(kombu_redis, "Channel", None)
    original = getattr(channel, "_connparams", None)
    if channel is None or original is None:
        return False
    if getattr(original, _MARK, False):
        return True

    @functools.wraps(original)
    def _connparams(self: Any, *args: Any, **kwargs: Any) -> Any:
        transport = getattr(self, "connection", None)
        if transport is None or getattr(transport, "client", None) is None:
            raise redis.exceptions.ConnectionError(
                "the broker connection of this channel was closed (the broker was lost)"
            )
        return original(self, *args, **kwargs)

    setattr(_connparams, _MARK, True)
    channel._connparams = _connparams
    return True
