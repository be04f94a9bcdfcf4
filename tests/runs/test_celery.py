"""Runs through Celery: eager mode, and real workers on a real Redis (worker crash included).

The worker tests use fetch_external_url against the lab: the workers are processes forked
from this one, inside the same private network namespace, and reach the lab's DNS and
HTTP servers through the unweakened guard.  They share this test's database (a SQLite file,
committed data: ``transaction=True``).
"""

from __future__ import annotations

import time

import pytest
from django.db import transaction

pytest.importorskip("celery", reason="needs the [celery] extra")

from django_webfetch import runs
from django_webfetch.models import CallState, EgressEvent, ToolCall

from .conftest import EchoTool
from .infra import wait_for

BEGIN = "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce="

real_db = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def _state(call):
    return ToolCall.objects.values_list("state", flat=True).get(pk=call.pk)


@pytest.fixture
def web(lab_settings, group_factory):
    group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    return lab_settings


# -- eager ----------------------------------------------------------------------------------


def test_eager_approval_runs_the_task(
    db, run_tools, celery_eager, editor, approver, django_capture_on_commit_callbacks
):
    call = runs.request_call("runs_echo", {"text": "eager"}, user=editor)
    with transaction.atomic():
        with django_capture_on_commit_callbacks() as callbacks:
            approved = runs.approve(call, by=approver)
        assert approved.state == CallState.APPROVED  # queued: the task runs after the commit
        queued = [c for c in callbacks if c.__module__ != "django_webfetch.runs.settle"]
        assert len(queued) == 1
        assert EchoTool.executed == []
    # Committed: the eager task ran in the commit's callback.
    call.refresh_from_db()
    assert call.state == CallState.SUCCEEDED
    assert call.tool_result().content == "echo: eager"
    assert call.worker  # set by the task
    assert EchoTool.executed == [{"text": "eager"}]


def test_eager_call_without_approval(
    db, run_tools, celery_eager, editor, django_capture_on_commit_callbacks
):
    EchoTool.needs_approval = False
    with django_capture_on_commit_callbacks(execute=True):
        call = runs.request_call("runs_echo", {"text": "now"}, user=editor)
    assert call.state == CallState.APPROVED
    call.refresh_from_db()
    assert call.state == CallState.SUCCEEDED


def test_nothing_is_queued_before_the_commit(
    db, run_tools, celery_eager, editor, approver, django_capture_on_commit_callbacks
):
    """A rolled-back approval queues nothing."""
    from django.db import transaction

    call = runs.request_call("runs_echo", {"text": "x"}, user=editor)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        try:
            with transaction.atomic():
                runs.approve(call, by=approver)
                raise RuntimeError("rollback")
        except RuntimeError:
            pass
    assert callbacks == []
    assert _state(call) == CallState.AWAITING_APPROVAL
    assert EchoTool.executed == []


def test_the_task_is_idempotent(
    db, run_tools, celery_eager, editor, approver, django_capture_on_commit_callbacks
):
    from django_webfetch.tasks import run_tool_call

    call = runs.request_call("runs_echo", {"text": "once"}, user=editor)
    with django_capture_on_commit_callbacks(execute=True):
        runs.approve(call, by=approver)
    for _ in range(3):  # redeliveries of a finished call
        assert run_tool_call.delay(str(call.pk)).get() == "noop"
    assert len(EchoTool.executed) == 1


def test_the_sweep_task(db, run_tools, celery_eager, editor):
    from django.utils import timezone

    from django_webfetch.tasks import expire_tool_calls

    call = runs.request_call("runs_echo", {"text": "x"}, user=editor)
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now())
    report = expire_tool_calls.delay().get()
    assert {k: report[k] for k in ("expired", "recovered", "requeued", "pruned")} == {
        "expired": 1,
        "recovered": 0,
        "requeued": 0,
        "pruned": 0,
    }
    assert _state(call) == CallState.EXPIRED


def test_task_names():
    from django_webfetch import tasks

    assert tasks.run_tool_call.name == "django_webfetch.run_tool_call"
    assert tasks.expire_tool_calls.name == "django_webfetch.expire_tool_calls"
    assert tasks.run_tool_call.acks_late is True
    assert tasks.run_tool_call.reject_on_worker_lost is True


# -- real Redis, real workers -----------------------------------------------------------------


