"""Prometheus metrics (the ``metrics`` extra: ``prometheus_client``).

The instruments live here, below every layer that counts (egress, budgets, runs, the
assistant, the API), so each counts where the thing happens; without ``prometheus_client``
every instrument is a no-op.  Gauges that are read from the database (approvals waiting,
plugin connections in use) are computed when the endpoint is scraped, from the sources
``apps.py`` registers (:func:`add_source`).  The endpoint: ``metrics.urls``.

Label values are bounded: a group slug, a registered tool name (anything else is
``other``), a stable reason code, an outcome, a provider kind; never a URL, a host or a
user name.  With several processes (gunicorn, Celery workers) set
``PROMETHEUS_MULTIPROC_DIR`` (see docs/operations.rst).
"""

from __future__ import annotations

from .instruments import (
    METRIC_NAMES,
    add_source,
    assistant_run_finished,
    available,
    egress_decision,
    open_count,
    provider_request,
    refusal,
    sources,
    tool_call_state,
)

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
