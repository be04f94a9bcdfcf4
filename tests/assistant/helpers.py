"""Helpers of the assistant tests that talk to the API.

Posting a message answers ``202`` at once; the run advances on the background runner.  A
test reads the run once it has settled (``tests.settle.resumed_run``: finished, or paused
on a call that waits for a person), through the API as an editor would.
"""

from __future__ import annotations

import uuid
from typing import Any

from django_webfetch.models import ToolCall
from tests.settle import resumed_run

__all__ = ["ask", "calls_of", "post", "run_of"]


def post(api: Any, content: str, conversation: Any = None) -> Any:
    """Post ``content`` (in a new conversation unless one is given); the run as the API
    answered it (``202``, before the background runner took it up)."""
    if conversation is None:
        conversation = api.post("/api/conversations/", {}, format="json").json()["id"]
    response = api.post(
        f"/api/conversations/{conversation}/messages/", {"content": content}, format="json"
    )
    assert response.status_code == 202, response.content
    return response.json()


def run_of(api: Any, run_id: Any) -> Any:
    """The run as ``GET /api/runs/<id>/`` answers once it has settled."""
    resumed_run(run_id)
    response = api.get(f"/api/runs/{run_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def ask(api: Any, content: str, conversation: Any = None) -> Any:
    """Post ``content`` and return the run once it has settled, read over the API."""
    return run_of(api, post(api, content, conversation)["id"])


def calls_of(run_id: str) -> list[ToolCall]:
    """Every ``ToolCall`` the run requested (refused ones included)."""
    return list(ToolCall.objects.filter(run_id=uuid.UUID(run_id)))
