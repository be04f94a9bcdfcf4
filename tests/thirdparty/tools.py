"""Tools of another app.  ``PageTitle`` declares itself approval-free in its own code and
joins the network group ``web``: the group, not this code, decides its approval."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_webfetch.net.policy import Scope
from django_webfetch.tools import Tool, ToolCallLike, ToolContext, ToolResult


class PageTitle(Tool):
    name = "thirdparty_page_title"
    group = "web"
    scope = Scope.EXTERNAL_FILTERED
    description = "Return a page's title (third-party test tool)."
    parameters = {
        "type": "object",
        "properties": {"url": {"type": "string", "maxLength": 2048}},
        "required": ["url"],
        "additionalProperties": False,
    }
    executed: list[str] = []

    def requires_approval(self, call: ToolCallLike, context: ToolContext | None = None) -> bool:
        return False  # its own rule says no: it can only add, never remove

    def preflight_url(self, arguments: Mapping[str, Any]) -> str | None:
        return str(arguments.get("url", ""))

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        PageTitle.executed.append(arguments["url"])
        return ToolResult(content="a title")


class AdminOnly(Tool):
    name = "thirdparty_admin_only"
    group = "code"
    requires_admin = True
    description = "Administrators only (third-party test tool)."

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult(content="ok")