@pytest.mark.redis
@pytest.mark.worker
@real_db
def test_a_worker_runs_an_approved_fetch(web, worker_factory, celery_client, editor, approver):
    worker = worker_factory()
    url = web.url("docs.lab.example", "/page?q=caf%C3%A9&x=1", scheme="https")
    call = runs.request_call("fetch_external_url", {"url": url}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL
    assert call.approval_preview["host"] == "docs.lab.example"
    assert call.approval_preview["query_raw"] == "q=caf%C3%A9&x=1"
    time.sleep(0.5)
    assert web.requests == []  # nothing runs while it waits

    call = runs.approve(call, by=approver, comment="ok")
    assert call.state == CallState.APPROVED
    wait_for(lambda: _state(call) in runs.FINISHED_STATES, 30, what="the worker")
    call.refresh_from_db()
    assert call.state == CallState.SUCCEEDED, (call.result, worker.output()[-3000:])
    result = call.tool_result()
    assert BEGIN in result.content and "Lab page" in result.content
    assert call.attempts == 1
    assert call.worker.startswith(f"w1-{celery_client.queue}@")
    assert len(web.requests) == 1
    assert EgressEvent.objects.filter(call_id=str(call.pk), decision="fetched").count() == 1


@pytest.mark.redis
@pytest.mark.worker
@real_db
def test_the_periodic_sweep_runs_on_beat(web, worker_factory, celery_client, editor):
    from django.utils import timezone

    worker_factory(beat=True, env={"WEBFETCH_TEST_SWEEP_EVERY": "0.5"})
    call = runs.request_call(
        "fetch_external_url", {"url": web.url("docs.lab.example", "/page")}, user=editor
    )
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now())
    wait_for(lambda: _state(call) == CallState.EXPIRED, 30, what="the beat sweep")


@pytest.mark.redis
@pytest.mark.worker
@real_db
def test_worker_killed_mid_fetch(web, worker_factory, celery_client, editor, approver, settings):
    """kill -9 of a worker in the middle of a slow fetch: the call is not lost.

    Attempt 1 is killed; Redis delivers the unacknowledged message again once its
    visibility timeout passes, the new worker sees the attempt's lease has run out and runs
    attempt 2 itself.  Attempt 2 is killed too: the next delivery ends the call ``failed``
    with reason ``worker_lost``.  At no point is the call left ``running``.
    """
    settings.WEBFETCH_TIMEOUT = 1.0  # the fetch ends quickly; the lease is 15 s, renewed
    url = web.url("docs.lab.example", "/slow")
    call = runs.request_call("fetch_external_url", {"url": url}, user=editor)

    def running(attempt):
        row = ToolCall.objects.get(pk=call.pk)
        return row.state == CallState.RUNNING and row.attempts == attempt

    def slow_request_started(count):
        return sum(1 for r in web.requests if r.path == "/slow") >= count

    first = worker_factory("first")
    runs.approve(call, by=approver)
    wait_for(lambda: running(1) and slow_request_started(1), 20, what="attempt 1")
    first.kill9()
    assert _state(call) == CallState.RUNNING  # the lease still holds it

    second = worker_factory("second")
    wait_for(lambda: running(2) and slow_request_started(2), 40, what="attempt 2")
    second.kill9()

    third = worker_factory("third")
    wait_for(lambda: _state(call) in runs.FINISHED_STATES, 40, what="the call to end")
    call.refresh_from_db()
    assert call.state == CallState.FAILED, third.output()[-3000:]
    assert call.reason == "worker_lost"
    assert call.attempts == 2
    assert call.tool_result().error == "worker_lost"
    assert call.lease_expires_at is None


@pytest.mark.redis
@pytest.mark.worker
@real_db
def test_worker_killed_then_the_retry_completes(
    web, worker_factory, celery_client, editor, approver, settings, lab_settings
):
    """Attempt 1 dies with its worker; attempt 2 (on another worker) runs to the end."""
    settings.WEBFETCH_TIMEOUT = 1.0
    lab_settings.dns.set("slowly.lab.example", a=[lab_settings.PUBLIC_V4[1]])
    call = runs.request_call(
        "fetch_external_url", {"url": web.url("slowly.lab.example", "/slow")}, user=editor
    )
    first = worker_factory("first")
    runs.approve(call, by=approver)
    wait_for(
        lambda: (
            ToolCall.objects.filter(pk=call.pk, state=CallState.RUNNING).exists()
            and any(r.path == "/slow" for r in web.requests)
        ),
        20,
        what="attempt 1",
    )
    first.kill9()
    worker_factory("second")
    wait_for(lambda: _state(call) in runs.FINISHED_STATES, 40, what="the retry")
    call.refresh_from_db()
    # The retry ran to its end: /slow outlasts the 1 s budget, so the tool reports a
    # timeout - a result of attempt 2, not a lost call.
    assert call.attempts == 2
    assert call.state == CallState.FAILED
    assert call.reason == "timeout", call.result
