"""Helpers of the assistant tests that talk to the API."""

from __future__ import annotations

import uuid
from typing import Any

from django_webfetch.models import ToolCall

__all__ = ["ask", "calls_of"]


def ask(api: Any, content: str) -> Any:
    """Start a conversation and post ``content``; the run as the API answered (202)."""
    conv = api.post("/api/conversations/", {}, format="json").json()["id"]
    response = api.post(f"/api/conversations/{conv}/messages/", {"content": content}, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def calls_of(run_id: str) -> list[ToolCall]:
    """Every ``ToolCall`` the run requested (refused ones included)."""
    return list(ToolCall.objects.filter(run_id=uuid.UUID(run_id)))
