"""Decisions that stick (issue 15): an approver's approve is not silently overturned by
another approver's cancel before a worker starts.

Who may cancel an approved (queued, not yet running) call: its requester, who withdraws
the request; an approver only with a reason, which the call's result shows next to the
approval it overturned — in the API response and on the admin page.
"""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import CallState

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def api_settings(settings, run_tools, celery_eager_off):
    settings.ROOT_URLCONF = "tests.runs.urls"


@pytest.fixture
def celery_eager_off(settings):
    # An approved call stays approved (queued) until a worker takes it: queue into a
    # broker that nothing consumes.
    settings.WEBFETCH_ASYNC_RUNS = True
    from celery import Celery

    from tests.runs.infra import _current_app

    app = Celery("webfetch-test-idle", set_as_current=False)
    app.conf.update(broker_url="memory://", task_ignore_result=True)
    with _current_app(app):
        yield app


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def approved_call(editor, approver, django_capture_on_commit_callbacks):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    with django_capture_on_commit_callbacks(execute=True):
        call = runs.approve(call, by=approver, comment="looks fine")
    assert call.state == CallState.APPROVED
    return call


def test_another_approver_cannot_silently_cancel_an_approved_call(
    editor, approver, approver_factory, django_capture_on_commit_callbacks
):
    call = approved_call(editor, approver, django_capture_on_commit_callbacks)
    second = approver_factory(username="second")
    response = client_for(second).post(f"/api/calls/{call.pk}/cancel/", {}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "cancel_reason_required"
    call.refresh_from_db()
    assert call.state == CallState.APPROVED
    assert call.decided_by == approver and call.decision_comment == "looks fine"
    with pytest.raises(runs.CancelReasonRequired):
        runs.cancel(call, by=second, comment="   ")


def test_an_approver_cancels_an_approval_with_a_reason_shown_to_the_first(
    editor, approver, approver_factory, django_capture_on_commit_callbacks, superuser
):
    call = approved_call(editor, approver, django_capture_on_commit_callbacks)
    second = approver_factory(username="second")
    response = client_for(second).post(
        f"/api/calls/{call.pk}/cancel/", {"comment": "host is an internal mirror"}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["state"], body["reason"]) == ("cancelled", "cancelled_after_approval")
    # The approval stays on record; the result says who overturned it and why.
    assert body["decided_by"] == "approver" and body["decision_comment"] == "looks fine"
    meta = body["result"]["meta"]
    assert meta == {
        "cancelled_by": "second",
        "cancelled_state": "approved",
        "overrode_approval_by": "approver",
        "cancel_comment": "host is an internal mirror",
    }
    assert "cancelled by second after approver approved it" in body["result"]["content"]
    assert "host is an internal mirror" in body["result"]["content"]
    # The first approver reads it on the call, in the API and in the admin.
    again = client_for(approver).get(f"/api/calls/{call.pk}/").json()
    assert again["reason"] == "cancelled_after_approval"
    admin = APIClient()
    admin.force_login(superuser)
    page = admin.get(reverse("admin:django_webfetch_toolcall_change", args=[call.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "cancelled_after_approval" in html
    assert "cancelled by second after approver approved it" in html
    assert "host is an internal mirror" in html


def test_the_requester_withdraws_an_approved_call_without_a_reason(
    editor, approver, django_capture_on_commit_callbacks
):
    call = approved_call(editor, approver, django_capture_on_commit_callbacks)
    response = client_for(editor).post(f"/api/calls/{call.pk}/cancel/", {}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["reason"] == "cancelled_after_approval"
    assert body["result"]["meta"]["cancelled_by"] == "editor"
    assert body["result"]["meta"]["overrode_approval_by"] == "approver"


def test_cancel_before_approval_is_unchanged(editor, approver):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    cancelled = runs.cancel(call, by=approver)
    assert (cancelled.state, cancelled.reason) == (CallState.CANCELLED, "cancelled")
    assert cancelled.tool_result().meta["cancelled_state"] == "awaiting_approval"


def test_contention_gives_every_approval_its_outcome(
    editor, approver, approver_factory, django_capture_on_commit_callbacks
):
    """4 approvers race approve/cancel over 40 calls: every approval either stands or is
    overturned with a reason on record — never silently."""
    import random

    approvers = [approver] + [approver_factory(username=f"a{i}") for i in range(3)]
    calls = [runs.request_call("runs_echo", {"text": str(i)}, user=editor) for i in range(40)]
    rng = random.Random(15)
    for call in calls:
        order = approvers[:]
        rng.shuffle(order)
        for who in order:
            try:
                if rng.random() < 0.5:
                    with django_capture_on_commit_callbacks(execute=True):
                        runs.approve(call, by=who)
                else:
                    runs.cancel(call, by=who)
            except (runs.InvalidTransition, runs.CancelReasonRequired):
                pass
    for call in calls:
        call.refresh_from_db()
        assert call.state in (CallState.APPROVED, CallState.CANCELLED)
        if call.state == CallState.CANCELLED and call.decided_by_id is not None:
            pytest.fail("an approval was overturned without a reason")
