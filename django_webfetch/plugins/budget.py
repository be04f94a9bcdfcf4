"""The per-instance connection budget (``WEBFETCH_PLUGIN_MAX_CONNECTIONS``, default 4).

A plugin instance holds at most that many connections at once, counted across every
process and Celery worker when ``WEBFETCH_PLUGIN_REDIS_URL`` is set: each connection is a
lease in a Redis sorted set (member = a random token, score = its expiry in Redis' own
clock), taken and counted by one Lua script, so two workers can never both take the last
slot.  A lease is released when the connection closes; one whose worker died expires
after the whole-request budget (``WEBFETCH_TIMEOUT``) plus a margin and is swept by the
next acquirer.  Without Redis (the embedded default) the budget is counted per process.

A request that finds the budget full waits up to ``WEBFETCH_CONNECT_TIMEOUT`` for a slot,
then is refused (``EgressDenied``, reason ``connection_budget``).  When Redis is configured
but unreachable, requests are refused (``connection_budget_unavailable``): fail closed.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from django_webfetch.net.errors import EgressDenied

__all__ = ["Budget", "Lease", "LocalBudget", "RedisBudget", "budget_for", "connection_gauges"]

#: Added to the request budget to get a lease's lifetime (a lease outlives its request).
LEASE_MARGIN = 5.0


class Lease:
    """One held connection slot; ``release()`` is idempotent."""

    def __init__(self, release: Callable[[], None]) -> None:
        self._release = release
        self._lock = threading.Lock()
        self.released = False

    def release(self) -> None:
        with self._lock:
            if self.released:
                return
            self.released = True
        self._release()


class Budget(Protocol):
    def acquire(self, key: str, limit: int, *, wait: float, ttl: float) -> Lease: ...


def _full(key: str, limit: int) -> EgressDenied:
    return EgressDenied(
        "connection_budget", detail=f"{key}: all {limit} connections of the instance are in use"
    )


class LocalBudget:
    """Per-process counting (no Redis configured)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: dict[str, int] = {}

    def acquire(self, key: str, limit: int, *, wait: float, ttl: float) -> Lease:
        deadline = time.monotonic() + max(wait, 0.0)
        with self._cond:
            while self._held.get(key, 0) >= limit:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _full(key, limit)
                self._cond.wait(remaining)
            self._held[key] = self._held.get(key, 0) + 1

        def release() -> None:
            with self._cond:
                self._held[key] -= 1
                if not self._held[key]:
                    del self._held[key]
                self._cond.notify()

        return Lease(release)

    def held(self, key: str) -> int:
        with self._cond:
            return self._held.get(key, 0)


# KEYS[1] the instance's set; ARGV: limit, lease ms, token.  Redis' own clock decides
# expiry, so workers with skewed clocks agree.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + 1000)
  return 1
end
return 0
"""

_POLL = 0.05


class RedisBudget:
    """Counting shared by every process that uses the same Redis."""

    prefix = "django_webfetch:plugin_connections:"

    def __init__(self, url: str) -> None:
        try:
            import redis
        except ImportError as exc:
            from django_webfetch.exceptions import WebFetchImproperlyInstalled

            raise WebFetchImproperlyInstalled("redis", "celery") from exc
        self._client: Any = redis.Redis.from_url(
            url, socket_timeout=2.0, socket_connect_timeout=2.0
        )
        self._script: Any = self._client.register_script(_ACQUIRE)

    def acquire(self, key: str, limit: int, *, wait: float, ttl: float) -> Lease:
        name = self.prefix + key
        token = secrets.token_hex(12)
        deadline = time.monotonic() + max(wait, 0.0)
        while True:
            try:
                taken = self._script(keys=[name], args=[limit, int(ttl * 1000), token])
            except Exception as exc:
                raise EgressDenied(
                    "connection_budget_unavailable",
                    detail=f"redis: {type(exc).__name__}",
                ) from exc
            if taken:
                break
            if time.monotonic() >= deadline:
                raise _full(key, limit)
            time.sleep(_POLL)

        def release() -> None:
            # If Redis is gone the lease expires on its own.
            with contextlib.suppress(Exception):
                self._client.zrem(name, token)

        return Lease(release)

    def held(self, key: str) -> int:
        name = self.prefix + key
        now_s, now_us = self._client.time()
        now = now_s * 1000 + now_us // 1000
        return int(self._client.zcount(name, now, "+inf"))


_local = LocalBudget()


@functools.lru_cache(maxsize=4)
def _redis_budget(url: str) -> RedisBudget:
    return RedisBudget(url)


def budget_for(redis_url: str | None) -> LocalBudget | RedisBudget:
    if not redis_url:
        return _local
    return _redis_budget(redis_url)


def connection_gauges() -> list[tuple[str, str, dict[tuple[tuple[str, str], ...], float]]]:
    """Scrape-time gauge (``metrics.add_source``): connections each plugin instance holds
    now (across processes with Redis; this process's otherwise)."""
    from django_webfetch.conf import conf
    from django_webfetch.plugins.models import PluginInstance

    budget = budget_for(conf.WEBFETCH_PLUGIN_REDIS_URL)
    values: dict[tuple[tuple[str, str], ...], float] = {}
    for pk, plugin, alias in PluginInstance.objects.values_list("pk", "plugin", "alias")[:1000]:
        try:
            held = budget.held(str(pk))
        except Exception:
            continue
        values[(("instance", f"{plugin}:{alias}"),)] = held
    return [
        (
            "webfetch_plugin_connections_in_use",
            "Connections a plugin instance holds now (its budget: "
            "WEBFETCH_PLUGIN_MAX_CONNECTIONS).",
            values,
        )
    ]
