"""The offline rule-based planner (a Pydantic AI FunctionModel) and the provider error map."""

from __future__ import annotations

import pytest

from django_webfetch.assistant import services
from django_webfetch.assistant.planner import OFFLINE_PREFIX, _urls
from django_webfetch.assistant.providers import OFFLINE_LABEL, classify_error
from django_webfetch.net.errors import EgressDenied, FetchError, FetchTimeout, ResponseTooLarge
from tests.settle import settled_run

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def test_urls_found_in_order_deduplicated_and_bounded():
    text = (
        "see https://a.example/x, then (http://b.example/y). "
        "https://a.example/x https://c.example/ https://d.example/"
    )
    assert _urls(text) == ["https://a.example/x", "http://b.example/y", "https://c.example/"]


def test_search_site_when_no_url(editor, group_factory, endpoint_factory, lab_settings):
    group_factory("rag", enabled=True)
    endpoint_factory()
    conversation = services.create_conversation(editor)
    run = settled_run(
        services.post_message(conversation, "opening hours of the library", user=editor)
    )
    [call] = services.run_calls(run)
    assert (call.tool, call.arguments) == ("search_site", {"query": "opening hours of the library"})
    assert run.provider_label == OFFLINE_LABEL
    # The endpoint does not resolve in the lab: the planner's answer says so in words.
    assert run.state == "completed"
    answer = run.messages.filter(role="assistant").order_by("-seq").first()
    assert answer.content.startswith(OFFLINE_PREFIX)
    assert "search_site (opening hours of the library) did not give a result: " in answer.content
    assert "[tool error:" not in answer.content


def test_a_url_without_the_web_tool_says_why(editor):
    conversation = services.create_conversation(editor)
    run = settled_run(
        services.post_message(conversation, "read https://example.org/ please", user=editor)
    )
    assert run.state == "completed"
    [message] = run.messages.filter(role="assistant")
    assert message.content.startswith(OFFLINE_PREFIX)
    assert "Reading web pages is off for you" in message.content
    assert message.provider_label == OFFLINE_LABEL
    assert services.run_calls(run) == []


class _Wrapped(Exception):
    pass


def _wrapped(inner):
    try:
        try:
            raise inner
        except Exception as exc:
            raise _Wrapped("sdk") from exc
    except _Wrapped as outer:
        return outer


class _Status(Exception):
    def __init__(self, status):
        self.status_code = status


@pytest.mark.parametrize(
    "exc, code, retry",
    [
        (_wrapped(EgressDenied("denylist")), "egress_denied", False),
        (_wrapped(FetchTimeout()), "provider_timeout", True),
        (_wrapped(FetchError("boom")), "provider_unreachable", True),
        (_wrapped(ResponseTooLarge()), "provider_response_too_large", False),
        (_Status(500), "provider_error", True),
        (_Status(429), "provider_error", True),
        (_Status(400), "provider_rejected", False),
        (ValueError("<html>"), "provider_bad_response", True),
    ],
)
def test_provider_errors_map_to_stable_codes(exc, code, retry):
    failure = classify_error(exc)
    assert (failure.code, failure.retry_safe) == (code, retry)
    assert "<html>" not in failure.message
