"""Typed, read-on-access view of the ``WEBFETCH_*`` settings.

Every property calls ``getattr(settings, NAME, default)`` when it is read, so
``override_settings`` works and nothing is read at import time (django-cors-headers'
pattern).  A value of the wrong type raises ``WebFetchConfigurationError`` naming the
setting; the egress policy service turns that into a refusal (``policy_unavailable``) and
``checks.py`` reports it as ``django_webfetch.E001``.  Bounds above the hard ceilings of
``net.policy.HARD_LIMITS`` are clamped to the ceiling here and flagged by
``django_webfetch.W001``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import PurePath
from typing import Any, cast

from django.conf import settings

from .exceptions import WebFetchConfigurationError
from .net.policy import HARD_LIMITS

__all__ = [
    "API_RATE_DEFAULTS",
    "BOUND_SETTINGS",
    "CALL_LIMITS",
    "OPEN_KINDS",
    "OPEN_PER_PRINCIPAL_DEFAULTS",
    "OPEN_PER_PROCESS_DEFAULTS",
    "Settings",
    "conf",
]

_MISSING = object()

#: setting name -> (default, hard ceiling) of the assistant's tool-call bounds; a value
#: above the ceiling is clamped to it and flagged by ``django_webfetch.W042``.
CALL_LIMITS: dict[str, tuple[int, int]] = {
    "WEBFETCH_ASSISTANT_MAX_CALLS_PER_STEP": (8, 32),
    "WEBFETCH_ASSISTANT_MAX_CALLS_PER_RUN": (32, 128),
}


#: Default API rate limits per user (``WEBFETCH_API_RATES``): DRF's ``N/period`` strings.
API_RATE_DEFAULTS: dict[str, str | None] = {
    "messages": "20/minute",
    "calls": "60/minute",
    "approvals": "120/minute",
}
#: What one principal may hold open (``budgets.holds``): default bounds per principal (a
#: user, and an MCP token on its own) and per process, by kind.
OPEN_KINDS = ("streams", "long_polls", "mcp_sessions", "mcp_waits")
OPEN_PER_PRINCIPAL_DEFAULTS: dict[str, int] = {
    "streams": 6,
    "long_polls": 6,
    "mcp_sessions": 8,
    "mcp_waits": 4,
}
OPEN_PER_PROCESS_DEFAULTS: dict[str, int] = {
    "streams": 200,
    "long_polls": 200,
    "mcp_sessions": 500,
    "mcp_waits": 200,
}
_RATE = re.compile(r"[1-9][0-9]{0,6}/(s|sec|second|m|min|minute|h|hour|d|day)")

#: setting name -> ``EgressPolicy`` field it bounds (clamped to ``HARD_LIMITS``).
BOUND_SETTINGS: dict[str, str] = {
    "WEBFETCH_MAX_RESPONSE_BYTES": "max_body_bytes",
    "WEBFETCH_MAX_REDIRECTS": "max_redirects",
    "WEBFETCH_CONNECT_TIMEOUT": "connect_timeout",
    "WEBFETCH_TIMEOUT": "total_timeout",
}


def _raw(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def _bad(name: str, expected: str) -> WebFetchConfigurationError:
    return WebFetchConfigurationError(f"{name} must be {expected}.")


def _str_tuple(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise _bad(name, "a list or tuple of strings")
    if not all(isinstance(v, str) for v in value):
        raise _bad(name, "a list or tuple of strings")
    return tuple(value)


def _optional_str(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _bad(name, "a string or None")
    return value


def _number(name: str, value: Any, *, integer: bool) -> float:
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise _bad(name, "an integer" if integer else "a number")
    number = cast(float, value)
    if number < 0:
        raise _bad(name, "zero or positive")
    return number


def _ranged(name: str, default: float, low: float, high: float, *, integer: bool) -> float:
    """A number read from settings, ``low..high`` (the ceiling is a hard limit)."""
    value = _number(name, _raw(name, default), integer=integer)
    if not low <= value <= high:
        raise _bad(name, f"{'an integer' if integer else 'a number'} {low:g}..{high:g}")
    return value


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _bad(name, "True or False")
    return value


class Settings:
    """The app's settings.  Use the module-level ``conf`` instance."""

    # -- DNS, TLS, proxy ------------------------------------------------------------------

    @property
    def WEBFETCH_DNS_NAMESERVERS(self) -> tuple[str, ...] | None:
        """DNS servers (IP literals) used for every lookup; ``None``: the system's."""
        value = _raw("WEBFETCH_DNS_NAMESERVERS", None)
        if value is None:
            return None
        return _str_tuple("WEBFETCH_DNS_NAMESERVERS", value)

    @property
    def WEBFETCH_DNS_PORT(self) -> int:
        value = _raw("WEBFETCH_DNS_PORT", 53)
        port = int(_number("WEBFETCH_DNS_PORT", value, integer=True))
        if not 0 < port < 65536:
            raise _bad("WEBFETCH_DNS_PORT", "a port number 1..65535")
        return port

    @property
    def WEBFETCH_CA_FILE(self) -> str | None:
        return _optional_str("WEBFETCH_CA_FILE", _raw("WEBFETCH_CA_FILE", None))

    @property
    def WEBFETCH_PROXY(self) -> str | None:
        return _optional_str("WEBFETCH_PROXY", _raw("WEBFETCH_PROXY", None))

    @property
    def WEBFETCH_NAT64_PREFIXES(self) -> tuple[str, ...]:
        return _str_tuple("WEBFETCH_NAT64_PREFIXES", _raw("WEBFETCH_NAT64_PREFIXES", ()))

    @property
    def WEBFETCH_USER_AGENT(self) -> str | None:
        """``None``: the net layer's default User-Agent."""
        value = _optional_str("WEBFETCH_USER_AGENT", _raw("WEBFETCH_USER_AGENT", None))
        if value is not None and (not value.isprintable() or len(value) > 200):
            raise _bad("WEBFETCH_USER_AGENT", "printable text of at most 200 characters")
        return value

    # -- bounds (clamped to the hard ceilings) --------------------------------------------

    def _bound(self, name: str, *, integer: bool) -> float:
        default, ceiling = HARD_LIMITS[BOUND_SETTINGS[name]]
        value = _number(name, _raw(name, default), integer=integer)
        return min(value, ceiling)

    @property
    def WEBFETCH_TIMEOUT(self) -> float:
        """Whole-fetch budget in seconds (DNS, redirects and transfer)."""
        return float(self._bound("WEBFETCH_TIMEOUT", integer=False))

    @property
    def WEBFETCH_CONNECT_TIMEOUT(self) -> float:
        return float(self._bound("WEBFETCH_CONNECT_TIMEOUT", integer=False))

    @property
    def WEBFETCH_MAX_RESPONSE_BYTES(self) -> int:
        return int(self._bound("WEBFETCH_MAX_RESPONSE_BYTES", integer=True))

    @property
    def WEBFETCH_MAX_REDIRECTS(self) -> int:
        return int(self._bound("WEBFETCH_MAX_REDIRECTS", integer=True))

    def raw_bound(self, name: str) -> Any:
        """The bound as configured, before clamping (for the system checks)."""
        default, _ceiling = HARD_LIMITS[BOUND_SETTINGS[name]]
        return _raw(name, default)

    # -- audit, runs, approvals -----------------------------------------------------------

    @property
    def WEBFETCH_EVENT_RETENTION_DAYS(self) -> int:
        """Age, in days, past which the retention policy (the sweep, ``webfetch
        prune_events``) deletes EgressEvents (``django_webfetch.retention``)."""
        return int(
            _number(
                "WEBFETCH_EVENT_RETENTION_DAYS",
                _raw("WEBFETCH_EVENT_RETENTION_DAYS", 90),
                integer=True,
            )
        )

    @property
    def WEBFETCH_CALL_RETENTION_DAYS(self) -> int:
        """The retention policy's age of content (``django_webfetch.retention``): days after
        a ToolCall finished past which its content (arguments, approval card, result text)
        is dropped, and after an assistant conversation's last activity past which its
        messages, history and events are; the rows stay as audit metadata."""
        return int(
            _number(
                "WEBFETCH_CALL_RETENTION_DAYS",
                _raw("WEBFETCH_CALL_RETENTION_DAYS", 30),
                integer=True,
            )
        )

    @property
    def WEBFETCH_ASYNC_RUNS(self) -> bool:
        """Run tool calls through Celery (needs the ``celery`` extra)."""
        return _bool("WEBFETCH_ASYNC_RUNS", _raw("WEBFETCH_ASYNC_RUNS", False))

    @property
    def WEBFETCH_RUNNER(self) -> str:
        """Where runs advance without Celery: ``background`` (default: a thread pool in
        the web process, off the request) or ``inline`` (in the request; for tests)."""
        value = _raw("WEBFETCH_RUNNER", "background")
        if value not in ("background", "inline"):
            raise _bad("WEBFETCH_RUNNER", '"background" or "inline"')
        return cast(str, value)

    @property
    def WEBFETCH_RUNNER_THREADS(self) -> int:
        """Threads of the background runner (runs advanced at once per process); 1..32."""
        return self._positive_int("WEBFETCH_RUNNER_THREADS", 4, 32)

    @property
    def WEBFETCH_ASSISTANT_PROVIDER_CONCURRENCY(self) -> int:
        """Provider requests one process streams at once per provider endpoint (on its
        provider I/O loop, without a runner thread each); more wait their turn; 1..256."""
        return self._positive_int("WEBFETCH_ASSISTANT_PROVIDER_CONCURRENCY", 64, 256)

    def _seconds(self, name: str, default: float, ceiling: float) -> float:
        value = _number(name, _raw(name, default), integer=False)
        if value < 1:
            raise _bad(name, "a number of seconds >= 1")
        return float(min(value, ceiling))

    @property
    def WEBFETCH_RUNNER_SWEEP_EVERY(self) -> float:
        """Seconds between two sweeps of the background runner (expiry, lost workers and
        lost messages, as Celery beat's ``django_webfetch.expire_tool_calls``); 1..600."""
        return self._seconds("WEBFETCH_RUNNER_SWEEP_EVERY", 15.0, 600.0)

    @property
    def WEBFETCH_LEASE_SECONDS(self) -> float:
        """Seconds a running tool call or assistant run stays owned by its process without
        a renewal (one heartbeat per process renews them every third of it); past it the
        holder counts as dead and the sweep takes the record over; 1..600."""
        return self._seconds("WEBFETCH_LEASE_SECONDS", 15.0, 600.0)

    @property
    def WEBFETCH_WORKER_SWEEP_EVERY(self) -> float:
        """Seconds between two sweeps sent by each Celery worker (``tasks.py``: the
        periodic task without a beat schedule); ``0`` turns it off (beat does it); 1..600."""
        value = _number(
            "WEBFETCH_WORKER_SWEEP_EVERY", _raw("WEBFETCH_WORKER_SWEEP_EVERY", 15), integer=False
        )
        if value == 0:
            return 0.0
        return self._seconds("WEBFETCH_WORKER_SWEEP_EVERY", 15.0, 600.0)

    @property
    def WEBFETCH_STREAM_HEARTBEAT(self) -> float:
        """Seconds of silence after which a run's event stream sends ``: ping``; 1..60."""
        return self._seconds("WEBFETCH_STREAM_HEARTBEAT", 15.0, 60.0)

    @property
    def WEBFETCH_ALLOW_SELF_APPROVAL(self) -> bool:
        """May the user who started a call approve it too?  Off by default."""
        return _bool("WEBFETCH_ALLOW_SELF_APPROVAL", _raw("WEBFETCH_ALLOW_SELF_APPROVAL", False))

    @property
    def WEBFETCH_APPROVAL_TTL(self) -> int:
        """Seconds an approval request stays open before it expires."""
        return int(
            _number("WEBFETCH_APPROVAL_TTL", _raw("WEBFETCH_APPROVAL_TTL", 86400), integer=True)
        )

    @property
    def WEBFETCH_STORED_TEXT_TTL(self) -> int:
        """Seconds the whole text of a fetch is kept for reading its later parts."""
        return int(
            _number(
                "WEBFETCH_STORED_TEXT_TTL", _raw("WEBFETCH_STORED_TEXT_TTL", 3600), integer=True
            )
        )

    # -- the assistant ---------------------------------------------------------------------

    def _positive_int(self, name: str, default: int, ceiling: int) -> int:
        value = int(_number(name, _raw(name, default), integer=True))
        if value < 1:
            raise _bad(name, "a positive integer")
        return min(value, ceiling)

    @property
    def WEBFETCH_ASSISTANT_MAX_STEPS(self) -> int:
        """Provider requests (steps) per assistant run; 1..50."""
        return self._positive_int("WEBFETCH_ASSISTANT_MAX_STEPS", 8, 50)

    @property
    def WEBFETCH_ASSISTANT_MAX_CALLS_PER_STEP(self) -> int:
        """Tool calls one model answer (one step) may make; the rest are refused
        (``too_many_calls``).  Default 8, clamped to 32 (``W042``)."""
        return self._positive_int(
            "WEBFETCH_ASSISTANT_MAX_CALLS_PER_STEP",
            *CALL_LIMITS["WEBFETCH_ASSISTANT_MAX_CALLS_PER_STEP"],
        )

    @property
    def WEBFETCH_ASSISTANT_MAX_CALLS_PER_RUN(self) -> int:
        """Tool calls one assistant run may make over all its steps; the rest are refused
        (``too_many_calls``).  Default 32, clamped to 128 (``W042``)."""
        return self._positive_int(
            "WEBFETCH_ASSISTANT_MAX_CALLS_PER_RUN",
            *CALL_LIMITS["WEBFETCH_ASSISTANT_MAX_CALLS_PER_RUN"],
        )

    @property
    def WEBFETCH_ASSISTANT_MAX_RESULT_BYTES(self) -> int:
        """Bytes (UTF-8) of one tool result as sent to the model; at most 50,000."""
        return self._positive_int("WEBFETCH_ASSISTANT_MAX_RESULT_BYTES", 50_000, 50_000)

    @property
    def WEBFETCH_ASSISTANT_CONTEXT_BYTES(self) -> int:
        """Bytes of tool results one provider request carries; the oldest are replaced by
        ``[result omitted: N bytes]`` past it."""
        return self._positive_int("WEBFETCH_ASSISTANT_CONTEXT_BYTES", 200_000, 2_000_000)

    @property
    def WEBFETCH_ASSISTANT_CONTEXT_TOKENS(self) -> int | None:
        """The model's context window in tokens (``None``: unknown, only the byte budget
        applies).  A request is kept to this minus ``WEBFETCH_ASSISTANT_MAX_TOKENS``,
        estimated from the usage the provider reported."""
        if _raw("WEBFETCH_ASSISTANT_CONTEXT_TOKENS", None) is None:
            return None
        return self._positive_int("WEBFETCH_ASSISTANT_CONTEXT_TOKENS", 0, 10_000_000)

    @property
    def WEBFETCH_ASSISTANT_MAX_TOKENS(self) -> int:
        """``max_tokens`` of each provider request."""
        return self._positive_int("WEBFETCH_ASSISTANT_MAX_TOKENS", 1024, 32_768)

    @property
    def WEBFETCH_ASSISTANT_TIMEOUT(self) -> float:
        """Seconds one provider request may take, all included (DNS, connect, the answer);
        at most 600."""
        value = _number(
            "WEBFETCH_ASSISTANT_TIMEOUT", _raw("WEBFETCH_ASSISTANT_TIMEOUT", 60.0), integer=False
        )
        if value <= 0:
            raise _bad("WEBFETCH_ASSISTANT_TIMEOUT", "a positive number")
        return float(min(value, 600.0))

    # -- the MCP server ----------------------------------------------------------------------

    @property
    def WEBFETCH_MCP_WAIT(self) -> float:
        """Seconds an MCP ``tools/call`` waits for an approval (and the run) before it answers
        that the call is waiting, with its id; 0..600."""
        value = _number("WEBFETCH_MCP_WAIT", _raw("WEBFETCH_MCP_WAIT", 60), integer=False)
        if value < 0:
            raise _bad("WEBFETCH_MCP_WAIT", "a number of seconds >= 0")
        return float(min(value, 600.0))

    @property
    def WEBFETCH_MCP_PAGE_TTL(self) -> int:
        """Seconds the MCP ``fetch`` tool pages (``start_index`` > 0) over a page it fetched
        before, instead of fetching it again; 1..86400."""
        return self._positive_int("WEBFETCH_MCP_PAGE_TTL", 900, 86_400)

    # -- OAuth sign-in for remote MCP clients (django_webfetch.oauth) -----------------------

    @property
    def WEBFETCH_OAUTH_RESOURCE(self) -> str | None:
        """The MCP endpoint's canonical URL (``https://mysite.example/mcp``): the RFC 8707
        resource every OAuth access token must be bound to.  ``None``: OAuth is off and the
        endpoint takes personal access tokens only."""
        value = _optional_str("WEBFETCH_OAUTH_RESOURCE", _raw("WEBFETCH_OAUTH_RESOURCE", None))
        if value is None:
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        if (
            parts.scheme not in ("https", "http")
            or not parts.hostname
            or parts.query
            or parts.fragment
            or "@" in parts.netloc
        ):
            raise _bad("WEBFETCH_OAUTH_RESOURCE", "an absolute http(s) URL without query")
        return value.rstrip("/")

    @property
    def WEBFETCH_OAUTH_MAX_CLIENTS(self) -> int:
        """OAuth clients known by a Client ID Metadata Document at most; 1..100000.  Past it,
        clients no user approved whose document is stale are forgotten; then new ones wait."""
        return self._positive_int("WEBFETCH_OAUTH_MAX_CLIENTS", 1000, 100_000)

    @property
    def WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR(self) -> int:
        """OAuth clients not yet stored one signed-in user may bring per hour (their metadata
        documents fetched on the consent page); 1..1000.  Past it: ``client_rate``."""
        return self._positive_int("WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR", 10, 1000)

    @property
    def WEBFETCH_OAUTH_CLIENT_DOCUMENT_BYTES(self) -> int:
        """Bytes of a client's metadata document (Client ID Metadata Document); 1..65536."""
        return self._positive_int("WEBFETCH_OAUTH_CLIENT_DOCUMENT_BYTES", 16 * 1024, 64 * 1024)

    # -- queueing (Celery or the background runner) ----------------------------------------

    @property
    def WEBFETCH_REQUEUE_AFTER(self) -> float:
        """Seconds an approved call may wait for a worker before the sweep (or a read of
        the call) queues it again: its message may have been lost with a broker restart."""
        value = _number("WEBFETCH_REQUEUE_AFTER", _raw("WEBFETCH_REQUEUE_AFTER", 30), integer=False)
        if value < 1:
            raise _bad("WEBFETCH_REQUEUE_AFTER", "a number of seconds >= 1")
        return float(value)

    @property
    def WEBFETCH_NETWORK_QUEUE(self) -> str | None:
        """Celery queue of the calls of tools that reach the network (a group with a network
        scope); ``None``: the default queue.  Consume it with an I/O pool (``--pool
        threads``) so a slow destination holds a thread, not a process."""
        return _optional_str("WEBFETCH_NETWORK_QUEUE", _raw("WEBFETCH_NETWORK_QUEUE", None))

    # -- plugins (DESIGN.md §8) ------------------------------------------------------------

    @property
    def WEBFETCH_PLUGIN_MAX_CONNECTIONS(self) -> int:
        """Connections one plugin instance may hold at once (all processes together)."""
        value = int(
            _number(
                "WEBFETCH_PLUGIN_MAX_CONNECTIONS",
                _raw("WEBFETCH_PLUGIN_MAX_CONNECTIONS", 4),
                integer=True,
            )
        )
        if not 1 <= value <= 1000:
            raise _bad("WEBFETCH_PLUGIN_MAX_CONNECTIONS", "an integer 1..1000")
        return value

    @property
    def WEBFETCH_PLUGIN_REDIS_URL(self) -> str | None:
        """Redis shared by every process for the plugin connection budget; ``None``: the
        budget is counted per process."""
        return _optional_str("WEBFETCH_PLUGIN_REDIS_URL", _raw("WEBFETCH_PLUGIN_REDIS_URL", None))

    @property
    def WEBFETCH_PLUGIN_DIRS(self) -> tuple[str, ...]:
        """Directories of untrusted plugin distributions (``pip install --no-deps --target
        <dir>``), each absolute.  The registry finds their plugins there; they are never
        put on the site's ``sys.path`` (a plugin process gets its own directory only), so
        nothing in them is reached by the site's imports or by a library's entry points
        (docs/plugins.rst, "Installing a plugin")."""
        name = "WEBFETCH_PLUGIN_DIRS"
        value = _raw(name, ())
        expected = "a list or tuple of absolute directory paths"
        if isinstance(value, (str, bytes, PurePath)) or not isinstance(value, Sequence):
            raise _bad(name, expected)
        if not all(isinstance(v, (str, PurePath)) and str(v).startswith("/") for v in value):
            raise _bad(name, expected)
        return tuple(str(v) for v in value)

    # -- the plugin runtime: limits of one call in a plugin process ---------------

    @property
    def WEBFETCH_PLUGIN_CPU_SECONDS(self) -> float:
        """CPU time one plugin call may use (0.1..60 s)."""
        return _ranged("WEBFETCH_PLUGIN_CPU_SECONDS", 10, 0.1, 60, integer=False)

    @property
    def WEBFETCH_PLUGIN_WALL_SECONDS(self) -> float:
        """Wall time of one plugin call, its requests included (0.5..120 s)."""
        return _ranged("WEBFETCH_PLUGIN_WALL_SECONDS", 30, 0.5, 120, integer=False)

    @property
    def WEBFETCH_PLUGIN_MEMORY_BYTES(self) -> int:
        """Address space of a plugin process (128 MiB..8 GiB)."""
        return int(_ranged("WEBFETCH_PLUGIN_MEMORY_BYTES", 1 << 30, 1 << 27, 1 << 33, integer=True))

    @property
    def WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES(self) -> int:
        """Size of what one plugin call may return (1 KiB..4 MiB)."""
        return int(
            _ranged("WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES", 256 * 1024, 1024, 1 << 22, integer=True)
        )

    @property
    def WEBFETCH_PLUGIN_MAX_REQUESTS(self) -> int:
        """Requests one plugin call may make through its ``http`` (1..200)."""
        return int(_ranged("WEBFETCH_PLUGIN_MAX_REQUESTS", 20, 1, 200, integer=True))

    @property
    def WEBFETCH_PLUGIN_POOL_SIZE(self) -> int:
        """Idle plugin processes kept warm per instance and host process (0..8)."""
        return int(_ranged("WEBFETCH_PLUGIN_POOL_SIZE", 2, 0, 8, integer=True))

    @property
    def WEBFETCH_PLUGIN_HIDDEN_PATHS(self) -> tuple[str, ...]:
        """Absolute paths of the site's own code that plugin sandboxes must not show, beyond
        the top-level packages of ``DJANGO_SETTINGS_MODULE`` and ``ROOT_URLCONF`` (always
        hidden) and the data the settings name (``bubblewrap._site_data``): masked in the
        sandbox where they lie under a directory it binds
        (``plugins.runtime.bubblewrap.hidden_paths``)."""
        name = "WEBFETCH_PLUGIN_HIDDEN_PATHS"
        paths = _str_tuple(name, _raw(name, ()))
        if not all(path.startswith("/") for path in paths):
            raise _bad(name, "a list or tuple of absolute paths")
        return paths

    @property
    def WEBFETCH_PLUGIN_UID_RANGE(self) -> tuple[int, int]:
        """``(first, count)``: the uids (and gids) a root site gives its plugin processes,
        one of its own each, outside their user namespace.  ``first`` 65536..2^31-1,
        ``count`` at least 64, the last uid below 2^31-1; default 2,000,000,000 and
        1,000,000 (``plugins.runtime.identity.DEFAULT_RANGE``; check E033 says when an
        account of this machine is in the range)."""
        name = "WEBFETCH_PLUGIN_UID_RANGE"
        value = _raw(name, (2_000_000_000, 1_000_000))
        expected = "(first, count): first 65536..2147483647, count >= 64, below 2^31 - 1"
        if (
            isinstance(value, (str, bytes))
            or not isinstance(value, Sequence)
            or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            raise _bad(name, expected)
        first, count = int(value[0]), int(value[1])
        if first < 65536 or count < 64 or first + count > 2**31 - 1:
            raise _bad(name, expected)
        return first, count

    # -- operations: budgets, API rate limits, per-destination concurrency ---------------------

    @property
    def WEBFETCH_BUDGET_EXEMPT_SUPERUSERS(self) -> bool:
        """Superusers are exempt from budgets only when this is True (default False)."""
        return _bool(
            "WEBFETCH_BUDGET_EXEMPT_SUPERUSERS", _raw("WEBFETCH_BUDGET_EXEMPT_SUPERUSERS", False)
        )

    @property
    def WEBFETCH_MODEL_PRICES(self) -> dict[str, tuple[Decimal, Decimal]]:
        """Model name -> ``(prompt, completion)`` price per million tokens, in the
        operator's currency: the cost ceilings of budgets count with these.  A model with
        no price costs nothing."""
        value = _raw("WEBFETCH_MODEL_PRICES", {})
        name = "WEBFETCH_MODEL_PRICES"
        expected = 'a dict {"model": {"prompt": number, "completion": number}}'
        if not isinstance(value, Mapping):
            raise _bad(name, expected)
        prices: dict[str, tuple[Decimal, Decimal]] = {}
        for model, price in value.items():
            if not isinstance(model, str) or not isinstance(price, Mapping):
                raise _bad(name, expected)
            pair = []
            for part in ("prompt", "completion"):
                number = price.get(part, 0)
                if isinstance(number, bool) or not isinstance(number, (int, float, str, Decimal)):
                    raise _bad(name, expected)
                try:
                    amount = Decimal(str(number))
                except InvalidOperation as exc:
                    raise _bad(name, expected) from exc
                if not amount.is_finite() or amount < 0:
                    raise _bad(name, expected)
                pair.append(amount)
            prices[model] = (pair[0], pair[1])
        return prices

    @property
    def WEBFETCH_API_RATES(self) -> dict[str, str | None]:
        """DRF throttle rates per user and scope (``messages``, ``calls``, ``approvals``):
        ``"30/minute"``-style strings; ``None`` turns a scope's limit off."""
        value = _raw("WEBFETCH_API_RATES", {})
        name = "WEBFETCH_API_RATES"
        if not isinstance(value, Mapping):
            raise _bad(name, 'a dict {"messages" | "calls" | "approvals": "N/period" or None}')
        rates: dict[str, str | None] = dict(API_RATE_DEFAULTS)
        for scope, rate in value.items():
            if scope not in API_RATE_DEFAULTS:
                raise _bad(name, f"a dict with keys among {sorted(API_RATE_DEFAULTS)}")
            if rate is not None and not _RATE.fullmatch(str(rate)):
                raise _bad(name, 'a dict of rates like "30/minute" (or None)')
            rates[scope] = None if rate is None else str(rate)
        return rates

    def _open_bounds(self, name: str, defaults: dict[str, int]) -> dict[str, int]:
        value = _raw(name, {})
        if not isinstance(value, Mapping):
            raise _bad(name, f"a dict {{kind: positive integer}} with kinds among {OPEN_KINDS}")
        bounds = dict(defaults)
        for kind, bound in value.items():
            if kind not in defaults:
                raise _bad(name, f"a dict with keys among {list(OPEN_KINDS)}")
            if isinstance(bound, bool) or not isinstance(bound, int) or not 1 <= bound <= 100_000:
                raise _bad(name, "a dict of integers 1..100000")
            bounds[kind] = bound
        return bounds

    @property
    def WEBFETCH_OPEN_PER_PRINCIPAL(self) -> dict[str, int]:
        """What one user (and, over MCP, one token on its own) may hold open at once in one
        process, by kind: ``streams``, ``long_polls``, ``mcp_sessions``, ``mcp_waits``."""
        return self._open_bounds("WEBFETCH_OPEN_PER_PRINCIPAL", OPEN_PER_PRINCIPAL_DEFAULTS)

    @property
    def WEBFETCH_OPEN_PER_PROCESS(self) -> dict[str, int]:
        """What every principal together may hold open at once in one process, by kind."""
        return self._open_bounds("WEBFETCH_OPEN_PER_PROCESS", OPEN_PER_PROCESS_DEFAULTS)

    @property
    def WEBFETCH_OPEN_RETRY_AFTER(self) -> int:
        """The ``Retry-After`` (seconds) of a ``too_many_open`` refusal; 1..300."""
        return self._positive_int("WEBFETCH_OPEN_RETRY_AFTER", 5, 300)

    @property
    def WEBFETCH_MCP_SESSION_IDLE(self) -> float:
        """Seconds after which an MCP session with no request in flight is closed; 1..3600."""
        return self._seconds("WEBFETCH_MCP_SESSION_IDLE", 300.0, 3600.0)

    @property
    def WEBFETCH_MAX_CALLS_PER_HOST(self) -> int:
        """Tool calls in flight at once per destination host (every worker together when
        ``WEBFETCH_PLUGIN_REDIS_URL`` is set); 1..1000, default 4."""
        value = int(
            _number(
                "WEBFETCH_MAX_CALLS_PER_HOST", _raw("WEBFETCH_MAX_CALLS_PER_HOST", 4), integer=True
            )
        )
        if not 1 <= value <= 1000:
            raise _bad("WEBFETCH_MAX_CALLS_PER_HOST", "an integer 1..1000")
        return value

    @property
    def WEBFETCH_REDIS_URL(self) -> str | None:
        """Redis shared by every process for the per-destination limit; default
        ``WEBFETCH_PLUGIN_REDIS_URL``; ``None``: counted per process."""
        value = _optional_str("WEBFETCH_REDIS_URL", _raw("WEBFETCH_REDIS_URL", None))
        return value or self.WEBFETCH_PLUGIN_REDIS_URL

    @property
    def WEBFETCH_METRICS_TOKEN(self) -> str | None:
        """A bearer token that may read the metrics endpoint (besides signed-in staff);
        ``None``: staff only.  At least 16 characters."""
        value = _optional_str("WEBFETCH_METRICS_TOKEN", _raw("WEBFETCH_METRICS_TOKEN", None))
        if value is not None and len(value) < 16:
            raise _bad("WEBFETCH_METRICS_TOKEN", "a string of at least 16 characters or None")
        return value

    # -- error analysis (the code group's tools) --------------------------------------------

    @property
    def WEBFETCH_PROJECT_ROOT(self) -> str | None:
        """The directory the code tools may read (through the source path guard); default
        ``BASE_DIR``; ``None`` when neither is set (the code tools then refuse)."""
        value = _raw("WEBFETCH_PROJECT_ROOT", None)
        if value is None:
            value = getattr(settings, "BASE_DIR", None)
        if value is None or value == "":
            return None
        if not isinstance(value, (str, PurePath)):
            raise _bad("WEBFETCH_PROJECT_ROOT", "a path (str or pathlib.Path) or None")
        return str(value)

    @property
    def WEBFETCH_LOG_FILES(self) -> tuple[str, ...]:
        """Log files written by Python logging handlers, read by the log tools."""
        value = _raw("WEBFETCH_LOG_FILES", ())
        if isinstance(value, (str, bytes, PurePath)) or not isinstance(value, Sequence):
            raise _bad("WEBFETCH_LOG_FILES", "a list or tuple of paths")
        if not all(isinstance(v, (str, PurePath)) for v in value):
            raise _bad("WEBFETCH_LOG_FILES", "a list or tuple of paths")
        return tuple(str(v) for v in value)

    @property
    def WEBFETCH_LOG_FORMAT(self) -> str:
        """The ``logging`` format of ``WEBFETCH_LOG_FILES`` (``%``-style)."""
        value = _raw("WEBFETCH_LOG_FORMAT", "%(asctime)s %(levelname)s %(name)s %(message)s")
        if not isinstance(value, str) or not value:
            raise _bad("WEBFETCH_LOG_FORMAT", "a non-empty string")
        return value


conf = Settings()

#: Every setting name ``conf`` exposes (used by the checks and the docs test).
SETTING_NAMES: tuple[str, ...] = tuple(
    sorted(n for n in vars(Settings) if n.startswith("WEBFETCH_"))
)
