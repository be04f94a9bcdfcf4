"""End to end: an editor asks through the API, an approver approves in the admin, a real
Celery worker (Redis broker) fetches from the namespace lab, the editor reads the fenced
text through the API.  And the same on the embedded default (no broker, in-process)."""

from __future__ import annotations

import pytest
from django.contrib.admin import helpers
from rest_framework.test import APIClient

from django_webfetch.models import CallState, EgressEvent, ToolCall
from tests.settle import settled_call

from .infra import wait_for

BEGIN = "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce="
END = "<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce="


@pytest.fixture
def web(lab_settings, group_factory, settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    group_factory("web", enabled=True)
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[2]])
    return lab_settings


def _ask(editor, url):
    api = APIClient()
    api.force_login(editor)
    response = api.post(
        "/api/calls/",
        {"tool": "fetch_external_url", "arguments": {"url": url}, "conversation": "conv-42"},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "awaiting_approval"
    assert body["approval_preview"]["host"] == "news.lab.example"
    assert body["approval_preview"]["query_raw"] == "topic=caf%C3%A9&page=2"
    assert body["approval_preview"]["query_decoded"] == [["topic", "café"], ["page", "2"]]
    return api, body["id"]


def _approve_in_admin(client, approver, call_id):
    client.force_login(approver)
    page = client.get(f"/admin/django_webfetch/toolcall/{call_id}/change/")
    assert "news.lab.example" in page.content.decode()
    response = client.post(
        "/admin/django_webfetch/toolcall/",
        {
            "action": "approve_selected",
            helpers.ACTION_CHECKBOX_NAME: [call_id],
            "confirm": "yes",
            "comment": "reviewed the host and query",
        },
        follow=True,
    )
    assert response.status_code == 200
    assert any("approved" in str(m) for m in response.context["messages"])


def _read_result(api, call_id, web):
    body = api.get(f"/api/calls/{call_id}/").json()
    assert body["state"] == "succeeded", body
    content = body["result"]["content"]
    assert body["result"]["error"] is None
    assert content.count(BEGIN) == 1 and content.count(END) == 1
    assert "Lab page" in content
    assert body["decided_by"] == "approver"
    assert body["decision_comment"] == "reviewed the host and query"
    [request] = [r for r in web.requests if r.path.startswith("/page")]
    assert request.path == "/page?topic=caf%C3%A9&page=2"
    assert EgressEvent.objects.filter(call_id=call_id, decision="fetched").count() == 1
    return body


@pytest.mark.redis
@pytest.mark.worker
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_editor_asks_admin_approves_worker_fetches(
    web, worker_factory, celery_client, client, editor, approver
):
    worker = worker_factory()
    url = web.url("news.lab.example", "/page?topic=caf%C3%A9&page=2", scheme="https")
    api, call_id = _ask(editor, url)
    assert web.requests == []

    _approve_in_admin(client, approver, call_id)
    wait_for(lambda: ToolCall.objects.get(pk=call_id).finished, 30, what="the worker")
    body = _read_result(api, call_id, web)
    assert body["attempts"] == 1
    row = ToolCall.objects.get(pk=call_id)
    assert row.worker.startswith("w1-"), worker.output()[-2000:]


@pytest.mark.django_db
def test_the_same_on_the_embedded_default(web, client, editor, approver, settings):
    """No broker, no worker: after the approval the background runner fetches in-process."""
    settings.WEBFETCH_ASYNC_RUNS = False
    url = web.url("news.lab.example", "/page?topic=caf%C3%A9&page=2", scheme="https")
    api, call_id = _ask(editor, url)
    _approve_in_admin(client, approver, call_id)
    assert settled_call(call_id).state == CallState.SUCCEEDED
    body = _read_result(api, call_id, web)
    assert body["attempts"] == 1
