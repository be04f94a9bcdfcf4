"""The canonical decision log line: one JSON object per egress decision, on the
``django_webfetch.egress`` logger at INFO, written by ``EgressRecorder.record`` only.

Its schema is ``decision_log.schema.json`` (docs/operations.rst).  Every value is one the
recorder already cut and filtered (the host in a small character set, reason codes,
addresses parsed as addresses, numbers); as JSON every string is quoted and escaped, so
nothing a server chose appears unquoted.  The full URL (path, query) is never logged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["SCHEMA_PATH", "decision_line", "emit", "schema"]

logger = logging.getLogger("django_webfetch.egress")

SCHEMA_PATH = Path(__file__).with_name("decision_log.schema.json")
_OUTCOMES = {"allowed": "allowed", "fetched": "allowed", "denied": "denied", "failed": "failed"}


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


def _rule(decision: str, reason: str, scope: str) -> str:
    if decision in ("allowed", "fetched"):
        return f"scope:{scope}" if scope else "scope"
    return reason.split(":", 1)[0] if reason else decision


def decision_line(event: Any, *, run_id: str = "", scope: str = "") -> dict[str, Any]:
    """The line of a saved ``EgressEvent`` (``scope``: its group's)."""
    return {
        "event": "egress_decision",
        "time": event.created.isoformat(),
        "event_id": event.pk,
        "call_id": event.call_id,
        "run_id": run_id[:64],
        "group": event.group_slug,
        "tool": event.tool,
        "plugin_instance": event.plugin_ref,
        "host": event.url_host,
        "port": event.port,
        "addresses": list(event.addresses),
        "hop": event.hop,
        "decision": event.decision,
        "outcome": _OUTCOMES.get(event.decision, "failed"),
        "rule": _rule(event.decision, event.reason, scope)[:80],
        "reason": event.reason,
        "status": event.status,
        "bytes": event.bytes,
        "duration": round(event.duration, 6),
    }


def emit(event: Any, *, run: Callable[[], str], scope: str = "") -> None:
    """Log the line of ``event``; ``run()`` finds its run (only when INFO is logged)."""
    if not logger.isEnabledFor(logging.INFO):
        return
    line = decision_line(event, run_id=run(), scope=scope)
    logger.info(json.dumps(line, ensure_ascii=True, separators=(",", ":"), sort_keys=True))
