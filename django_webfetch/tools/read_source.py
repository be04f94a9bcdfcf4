"""``read_source``: a line-ranged, line-numbered read of one project file (group ``code``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_webfetch.diagnostics.paths import PathDenied
from django_webfetch.net.policy import Scope

from ._diagnostics import denied_result, fenced, number_lines, read_window, source_guard
from .base import Effect, Tool, ToolContext, ToolResult

__all__ = ["ReadSource"]

MAX_LINES = 200


class ReadSource(Tool):
    name = "read_source"
    group = "code"
    scope = Scope.NONE
    effect = Effect.READ
    requires_admin = True
    enabled_by_default = False
    description = (
        "Read lines of ONE source file of this project (path relative to the project root), "
        "line-numbered. Settings, secrets, key material, databases, dot files, media and "
        "static files and anything outside the project root are refused; credential-looking "
        "values are redacted. The text is returned inside BEGIN/END UNTRUSTED markers."
    )
    parameters = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "File path relative to the project root, e.g. 'shop/views.py'.",
                "minLength": 1,
                "maxLength": 1024,
            },
            "start_line": {
                "type": "integer",
                "description": "First line to return (1-based).",
                "minimum": 1,
                "maximum": 10_000_000,
                "default": 1,
            },
            "line_count": {
                "type": "integer",
                "description": "How many lines to return (1..200).",
                "minimum": 1,
                "maximum": MAX_LINES,
                "default": 60,
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        start = int(arguments.get("start_line", 1))
        count = int(arguments.get("line_count", 60))
        try:
            guard = source_guard()
            real, shown = guard.resolve(arguments["path"])
            window, total, cut = read_window(guard, real, start, count)
        except PathDenied as exc:
            return denied_result(exc)
        meta: dict[str, Any] = {"path": shown, "total_lines": total, "cut": cut}
        if not window:
            return ToolResult.failure(
                "out_of_range",
                f"The file has {total} line(s); start_line {start} is past the end.",
                **meta,
            )
        first, last = window[0][0], window[-1][0]
        meta.update(start_line=first, end_line=last)
        status = f"lines {first}-{last} of {total}" + (" (file cut at 4 MiB)" if cut else "")
        return ToolResult(
            content=fenced(number_lines(window), source=f"project:{shown}", status_line=status),
            meta=meta,
        )
