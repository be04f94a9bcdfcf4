"""A provider's answer cut while it streams (the connection closed mid-answer) is
``provider_stream_cut``, in words that say so, not "the LLM provider could not be reached":
the provider was reached and had begun to answer."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch.assistant.providers import ProviderFailure, stream_cut

from .helpers import ask
from .provider import Turn

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"], indirect=True)


@pytest.fixture
def api(editor, settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    client = APIClient()
    client.force_login(editor)
    return client


@BOTH
def test_an_answer_cut_mid_stream_is_provider_stream_cut(api, provider):
    text = "An answer long enough to stream in several chunks, cut after the second one."
    provider.add(Turn(text=text, chunk=10, cut_after=2))
    run = ask(api, "hi")
    assert (run["state"], run["error_code"]) == ("failed", "provider_stream_cut")
    assert run["error_message"] == "The LLM provider's answer was cut off while it streamed."
    # Safe to repeat (nothing but the model request is repeated): asked twice, cut twice.
    assert len(provider.requests) == 2


@BOTH
def test_an_answer_cut_once_is_asked_again_and_completes(api, provider):
    text = "The whole answer, the second time."
    provider.add(Turn(text="Cut short " * 10, chunk=10, cut_after=1, repeat=Turn(text=text)))
    run = ask(api, "hi")
    assert run["state"] == "completed", run
    assert run["final_message"]["content"] == text


@pytest.mark.parametrize(
    ("code", "becomes"),
    [
        ("provider_unreachable", "provider_stream_cut"),
        ("provider_bad_response", "provider_stream_cut"),
        ("provider_timeout", "provider_timeout"),
        ("provider_error", "provider_error"),
        ("provider_rejected", "provider_rejected"),
        ("provider_response_too_large", "provider_response_too_large"),
        ("egress_denied", "egress_denied"),
    ],
)
def test_only_a_transport_failure_after_the_first_chunk_is_a_cut(code, becomes):
    failure = stream_cut(ProviderFailure(code, "words", detail="d"))
    assert failure.code == becomes
    if becomes == "provider_stream_cut":
        assert failure.retry_safe
        assert "could not be reached" not in failure.message
