"""``search_code``: ``path:line`` hits in project files under a hard budget (group ``code``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django_webfetch.diagnostics.paths import PathDenied
from django_webfetch.diagnostics.search import (
    MAX_BYTES,
    MAX_ENTRIES,
    MAX_FILES,
    MAX_PATTERN_CHARS,
    MAX_SECONDS,
    CodeSearch,
)
from django_webfetch.net.policy import Scope

from ._diagnostics import denied_result, fenced, source_guard
from .base import Effect, Tool, ToolContext, ToolResult

__all__ = ["SearchCode"]

_EXHAUSTED = {
    "files": f"the file budget ({MAX_FILES:,} files) ran out before the whole tree was searched",
    "entries": (
        f"the directory budget ({MAX_ENTRIES:,} entries) ran out before the whole tree was searched"
    ),
    "bytes": (
        f"the read budget ({MAX_BYTES // (1024 * 1024)} MiB) ran out before the whole tree was"
        " searched"
    ),
    "time": (
        f"the safety net ({MAX_SECONDS:g} s, a busy machine) stopped the search before the"
        " whole tree was searched"
    ),
    "hits": "the hit limit was reached; refine the query",
}


class SearchCode(Tool):
    name = "search_code"
    group = "code"
    scope = Scope.NONE
    effect = Effect.READ
    requires_admin = True
    enabled_by_default = False
    description = (
        "Search this project's source files for a literal text (or, with regex=true, a "
        "regular expression) and return path:line hits. site-packages, node_modules, media, "
        "static and dot directories are skipped, and so are the files read_source refuses. "
        "The search stops after 20,000 files or 5 seconds and says so."
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Literal text to find (case-sensitive), or a regex with regex=true.",
                "minLength": 1,
                "maxLength": 500,
            },
            "regex": {
                "type": "boolean",
                "description": f"Treat query as a regular expression (at most "
                f"{MAX_PATTERN_CHARS} characters).",
                "default": False,
            },
            "glob": {
                "type": ["string", "null"],
                "description": "Only files whose relative path (or, without '/', whose name) "
                "matches this glob, e.g. '*.py' or 'shop/*.html'.",
                "maxLength": 200,
                "default": None,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        try:
            search = CodeSearch(source_guard())
            outcome = search.search(
                arguments["query"],
                use_regex=bool(arguments.get("regex", False)),
                glob=arguments.get("glob"),
            )
        except PathDenied as exc:
            return denied_result(exc)
        meta: dict[str, Any] = {
            "hits": len(outcome.hits),
            "files_scanned": outcome.files_scanned,
            "files_skipped": outcome.files_skipped,
            "exhausted": outcome.exhausted,
        }
        lines = [f"{hit.path}:{hit.line}: {hit.text}" for hit in outcome.hits] or ["No hits."]
        status = f"{len(outcome.hits)} hit(s) in {outcome.files_scanned} file(s)"
        if outcome.exhausted:
            status += f"; INCOMPLETE: {_EXHAUSTED[outcome.exhausted]}"
        return ToolResult(
            content=fenced("\n".join(lines), source="project:search", status_line=status),
            meta=meta,
        )
