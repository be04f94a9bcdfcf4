"""``uvicorn django_webfetch.mcp.asgi:application``: Django's ASGI application with the MCP
endpoint at ``/mcp`` (``DJANGO_SETTINGS_MODULE`` names the settings; see ``http.py``)."""

from __future__ import annotations

from typing import Any

__all__ = ["application"]  # noqa: F822 - built on first access (__getattr__)

_built: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    # Built on first access, after Django is set up (the MCP server imports the models).
    if name != "application":
        raise AttributeError(name)
    if "application" not in _built:
        from django.core.asgi import get_asgi_application

        django_application = get_asgi_application()
        from .http import with_mcp

        _built["application"] = with_mcp(django_application)  # type: ignore[arg-type]
    return _built["application"]
