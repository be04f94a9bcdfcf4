"""A plugin tool's call run in a plugin process: what ``PluginTool.execute`` calls for an
instance that is not ``trusted``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django_webfetch.net.errors import EgressDenied
from django_webfetch.tools.base import ToolContext, ToolResult

from .notices import release
from .runtime.host import RuntimeFailure, execute

__all__ = ["FAILURES", "run_isolated"]

logger = logging.getLogger("django_webfetch.plugins")

#: Stable code -> what the model and the editor are told.
FAILURES = {
    "plugin_crashed": "The plugin's process ended before it answered.",
    "plugin_timeout": "The plugin's tool took longer than its runtime allows.",
    "plugin_limit": "The plugin's tool went over a limit of its runtime.",
    "plugin_protocol_error": "The plugin's process broke the runtime's protocol.",
    "plugin_call_unencodable": (
        "The call could not be sent to the plugin's process: it holds text that is not "
        "valid Unicode."
    ),
    "invalid_arguments": "The arguments hold text that is not valid Unicode.",
    "plugin_isolation_unavailable": (
        "This server cannot isolate plugin code, so the plugin does not run here."
    ),
}


def run_isolated(
    tool: Any, instance: Any, arguments: Mapping[str, Any], context: ToolContext
) -> tuple[bool, Any]:
    """(True, a failed ``ToolResult``) or (False, the tool's outcome to fence)."""
    from django_webfetch.plugins.client import PluginHttp, reported_failure, reported_refusal
    from django_webfetch.plugins.registry import generation, origin
    from django_webfetch.plugins.sandbox import PluginScope, Violation
    from django_webfetch.plugins.services import record_violations

    where = origin(tool.plugin)
    if where is None:
        return True, ToolResult.failure(
            "plugin_not_bound", "This plugin has no enabled instance to run with."
        )
    http = PluginHttp(
        instance.pk, group=tool.group, tool=tool.name, call_id=context.call_id, user=context.user
    )
    call = {
        "tool": tool.name,
        "arguments": dict(arguments),
        "config": instance.all_config(),
        "plugin": instance.plugin,
        "alias": instance.alias,
        "reference": instance.reference,
    }
    key = (instance.pk, generation(), where)
    release()  # a plugin process is about to run a tool: the CPU limit's notice matters
    try:
        outcome = execute(where, key, call, http)
    except RuntimeFailure as exc:
        logger.warning(
            "plugin tool %s:%s failed in its process: %s (%r)",
            tool.plugin,
            tool.name,
            exc.code,
            exc.detail,
        )
        return True, ToolResult.failure(
            exc.code, FAILURES.get(exc.code, FAILURES["plugin_crashed"])
        )
    scope = PluginScope(instance.reference, violations=[Violation(*v) for v in outcome.violations])
    record_violations(instance, scope, tool=tool.name, group=tool.group, context=context)
    if outcome.kind == "egress_denied":
        return True, reported_refusal(outcome.reason)
    if outcome.kind == "webfetch_error":
        return True, reported_failure(outcome.code)
    if scope.violations:
        return True, ToolResult.from_exception(EgressDenied("unguarded_network"))
    if outcome.kind == "not_text":
        return True, ToolResult.failure("plugin_error", "The plugin's tool returned no text.")
    if outcome.kind == "error":
        logger.warning("plugin tool %s:%s raised %r", tool.plugin, tool.name, outcome.error)
        return True, ToolResult.failure("plugin_error", "The plugin's tool failed.")
    if outcome.kind == "tool_result":
        if not outcome.ok:
            return False, ToolResult(content=outcome.text, error="plugin_error")
        return False, ToolResult(content=outcome.text)
    if outcome.kind == "json":
        return False, outcome.value  # read by the runtime's bounded reader (protocol.parse)
    return False, outcome.text
