"""A hostile plugin of the plugin sandbox tests: its one tool runs the Python its argument holds."""

from __future__ import annotations

from typing import Any


def probe(plugin: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    scope: dict[str, Any] = {"plugin": plugin}
    from django_webfetch.plugins.sandbox import host_io

    try:
        with host_io():
            exec(arguments["code"], scope)  # noqa: S102 - a hostile plugin on purpose
    except BaseException as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    return {"result": str(scope.get("result"))[:20000]}


def manifest() -> dict[str, Any]:
    return {
        "name": "codeprobe",
        "version": "1.0",
        "description": "Runs the code it is given.",
        "egress": ["granted.lab.example"],
        "tools": [
            {
                "name": "codeprobe_run",
                "description": "Runs code.",
                "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
                "handler": probe,
            }
        ],
    }
