"""review22b: the ``calls`` rate holds over MCP ``tools/call`` (``mcp.calls.start_call``),
but MCP's ``resources/list`` and ``resources/read`` (``mcp.pages``) start tool calls too --
a ``list_pages`` or ``read_page`` call through ``runs.request_call``, recorded and audited
like any other -- and never count.  A user (or the agent holding their token) who is over
the rate on ``tools/call`` (or on ``POST /api/calls/``) goes on starting ``read_page``
calls through ``resources/read``, as many as it asks for: ``tools/call read_page`` is
refused, the same call as a resource is not."""

from __future__ import annotations

import pytest

from django_webfetch.mcp import pages as mcp_pages
from django_webfetch.mcp.calls import start_call
from django_webfetch.models import AccessToken, ToolCall
from tests.cms.conftest import PAGES, cms_page_factory, content_group  # noqa: F401

pytestmark = pytest.mark.django_db


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
    assert not first.is_error, first.text
    over = start_call(token, "read_page", {"page_id": about.pk})
    assert over.is_error and over.data["error"] == "throttled"  # the user is over the rate
    assert ToolCall.objects.filter(user=editor).count() == 1

    for _ in range(3):
        with pytest.raises(mcp_pages.ResourcesThrottled):
            mcp_pages.read_resource(token, f"webfetch://page/{about.pk}")
    with pytest.raises(mcp_pages.ResourcesThrottled) as info:
        mcp_pages.list_resources(token)
    assert info.value.retry_after >= 1
    # Expected: over the rate no surface starts a call for this user -- resources/read and
    # resources/list start read_page/list_pages calls like tools/call does, so they are
    # refused too and nothing is recorded.  Actual: four more calls were started and run.
    assert ToolCall.objects.filter(user=editor).count() == 1, list(
        ToolCall.objects.filter(user=editor).values_list("tool", "state")
    )
