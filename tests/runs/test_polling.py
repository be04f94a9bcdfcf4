"""The poll hint: an open call says when another poll is worth it (``retry_after`` in the
body, ``Retry-After`` in the header); a finished call says nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from django_webfetch.models.calls import FINISHED_STATES
from tests.settle import settled_call

from .conftest import EchoTool

pytestmark = pytest.mark.django_db

OPEN_STATES = [s for s in CallState.values if s not in FINISHED_STATES]


@pytest.fixture(autouse=True)
def api_settings(settings, run_tools):
    settings.ROOT_URLCONF = "tests.runs.urls"


def _call(state: str, waited: float, now=None) -> ToolCall:
    since = (now or timezone.now()) - timedelta(seconds=waited)
    # Unsaved rows: the rule reads only the state and its timestamps.
    return ToolCall(state=state, created=since, decided_at=since, started_at=since)


@given(
    state=st.sampled_from(OPEN_STATES),
    first=st.floats(min_value=0, max_value=10_000),
    second=st.floats(min_value=0, max_value=10_000),
)
def test_the_hint_is_bounded_and_grows_with_the_wait(state, first, second):
    now = timezone.now()
    short, long = sorted((first, second))
    hints = [runs.poll_after(_call(state, waited, now), now=now) for waited in (short, long)]
    for hint, waited in zip(hints, (short, long), strict=True):
        assert hint is not None
        assert runs.POLL_MIN <= hint <= runs.POLL_MAX
        # A client that follows it is at most a quarter late (or the floor's 0.25 s).
        assert hint <= max(waited / 4, runs.POLL_MIN) + 0.005
    assert hints[0] <= hints[1]
    header = int(runs.retry_after_header(hints[1]))
    assert 1 <= header <= runs.POLL_MAX


@pytest.mark.parametrize("state", sorted(FINISHED_STATES))
def test_a_finished_call_has_no_hint(state):
    assert runs.poll_after(_call(state, 3600)) is None


def test_the_hint_counts_from_the_state_the_call_is_in():
    now = timezone.now()
    call = ToolCall(
        state=CallState.RUNNING,
        created=now - timedelta(hours=1),
        decided_at=now - timedelta(minutes=30),
        started_at=now - timedelta(seconds=2),
    )
    # Waiting an hour for a human says nothing about a run that started 2 s ago.
    assert runs.poll_after(call, now=now) == 0.5
    call.state = CallState.APPROVED
    assert runs.poll_after(call, now=now) == runs.POLL_MAX


def test_a_queued_call_answers_202_with_retry_after(editor, celery_eager):
    EchoTool.needs_approval = False
    client = APIClient()
    client.force_login(editor)
    # In one transaction: the call's message goes out on the commit, so until then the
    # call is queued and no worker has taken it.
    with transaction.atomic():
        response = client.post(
            "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "q"}}, format="json"
        )
        assert response.status_code == 202
        body = response.json()
        assert body["state"] == CallState.APPROVED
        assert body["retry_after"] == runs.POLL_MIN
        assert response["Retry-After"] == "1"
        # Queued a minute ago: the poll says come back in 5 s, not in a quarter of one.
        ToolCall.objects.filter(pk=body["id"]).update(
            decided_at=timezone.now() - timedelta(seconds=60)
        )
        again = client.get(f"/api/calls/{body['id']}/")
        assert again.status_code == 200
        assert again.json()["state"] == CallState.APPROVED
        assert again.json()["retry_after"] == runs.POLL_MAX
        assert again["Retry-After"] == "5"
    # Committed: the message is out and the call runs, after which no hint is left.
    assert settled_call(body["id"]).state == CallState.SUCCEEDED
    done = client.get(f"/api/calls/{body['id']}/")
    assert done.json()["retry_after"] is None and not done.has_header("Retry-After")


def test_a_call_waiting_for_a_human_has_a_hint_and_a_finished_one_none(editor, approver):
    client = APIClient()
    client.force_login(editor)
    response = client.post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "w"}}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["state"] == CallState.AWAITING_APPROVAL
    assert response.json()["retry_after"] == runs.POLL_MIN
    assert response.has_header("Retry-After")
    call = ToolCall.objects.get(pk=response.json()["id"])
    runs.approve(call, by=approver)
    settled_call(call)
    done = client.get(f"/api/calls/{call.pk}/")
    assert done.json()["finished"] is True
    assert done.json()["retry_after"] is None
    assert not done.has_header("Retry-After")
    listed = client.get("/api/calls/").json()["results"]
    assert [c["retry_after"] for c in listed] == [None]
