"""Never stuck, on the embedded default: the sweep (and a read) resumes or fails runs whose
worker was lost, runs whose calls finished without resuming them, and runs whose queued
message went missing; a cancel wins over a worker; a provider change mid-run fails it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from pydantic_ai.messages import ModelRequest, UserPromptPart

from django_webfetch.assistant import loop, services
from django_webfetch.assistant.history import dump
from django_webfetch.models import AssistantRun, CallState, ToolCall
from tests.settle import resumed_run, runner_idle, settled_run

from .provider import Turn

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def _stranded(user, **fields):
    """A run as a lost worker leaves it: history ends with the question, nobody answers."""
    conversation = services.create_conversation(user)
    fields.setdefault("lease_expires_at", timezone.now() - timedelta(seconds=1))
    return AssistantRun.objects.create(
        conversation=conversation,
        user=user,
        provider="offline",
        model_name="offline-planner",
        history=dump([ModelRequest(parts=[UserPromptPart("hello")])]),
        **fields,
    )


def test_a_lost_worker_is_replaced_once(editor):
    run = _stranded(editor)
    report = services.sweep()
    assert report["assistant_recovered"] == 1
    # The sweep queued the run: it is taken up in the background.
    run = settled_run(run)
    assert run.state == "completed", run.error_code
    assert list(run.events.values_list("kind", flat=True))[:1] == ["worker_lost"]


def test_a_second_loss_fails_the_run_worker_lost(editor):
    run = _stranded(editor, attempts=1)
    assert services.sweep()["assistant_recovered"] == 1
    run = settled_run(run)
    assert (run.state, run.error_code) == ("failed", "worker_lost")
    assert not run.messages.exists()


def test_a_live_lease_is_left_alone(editor):
    run = _stranded(editor, lease_expires_at=timezone.now() + timedelta(minutes=5))
    outcome = services.advance(run.pk)
    assert outcome.action == "busy" and outcome.retry_after > 0
    assert services.sweep()["assistant_recovered"] == 0
    run.refresh_from_db()
    assert run.state == "running"


def test_a_lost_queue_message_is_sent_again(editor, settings):
    settings.WEBFETCH_REQUEUE_AFTER = 30
    run = _stranded(
        editor,
        lease_expires_at=None,
        queued_at=timezone.now() - timedelta(seconds=settings.WEBFETCH_REQUEUE_AFTER + 1),
    )
    assert services.sweep()["assistant_resumed"] == 1
    run = settled_run(run)
    assert run.state == "completed"


def test_calls_that_finished_without_resuming_the_run(
    api_editor, provider, lab_settings, group_factory, settings
):
    # The sweep under test is the one called below: the runner's own periodic sweep (the
    # same code) must not come first and leave it nothing to count.
    settings.WEBFETCH_RUNNER_SWEEP_EVERY = 600
    lab_settings.dns.set(
        "news.lab.example", a=[lab_settings.PUBLIC_V4[2]]
    )  # pre-flight resolves it
    editor, api = api_editor
    group_factory("web", enabled=True)
    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": "https://news.lab.example/"})]),
        Turn(text="done"),
    )
    conversation = services.create_conversation(editor)
    run = settled_run(services.post_message(conversation, "read", user=editor))
    assert run.state == "waiting_for_approval"
    # The step that paused the run looks once more at its calls after the pause (one that
    # finished meanwhile is taken up by the worker itself, and the sweep has nothing to
    # do): the call is finished below only once that step is over (ci32, under load).
    runner_idle()
    [call] = services.run_calls(run)
    # Finished behind the state machine's back: no signal, nobody resumes the run ...
    ToolCall.objects.filter(pk=call.pk).update(
        state=CallState.DENIED,
        reason="approval_denied",
        result={"content": "no", "error": "approval_denied", "meta": {}},
    )
    # ... until the sweep does (in the background).
    assert services.sweep()["assistant_resumed"] == 1
    run = resumed_run(run)
    assert run.state == "completed"


def test_cancel_wins_over_a_worker(editor):
    run = _stranded(editor, lease_expires_at=timezone.now() + timedelta(minutes=5))
    services.cancel_run(run, by=editor)
    run.refresh_from_db()
    assert (run.state, run.error_code) == ("cancelled", "cancelled")
    assert services.advance(run.pk).action == "noop"
    with pytest.raises(services.InvalidRunTransition):
        services.cancel_run(run, by=editor)


def test_a_provider_change_mid_run_fails_it(
    editor, provider, approver, group_factory, lab_settings
):
    lab_settings.dns.set(
        "news.lab.example", a=[lab_settings.PUBLIC_V4[2]]
    )  # pre-flight resolves it
    from django_webfetch import runs
    from django_webfetch.models import ConfiguredEndpoint

    group_factory("web", enabled=True)
    provider.add(Turn(tool_calls=[("fetch_external_url", {"url": "https://news.lab.example/"})]))
    conversation = services.create_conversation(editor)
    run = settled_run(services.post_message(conversation, "read", user=editor))
    assert run.state == "waiting_for_approval"
    [call] = services.run_calls(run)
    ConfiguredEndpoint.objects.filter(group__slug="assistant").update(model_name="another-model")
    runs.deny(call, by=approver)
    run = resumed_run(run)
    assert (run.state, run.error_code) == ("failed", "provider_changed")


def test_an_unexpected_error_fails_the_run_internal_error(editor, monkeypatch):
    run = _stranded(editor, lease_expires_at=None)

    def boom(*args, **kwargs):
        raise RuntimeError("unexpected")

    # A third-party boundary (the model layer) blowing up, not our guard.
    monkeypatch.setattr(loop, "ask", boom)
    services.advance(run.pk)
    run.refresh_from_db()
    assert (run.state, run.error_code) == ("failed", "internal_error")
    assert run.error_message == "The assistant failed unexpectedly."


@pytest.fixture
def api_editor(editor, settings):
    from rest_framework.test import APIClient

    settings.ROOT_URLCONF = "tests.runs.urls"
    client = APIClient()
    client.force_login(editor)
    return editor, client
