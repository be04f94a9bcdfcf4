"""Shared plumbing of the network tools: live policy, audited fetch, safe rendering."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from django_webfetch.egress import EgressRecorder, policy_for
from django_webfetch.net.errors import EgressDenied, WebFetchError

from .base import Tool, ToolContext, ToolResult

__all__ = ["AuditedFetch", "requested_host", "status_result"]


def requested_host(url: str) -> tuple[str, int | None]:
    """Best-effort host/port of a model-chosen URL for the audit log (never raises)."""
    try:
        split = urlsplit(url)
        return (split.hostname or "")[:255], split.port
    except ValueError:
        return "", None


class AuditedFetch:
    """One tool call's fetch: policy from ``policy_for``, every hop an ``EgressEvent``.

    A refusal or failure that the guard did not report itself (no policy, a budget that ran
    out between hops) is recorded here, so every call leaves at least one row.
    """

    def __init__(self, tool: Tool, context: ToolContext) -> None:
        self.tool = tool
        self.context = context
        self.recorder = EgressRecorder(
            tool=tool.name,
            group=tool.group,
            user=context.user,
            plugin_instance=context.plugin_instance,
            call_id=context.call_id,
        )
        self._last: str = ""

    def _observer(self, event: Any) -> None:
        self.recorder(event)
        self._last = getattr(event, "decision", "")

    def fetch(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        follow_redirects: bool = True,
        refuse_media_types: bool = True,
    ) -> Any:
        from django_webfetch.net import fetch

        host, port = requested_host(url)
        try:
            policy = policy_for(
                self.tool.group,
                user=self.context.user,
                plugin_instance=self.context.plugin_instance,
                require_scope=self.tool.scope,
            )
        except EgressDenied as exc:
            self.recorder.record_exception(exc, url_host=host, port=port)
            raise
        budget = self.tool.time_budget
        if budget is not None and budget < policy.total_timeout:
            # A per-tool budget only ever lowers the global one.
            policy = replace(policy, total_timeout=float(budget))
        kwargs: dict[str, Any] = {"policy": policy, "observer": self._observer}
        if headers:
            kwargs["headers"] = dict(headers)
        if not follow_redirects:
            kwargs["follow_redirects"] = False
        if not refuse_media_types:
            kwargs["refuse_media_types"] = False
        try:
            return fetch(url, **kwargs)
        except WebFetchError as exc:
            if self._last not in ("denied", "failed"):
                self.recorder.record_exception(exc, url_host=host, port=port)
            raise


def status_result(status: int, **meta: Any) -> ToolResult:
    """An HTTP error: the status code only, nothing the server wrote (DESIGN.md §6)."""
    return ToolResult.failure(
        "http_status",
        f"The server answered with HTTP status {int(status)}; no content is returned.",
        status=int(status),
        **meta,
    )
