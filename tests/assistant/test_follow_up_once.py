"""The follow-up of a provider request handed to a provider I/O loop acts at most once,
whatever arrives and in whatever order: duplicates of its message (Celery redelivers a
message whose worker died before acknowledging it), stale follow-ups of an earlier hand-off,
and the release of an exiting worker (``loop.release_handed_off``).

The run is held as a hand-off leaves it (running, leased, its history ending with the
question); the follow-up carries the answer as the task's JSON does.  Inline runner: a
released run is advanced again at once (the offline planner answers it).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from django_webfetch.assistant import loop, services
from django_webfetch.assistant.history import dump
from django_webfetch.models import AssistantRun

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

ANSWER = "The model's late answer."

_delivery = st.sampled_from(["follow_up", "stale", "release"])


def _handed_off(user: object) -> AssistantRun:
    conversation = services.create_conversation(user)
    return AssistantRun.objects.create(
        conversation=conversation,
        user=user,
        provider="offline",
        model_name="offline-planner",
        history=dump([ModelRequest(parts=[UserPromptPart("hello")])]),
        lease_expires_at=timezone.now() + timedelta(minutes=5),
        worker="w1:1",
        version=3,
    )


@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(deliveries=st.lists(_delivery, min_size=1, max_size=6))
def test_a_follow_up_acts_at_most_once_in_any_order(deliveries, editor, settings):
    settings.WEBFETCH_RUNNER = "inline"
    run = _handed_off(editor)
    handed = run.version
    [response] = dump([ModelResponse(parts=[TextPart(ANSWER)])])
    outcome = {"response": response}
    loop._handed_off.add(str(run.pk), handed)
    acted = []
    released = False
    for delivery in deliveries:
        if delivery == "release":
            released = loop.release_handed_off() > 0 or released
        else:
            version = handed if delivery == "follow_up" else handed - 1
            result = loop.answered(str(run.pk), version, outcome, worker="w2:2")
            if result.action != "noop":
                acted.append(delivery)
    loop._handed_off.take()

    row = AssistantRun.objects.get(pk=run.pk)
    answers = list(row.messages.filter(role="assistant").values_list("content", flat=True))
    kinds = list(row.events.values_list("kind", flat=True))
    # Exactly one of them decided the step: the first follow-up, or the release.
    assert len(acted) <= 1 and not (acted and released)
    assert acted in ([], ["follow_up"])
    first = next(d for d in deliveries if d != "stale") if set(deliveries) != {"stale"} else None
    if first == "follow_up":
        assert acted == ["follow_up"] and answers == [ANSWER]
    elif first == "release":
        assert released and ANSWER not in answers and len(answers) == 1
        assert kinds.count("released") == 1
    else:
        assert row.state == "running" and answers == []
    assert kinds.count("completed") == (0 if first is None else 1)
    assert "worker_lost" not in kinds
