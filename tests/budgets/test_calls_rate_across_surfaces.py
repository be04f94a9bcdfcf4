"""The user's ``calls`` rate (``WEBFETCH_API_RATES["calls"]``, ``budgets.rates``) holds on
every surface that starts a tool call, in one history per user.

Over the rate on ``POST /api/calls/``, the same user (or the agent holding their MCP token)
starts no call through MCP's ``tools/call`` (``mcp.calls.start_call``, the handler of every
MCP transport), nor through ``resources/list`` and ``resources/read`` (``mcp.pages``), which
start ``list_pages`` / ``read_page`` calls through ``runs.request_call`` like any other:
each is answered ``throttled`` and nothing is recorded.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch.mcp import pages as mcp_pages
from django_webfetch.mcp.calls import Pending, answer_for, start_call
from django_webfetch.models import AccessToken, ToolCall
from tests.cms.conftest import PAGES, cms_page_factory, content_group  # noqa: F401
from tests.runs.conftest import EchoTool, run_tools  # noqa: F401 - the fixture
from tests.settle import settled_call

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
    first = post()
    assert first.status_code == 202  # started on the background runner
    assert post().status_code == 429  # the user is over the rate
    assert ToolCall.objects.count() == 1
    assert settled_call(first.json()["id"]).state == "succeeded"

    AccessToken.objects.issue(editor, "agent", by=editor)
    token = AccessToken.objects.get(user=editor)
    for text in ("b", "c", "d"):
        start_call(token, "runs_echo", {"text": text})
    # The same user's rate holds over MCP: an error answered, nothing recorded or run.
    assert ToolCall.objects.count() == 1, list(ToolCall.objects.values_list("arguments", "state"))
    assert EchoTool.executed == [{"text": "a"}]


def test_a_user_over_the_calls_rate_starts_no_read_page_call_as_a_resource(
    editor,
    settings,
    content_group,  # noqa: F811
    cms_page_factory,  # noqa: F811
):
    settings.WEBFETCH_API_RATES = {"calls": "1/minute"}
    about = cms_page_factory("About us", "about", PAGES["about"])
    AccessToken.objects.issue(editor, "agent", by=editor)
    token = AccessToken.objects.select_related("user").get(user=editor)

    first = start_call(token, "read_page", {"page_id": about.pk})
    assert isinstance(first, Pending)  # started on the background runner
    answer = answer_for(settled_call(first.call_id), first.fetch, editor)
    assert not answer.is_error, answer.text
    assert "Founded in 1952" in answer.text
    over = start_call(token, "read_page", {"page_id": about.pk})
    assert over.is_error and over.data["error"] == "throttled"  # the user is over the rate
    assert ToolCall.objects.filter(user=editor).count() == 1

    for _ in range(3):
        with pytest.raises(mcp_pages.ResourcesThrottled):
            mcp_pages.read_resource(token, f"webfetch://page/{about.pk}")
    with pytest.raises(mcp_pages.ResourcesThrottled) as info:
        mcp_pages.list_resources(token)
    assert info.value.retry_after >= 1
    # resources/read and resources/list start read_page/list_pages calls like tools/call
    # does, so over the rate they are refused too and nothing is recorded.
    assert ToolCall.objects.filter(user=editor).count() == 1, list(
        ToolCall.objects.filter(user=editor).values_list("tool", "state")
    )
