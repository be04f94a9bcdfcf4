"""Shared plumbing of the network tools: live policy, audited fetch, safe rendering.

The audit rule (a guarded call records its own failure) lives in
``egress.EgressRecorder.guarded``; ``AuditedFetch`` only adds the tool's live policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from django_webfetch.egress import EgressRecorder, policy_for, requested_host

from .base import Tool, ToolContext, ToolResult

__all__ = ["AuditedFetch", "requested_host", "status_result"]


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
        with self.recorder.guarded(url_host=host, port=port):
            policy = policy_for(
                self.tool.group,
                user=self.context.user,
                plugin_instance=self.context.plugin_instance,
                require_scope=self.tool.scope,
            )
            budget = self.tool.time_budget
            if budget is not None and budget < policy.total_timeout:
                # A per-tool budget only ever lowers the global one.
                policy = replace(policy, total_timeout=float(budget))
            kwargs: dict[str, Any] = {"policy": policy, "observer": self.recorder}
            if headers:
                kwargs["headers"] = dict(headers)
            if not follow_redirects:
                kwargs["follow_redirects"] = False
            if not refuse_media_types:
                kwargs["refuse_media_types"] = False
            return fetch(url, **kwargs)


def status_result(status: int, **meta: Any) -> ToolResult:
    """An HTTP error: the status code only, nothing the server wrote (DESIGN.md §6)."""
    return ToolResult.failure(
        "http_status",
        f"The server answered with HTTP status {int(status)}; no content is returned.",
        status=int(status),
        **meta,
    )
