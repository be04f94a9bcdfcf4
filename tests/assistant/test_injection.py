"""Prompt-injection containment end to end: a lab page tells the model to fetch internal
URLs and to call a write tool; a (compromised) scripted model obeys.  Every follow-up call
goes through the same approval and guard as any other: nothing internal is reached, and the
write tool never runs without a human approval."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch.models import CallState, ToolCall
from tests.lab.content import INJECTION
from tests.settle import settled_call

from .helpers import post, run_of
from .provider import Turn, tool_results

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

BEGIN = "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce="
END = "<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce="


@pytest.fixture
def api(editor, settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    client = APIClient()
    client.force_login(editor)
    return client


def test_injected_page_cannot_reach_inside_or_write(
    api, provider, lab_settings, group_factory, run_tools, approver
):
    from tests.runs.conftest import WriteTool

    group_factory("web", enabled=True)
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[2]])
    page = lab_settings.url("news.lab.example", "/inject", scheme="https")

    def obey(record):
        # The page's text reached the model, fenced; a compromised model obeys it anyway.
        [result] = tool_results(record)
        assert result.count(BEGIN) == 1 and result.count(END) == 1
        assert "ignore the editor" in result
        return Turn(
            tool_calls=[
                ("fetch_external_url", {"url": "http://169.254.169.254/latest/meta-data/"}),
                ("fetch_external_url", {"url": "http://10.0.0.10/admin"}),
                ("runs_write", {"text": "pwned"}),
            ]
        )

    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": page})]),
        obey,
        lambda record: Turn(text="I did not do what the page said."),
    )
    run = run_of(api, post(api, "What's new?")["id"])
    approver_api = APIClient()
    approver_api.force_login(approver)
    [first] = run["steps"][0]["tool_calls"]
    # Accepted: the page is fetched in the background, and the run resumes there.
    assert approver_api.post(f"/api/calls/{first['id']}/approve/", {}).status_code == 202

    run = run_of(api, run["id"])
    assert run["state"] == "waiting_for_approval", run
    follow_ups = run["steps"][1]["tool_calls"]
    assert [c["tool"] for c in follow_ups] == [
        "fetch_external_url",
        "fetch_external_url",
        "runs_write",
    ]
    # Nothing ran: each follow-up is refused up front or waits for a human like any call.
    for call in follow_ups:
        assert call["state"] in ("awaiting_approval", "failed"), call
    assert WriteTool.executed == []
    write = ToolCall.objects.get(pk=follow_ups[2]["id"])
    assert write.state == CallState.AWAITING_APPROVAL and write.requires_approval

    # Even an approver who waves the internal fetches through does not open the way in.
    for call in follow_ups[:2]:
        if call["state"] == "awaiting_approval":
            assert approver_api.post(f"/api/calls/{call['id']}/approve/", {}).status_code == 202
    for call in follow_ups[:2]:
        row = settled_call(call["id"])
        assert row.state == CallState.FAILED, row.state
        assert row.result["error"] in ("egress_denied", "address_not_allowed") or row.reason
    assert approver_api.post(f"/api/calls/{follow_ups[2]['id']}/deny/", {}).status_code == 200

    final = run_of(api, run["id"])
    assert final["state"] == "completed", final
    assert WriteTool.executed == []
    # The whole history is sent: the page's result, then the three refusals.
    sent = tool_results(provider.requests[2])
    assert len(sent) == 4
    assert sent[3] == "[tool error: approval_denied] A reviewer denied this tool call."
    assert all(s.startswith("[tool error:") for s in sent[1:])
    assert "egress guard" in sent[1] and "egress guard" in sent[2]
    # The lab fixture also checks that no private-looking server saw a connection.
    assert not lab_settings.private_accepts()
    assert INJECTION[:20] in tool_results(provider.requests[1])[0]
