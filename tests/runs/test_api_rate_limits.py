"""API rate limits per user and scope (messages, calls, approvals): 429 with Retry-After
in the API's JSON error shape; reads are never limited; each user counts alone."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import ToolCall
from tests.settle import settled_call

from .conftest import EchoTool

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _urls(settings, run_tools):
    settings.ROOT_URLCONF = "tests.runs.urls"


def client_for(user):
    client = APIClient()
    client.force_login(user)
    return client


def post_call(client, text="hi"):
    return client.post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": text}}, format="json"
    )


def assert_throttled(response):
    assert response.status_code == 429, response.content
    body = response.json()
    assert body["code"] == "throttled"
    assert body["detail"].startswith("Request was throttled.")
    wait = int(response["Retry-After"])
    assert 1 <= wait <= 60
    assert body["retry_after"] == wait
    assert response["Content-Type"] == "application/json"


def test_calls_scope(editor, user_factory, settings):
    settings.WEBFETCH_API_RATES = {"calls": "2/minute"}
    client = client_for(editor)
    assert [post_call(client).status_code for _ in range(2)] == [201, 201]
    assert_throttled(post_call(client))
    # Refused before the view: no call recorded for it.
    assert ToolCall.objects.count() == 2
    # Reading is never limited.
    assert client.get("/api/calls/").status_code == 200
    # Another user has a history of their own.
    assert post_call(client_for(user_factory())).status_code == 201


def test_an_html_client_gets_json_too(editor, settings):
    settings.WEBFETCH_API_RATES = {"calls": "1/minute"}
    client = client_for(editor)
    post_call(client)
    response = client.post(
        "/api/calls/",
        {"tool": "runs_echo", "arguments": {"text": "x"}},
        format="json",
        HTTP_ACCEPT="text/html",
    )
    assert_throttled(response)


def test_approvals_scope(editor, approver, settings):
    settings.WEBFETCH_API_RATES = {"approvals": "1/minute", "calls": None}
    EchoTool.needs_approval = True
    first, second = (runs.request_call("runs_echo", {"text": t}, user=editor) for t in "ab")
    client = client_for(approver)
    assert client.post(f"/api/calls/{first.pk}/approve/", {}, format="json").status_code == 202
    assert_throttled(client.post(f"/api/calls/{second.pk}/deny/", {}, format="json"))
    assert ToolCall.objects.get(pk=second.pk).state == "awaiting_approval"
    assert settled_call(first).state == "succeeded"


def test_messages_scope(editor, settings):
    settings.WEBFETCH_API_RATES = {"messages": "2/minute"}
    client = client_for(editor)
    conv = client.post("/api/conversations/", {}, format="json").json()["id"]
    url = f"/api/conversations/{conv}/messages/"
    assert client.post(url, {"content": "hello"}, format="json").status_code == 202
    assert_throttled(client.post(url, {"content": "again"}, format="json"))


def test_a_scope_set_to_none_is_not_limited(editor, settings):
    settings.WEBFETCH_API_RATES = {"calls": None}
    client = client_for(editor)
    assert {post_call(client).status_code for _ in range(70)} == {201}


def test_defaults_apply(editor):
    from django_webfetch.conf import API_RATE_DEFAULTS, conf

    assert conf.WEBFETCH_API_RATES == API_RATE_DEFAULTS
    client = client_for(editor)
    statuses = [post_call(client).status_code for _ in range(61)]
    assert statuses[:60] == [201] * 60
    assert_throttled(post_call(client))


@pytest.mark.parametrize(
    "value",
    [[], {"nope": "1/minute"}, {"calls": "1/fortnight"}, {"calls": "0/minute"}, {"calls": 5}],
)
def test_bad_rates_are_a_configuration_error(settings, value):
    from django_webfetch.conf import conf
    from django_webfetch.exceptions import WebFetchConfigurationError

    settings.WEBFETCH_API_RATES = value
    with pytest.raises(WebFetchConfigurationError, match="WEBFETCH_API_RATES"):
        _ = conf.WEBFETCH_API_RATES
