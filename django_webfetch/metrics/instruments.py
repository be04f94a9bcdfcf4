"""The instruments, and the helpers every layer calls to count (never raising)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "METRIC_NAMES",
    "add_source",
    "assistant_run_finished",
    "available",
    "egress_decision",
    "open_count",
    "provider_request",
    "refusal",
    "sources",
    "tool_call_state",
]

logger = logging.getLogger("django_webfetch.metrics")

_prom: Any
try:
    import prometheus_client

    _prom = prometheus_client
except ImportError:  # pragma: no cover - depends on the installed extras
    _prom = None

#: Every metric this package exposes (``_total`` and histogram suffixes added by the client).
METRIC_NAMES = (
    "webfetch_egress_decisions_total",
    "webfetch_fetch_seconds",
    "webfetch_fetch_bytes",
    "webfetch_tool_calls_total",
    "webfetch_approvals_waiting",
    "webfetch_approvals_oldest_waiting_seconds",
    "webfetch_assistant_runs_total",
    "webfetch_provider_request_seconds",
    "webfetch_provider_tokens_total",
    "webfetch_plugin_connections_in_use",
    "webfetch_refusals_total",
    "webfetch_open_streams",
    "webfetch_open_long_polls",
    "webfetch_open_mcp_sessions",
    "webfetch_open_mcp_waits",
)

_LABEL = re.compile(r"[^a-z0-9_:.\-]")
_MAX_LABEL = 64


def label(value: object) -> str:
    """A label value in a small character set, cut: codes and slugs pass unchanged."""
    text = _LABEL.sub("_", str(value or "").lower())[:_MAX_LABEL]
    return text or "none"


def available() -> bool:
    return _prom is not None


class _Off:
    """Stands in for an instrument when ``prometheus_client`` is missing."""

    def labels(self, *args: Any, **kwargs: Any) -> _Off:
        return self

    def inc(self, amount: float = 1) -> None:
        return None

    def observe(self, amount: float) -> None:
        return None

    def set(self, value: float) -> None:
        return None


def _counter(name: str, doc: str, labels: Iterable[str]) -> Any:
    if _prom is None:  # pragma: no cover
        return _Off()
    return _prom.Counter(name.removesuffix("_total"), doc, list(labels))


def _histogram(name: str, doc: str, labels: Iterable[str], buckets: tuple[float, ...]) -> Any:
    if _prom is None:  # pragma: no cover
        return _Off()
    return _prom.Histogram(name, doc, list(labels), buckets=buckets)


def _gauge(name: str, doc: str) -> Any:
    if _prom is None:  # pragma: no cover
        return _Off()
    # Summed over the live processes under ``PROMETHEUS_MULTIPROC_DIR``.
    return _prom.Gauge(name, doc, multiprocess_mode="livesum")


DECISIONS = _counter(
    "webfetch_egress_decisions_total",
    "Egress decisions: the guard's (allowed, denied) and failed hops.",
    ("group", "tool", "outcome", "reason"),
)
FETCH_SECONDS = _histogram(
    "webfetch_fetch_seconds",
    "Duration of a hop from the guard's decision to its end (fetched or failed).",
    ("group", "outcome"),
    (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30),
)
FETCH_BYTES = _histogram(
    "webfetch_fetch_bytes",
    "Decoded body bytes of a hop (fetched or failed).",
    ("group",),
    (1024, 8192, 65536, 262144, 1048576, 2097152, 8388608),
)
TOOL_CALLS = _counter(
    "webfetch_tool_calls_total",
    "Tool calls entering a state.",
    ("tool", "state"),
)
ASSISTANT_RUNS = _counter(
    "webfetch_assistant_runs_total",
    "Assistant runs finished, by provider kind and final state.",
    ("provider", "outcome"),
)
PROVIDER_SECONDS = _histogram(
    "webfetch_provider_request_seconds",
    "Duration of one request to the LLM provider, by outcome (ok or the failure code).",
    ("provider", "outcome"),
    (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120),
)
PROVIDER_TOKENS = _counter(
    "webfetch_provider_tokens_total",
    "Tokens the LLM provider reported (prompt, completion).",
    ("provider", "kind"),
)
REFUSALS = _counter(
    "webfetch_refusals_total",
    "Budget and limit refusals by kind (budget_exceeded:<ceiling>, rate_limited:<scope>, "
    "destination_deferred, destination_busy, destination_limit_unavailable, "
    "too_many_open:<kind>).",
    ("kind",),
)

#: ``webfetch_open_<kind>``: what every principal holds open now (``budgets.holds``).
OPEN = {
    kind: _gauge(
        f"webfetch_open_{kind}",
        f"Open {kind.replace('_', ' ')} held by signed-in principals (budgets.holds).",
    )
    for kind in ("streams", "long_polls", "mcp_sessions", "mcp_waits")
}

_OUTCOMES = {"allowed": "allowed", "denied": "denied", "failed": "failed"}


def _safely(count: Callable[[], None]) -> None:
    try:
        count()
    except Exception:  # a metric never fails what it counts
        logger.exception("a metric could not be counted")


def egress_decision(
    *, group: str, tool: str, decision: str, reason: str, duration: float, size: int
) -> None:
    """One recorded egress event (``egress.recorder``): a guard decision counts in
    ``webfetch_egress_decisions_total``; a hop's end (fetched or failed) in the fetch
    histograms."""

    def count() -> None:
        outcome = _OUTCOMES.get(decision)
        if outcome is not None:
            DECISIONS.labels(label(group), label(tool), outcome, label(reason or "ok")).inc()
        if decision in ("fetched", "failed"):
            FETCH_SECONDS.labels(label(group), decision).observe(max(duration, 0.0))
            FETCH_BYTES.labels(label(group)).observe(max(size, 0))

    _safely(count)


def tool_call_state(tool: str, state: str) -> None:
    """``tool`` must already be bounded (a registered tool's name, or ``other``)."""
    _safely(lambda: TOOL_CALLS.labels(label(tool), label(state)).inc())


def assistant_run_finished(provider: str, outcome: str) -> None:
    _safely(lambda: ASSISTANT_RUNS.labels(label(provider or "offline"), label(outcome)).inc())


def provider_request(
    provider: str, outcome: str, seconds: float, prompt_tokens: int = 0, completion_tokens: int = 0
) -> None:
    def count() -> None:
        kind = label(provider)
        PROVIDER_SECONDS.labels(kind, label(outcome)).observe(max(seconds, 0.0))
        if prompt_tokens > 0:
            PROVIDER_TOKENS.labels(kind, "prompt").inc(prompt_tokens)
        if completion_tokens > 0:
            PROVIDER_TOKENS.labels(kind, "completion").inc(completion_tokens)

    _safely(count)


def open_count(kind: str, value: int) -> None:
    """What the process holds open of ``kind`` now (one of ``OPEN``'s kinds)."""
    gauge = OPEN.get(kind)
    if gauge is not None:
        _safely(lambda: gauge.set(value))


def refusal(kind: str) -> None:
    _safely(lambda: REFUSALS.labels(label(kind)).inc())


#: Scrape-time sources: callables returning ``[(name, documentation, {labels: value})]``
#: gauges; registered by ``apps.py`` (they read the database, above this layer).
_SOURCES: list[Callable[[], list[tuple[str, str, dict[tuple[tuple[str, str], ...], float]]]]] = []


def add_source(
    source: Callable[[], list[tuple[str, str, dict[tuple[tuple[str, str], ...], float]]]],
) -> None:
    if source not in _SOURCES:
        _SOURCES.append(source)


def sources() -> list[
    Callable[[], list[tuple[str, str, dict[tuple[tuple[str, str], ...], float]]]]
]:
    return list(_SOURCES)
