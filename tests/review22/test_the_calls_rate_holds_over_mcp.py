"""review22: ``WEBFETCH_API_RATES["calls"]`` limits, per user, how many tool calls the API
may be asked to start, but only DRF views are throttled: the MCP endpoint's ``tools/call``
(``mcp.calls.start_call``, the handler of every MCP transport) starts a tool call for the
same user with no limit at all.  A user (or the agent holding their MCP token) over the
rate on ``POST /api/calls/`` goes on requesting calls through MCP."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch.mcp.calls import start_call
from django_webfetch.models import AccessToken, ToolCall
from tests.runs.conftest import EchoTool, run_tools  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def test_a_user_over_the_calls_rate_starts_no_call_over_mcp(editor, settings, run_tools):  # noqa: F811
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.WEBFETCH_API_RATES = {"calls": "1/minute"}
    EchoTool.needs_approval = False
    client = APIClient()
    client.force_login(editor)
    post = lambda: client.post(  # noqa: E731
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "a"}}, format="json"
    )
    assert post().status_code == 201
    assert post().status_code == 429  # the user is over the rate
    assert ToolCall.objects.count() == 1

    AccessToken.objects.issue(editor, "agent", by=editor)
    token = AccessToken.objects.get(user=editor)
    for text in ("b", "c", "d"):
        start_call(token, "runs_echo", {"text": text})
    # Expected: the same user's rate holds on every surface that starts a call (MCP
    # answers an error and records nothing).  Actual: three more calls were started and run.
    assert ToolCall.objects.count() == 1, list(ToolCall.objects.values_list("arguments", "state"))
    assert EchoTool.executed == [{"text": "a"}]
