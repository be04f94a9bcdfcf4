"""At most ``WEBFETCH_MAX_CALLS_PER_HOST`` calls in flight per destination host.

The host is the one the call requests first (``Tool.preflight_url``; a redirect elsewhere
still counts against it), as the guard reads it (``net.urlparse.parse_url``: one address
is one destination however it is written); a tool that reaches no network has none.
Slots are counted like the plugin connection budget (``plugins.budget``): in one Redis
sorted set per host, shared by every process and machine, when ``WEBFETCH_REDIS_URL`` (or
``WEBFETCH_PLUGIN_REDIS_URL``) is set; per process otherwise.  A slot whose worker died
expires after the longest a healthy call runs plus a margin.

On Celery a call that finds its host full is not taken: it stays ``approved`` and its task
is queued again with a countdown (:func:`defer`: a quarter of its wait so far, 0.5 to 5 s),
so it waits in the queue, never in a worker.  In-process (no worker to give back) the
background runner's thread waits up to ``WEBFETCH_TIMEOUT`` for a slot, then the call fails with
``destination_busy``.  When the shared count is configured but unreachable the call is
not run (fail closed): on Celery it is deferred as above for up to
:data:`UNAVAILABLE_GRACE` seconds after its approval (Redis restarting: the broker is
usually the same server, back within seconds), then, as in-process at once, it fails with
``destination_limit_unavailable``.
"""

from __future__ import annotations

import functools
import logging
import random
import uuid
from typing import Any

from django.utils import timezone

from django_webfetch import metrics
from django_webfetch.conf import conf
from django_webfetch.models import CallState, ToolCall
from django_webfetch.net.errors import EgressDenied, PolicyError
from django_webfetch.net.ipclass import IpAddressClassifier, classifier_for
from django_webfetch.net.policy import Scope
from django_webfetch.net.urlparse import parse_url
from django_webfetch.plugins.budget import Lease, LocalBudget, RedisBudget
from django_webfetch.tools import ToolResult
from django_webfetch.tools import default_registry as tool_registry

from .limits import runs_async, step_seconds
from .queue import enqueue_call

__all__ = [
    "DEFER_MAX",
    "DEFER_MIN",
    "UNAVAILABLE_GRACE",
    "Deferred",
    "countdown_after",
    "HostSlots",
    "destination_of",
    "reserve",
    "slots",
]

logger = logging.getLogger("django_webfetch.runs")

#: A deferred call's task comes back after a quarter of the time it has waited so far,
#: within these bounds (seconds), jittered by ±25 %: a short wait is checked again soon, a
#: host held by slow calls is not asked ten times a second.
DEFER_MIN = 0.5
DEFER_MAX = 5.0
_MARGIN = 5.0
#: On Celery, how long after its approval a call whose destination limit cannot be checked
#: (Redis unreachable) is deferred before it fails ``destination_limit_unavailable``.
UNAVAILABLE_GRACE = 60.0


class _RedisHostSlots(RedisBudget):
    prefix = "django_webfetch:destination_calls:"


HostSlots = LocalBudget | RedisBudget
_local = LocalBudget()


@functools.lru_cache(maxsize=4)
def _redis_slots(url: str) -> RedisBudget:
    return _RedisHostSlots(url)


def slots() -> HostSlots:
    """The slot counter: shared through Redis when configured, else this process's."""
    url = conf.WEBFETCH_REDIS_URL
    return _redis_slots(url) if url else _local


def destination_of(tool_name: str, arguments: Any) -> str | None:
    """The host a call of ``tool_name`` requests first; ``None``: no network, or no URL."""
    tool = tool_registry.get(tool_name)
    if tool is None or tool.scope == Scope.NONE or not isinstance(arguments, dict):
        return None
    try:
        url = tool.preflight_url(arguments)
    except Exception:
        return None
    if not url:
        return None
    try:
        # The guard's own reading of the host: one address or name, however it is spelled
        # (IPv6 zero groups, case, a trailing dot), is one destination.
        host = parse_url(str(url)).host
    except EgressDenied:
        return None  # the guard refuses the URL before any connection: nothing to limit
    if host.address is not None:
        # Under declared NAT64 prefixes the guard takes a NAT64 form as the IPv4 address it
        # embeds (its suffix bits ignored): so does the limit.
        embedded = _nat64(conf.WEBFETCH_NAT64_PREFIXES).embedded(host.address)
        if embedded:
            return str(min(embedded))
    return host.name


