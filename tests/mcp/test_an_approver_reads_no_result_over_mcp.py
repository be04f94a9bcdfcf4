"""Review round 4 (issue 29), finding 1 (high): a non-superuser approver read the full result of
another
user's call through the MCP tool ``webfetch_call_status`` (``mcp/calls.py`` filtered with
the record rule, not the result rule, and the answer builder returned any finished call's
content).  The API and the admin withhold it; MCP must too."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from django_webfetch import runs
from django_webfetch.mcp.calls import CALL_STATUS_TOOL, start_call
from django_webfetch.models import AccessToken
from tests.runs.conftest import EchoTool
from tests.settle import settled_call as settled

pytestmark = pytest.mark.django_db

SECRET = "MCPRESULT" + uuid.uuid4().hex


class SecretTool(EchoTool):
    name = "r29_secret"
    description = "Return a secret only the requester may read."

    def execute(self, arguments: Any, context: Any) -> Any:
        from django_webfetch.tools import ToolResult

        return ToolResult(content=f"page text {SECRET}", meta={"note": SECRET})


def test_an_approver_reads_the_state_not_the_result_of_another_users_call(
    run_tools,
    user_factory,
    approver_factory,
):
    run_tools.register(SecretTool)
    requester = user_factory(username="requester29")
    approver = approver_factory(username="approver29")
    call = runs.request_call("r29_secret", {"text": "x"}, user=requester)
    assert call.state == "awaiting_approval"
    runs.approve(call, by=approver_factory(username="decider29"))
    call = settled(call)
    assert call.state == "succeeded" and SECRET in str(call.result)

    AccessToken.objects.issue(approver, "approver's agent", by=approver)
    token = AccessToken.objects.get(user=approver)
    answer = start_call(token, CALL_STATUS_TOOL, {"call_id": str(call.pk)})
    # The approver may read the record (state, tool) of a call that went to approval ...
    assert answer.data["state"] == "succeeded"
    # ... never what the tool returned for someone else.
    assert SECRET not in answer.text and SECRET not in str(answer.data)
    assert answer.data.get("result_withheld") is True

    # The requester reads it in full.
    AccessToken.objects.issue(requester, "requester's agent", by=requester)
    mine = start_call(
        AccessToken.objects.get(user=requester), CALL_STATUS_TOOL, {"call_id": str(call.pk)}
    )
    assert SECRET in mine.text and not mine.is_error