def _nat64(prefixes: tuple[str, ...]) -> IpAddressClassifier:
    try:
        return classifier_for(prefixes)
    except PolicyError:
        return IpAddressClassifier()  # invalid prefixes: the guard refuses every fetch


class Deferred(Exception):
    """The host is full: the call was queued again (``countdown`` seconds)."""

    def __init__(self, host: str, countdown: float) -> None:
        self.host = host
        self.countdown = countdown
        super().__init__(f"{host}: all slots in use; queued again in {countdown:.1f}s")


def countdown_after(waited: float) -> float:
    base = min(max(waited / 4, DEFER_MIN), DEFER_MAX)
    return base * random.uniform(0.75, 1.25)  # noqa: S311 - jitter, not a secret


def defer(call_id: Any, tool_name: str, host: str, since: Any = None) -> Deferred:
    """Queue the approved call again with a countdown (its ``queued_at`` renewed, so the
    sweep does not queue it a second time); ``since``: when it was approved."""
    now = timezone.now()
    waited = (now - since).total_seconds() if since is not None else 0.0
    countdown = countdown_after(waited)
    ToolCall.objects.filter(pk=call_id, state=CallState.APPROVED).update(queued_at=now)
    enqueue_call(call_id, tool_name, countdown=countdown)
    return Deferred(host, countdown)


def reserve(call_id: Any) -> Lease | ToolResult | None:
    """A slot for the approved call's destination host before it is taken.

    ``None``: the call has no destination (or is not approved: ``execute`` decides what to
    do with it); a ``Lease`` to release once the call finished; a ``ToolResult`` the call
    must fail with.  Raises :class:`Deferred` on Celery when the host is full.
    """
    try:
        uuid.UUID(str(call_id))
    except ValueError:
        return None  # not a call id: execute() says "noop"
    row = (
        ToolCall.objects.filter(pk=call_id, state=CallState.APPROVED)
        .values_list("tool", "arguments", "decided_at", "created")
        .first()
    )
    if row is None:
        return None
    tool_name, arguments, decided_at, created = row
    host = destination_of(tool_name, arguments)
    if host is None:
        return None
    limit = conf.WEBFETCH_MAX_CALLS_PER_HOST
    queued = runs_async()
    wait = 0.0 if queued else conf.WEBFETCH_TIMEOUT
    try:
        return slots().acquire(f"host:{host}", limit, wait=wait, ttl=step_seconds() + _MARGIN)
    except EgressDenied as exc:
        if exc.reason == "connection_budget_unavailable":
            since = decided_at or created
            if queued and (timezone.now() - since).total_seconds() < UNAVAILABLE_GRACE:
                logger.warning("tool call %s: destination limit unavailable; deferred", call_id)
                metrics.refusal("destination_deferred")
                raise defer(call_id, tool_name, host, since=since) from exc
            logger.error("tool call %s: the destination limit is unavailable (%s)", call_id, exc)
            metrics.refusal("destination_limit_unavailable")
            return ToolResult.failure(
                "destination_limit_unavailable",
                "The limit on calls per destination could not be checked; the call was not run.",
            )
        if queued:
            logger.info("tool call %s: %s has %s calls in flight; deferred", call_id, host, limit)
            metrics.refusal("destination_deferred")
            raise defer(call_id, tool_name, host, since=decided_at or created) from exc
        metrics.refusal("destination_busy")
        return ToolResult.failure(
            "destination_busy",
            f"Too many calls to this destination are in flight (at most {limit}); "
            "try again shortly.",
        )
