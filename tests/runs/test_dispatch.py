"""Work is sent by task name (``runs.dispatch``): Celery's ``send_task`` when the process
does not have the task, the handler that ``apps.py`` bound in-process."""

from __future__ import annotations

import pytest

from django_webfetch.runs import dispatch
from tests.settle import settled_call

from .conftest import EchoTool


def test_every_task_name_has_an_in_process_handler():
    from django_webfetch.assistant.loop import advance_in_process
    from django_webfetch.assistant.recover import sweep_all
    from django_webfetch.runs.execute import execute_in_process

    assert dispatch.bound(dispatch.RUN_TOOL_CALL) is execute_in_process
    assert dispatch.bound(dispatch.ADVANCE_ASSISTANT_RUN) is advance_in_process
    assert dispatch.bound(dispatch.SWEEP) is sweep_all


@pytest.mark.django_db
def test_the_sweep_runs_in_process_by_its_name():
    report = dispatch.run_here(dispatch.SWEEP)
    assert report == {
        "expired": 0,
        "recovered": 0,
        "requeued": 0,
        "pruned": 0,
        "assistant_recovered": 0,
        "assistant_resumed": 0,
    }


def test_an_unbound_name_is_a_clear_error():
    with pytest.raises(LookupError, match="no in-process handler for task 'nope'"):
        dispatch.run_here("nope")


def test_an_in_process_call_runs_through_its_bound_handler(db, run_tools, editor):
    from django_webfetch import runs

    EchoTool.needs_approval = False
    call = settled_call(runs.request_call("runs_echo", {"text": "by name"}, user=editor))
    assert (call.state, call.worker.startswith("in-process:")) == ("succeeded", True)


def test_a_task_this_process_does_not_have_is_sent_by_name():
    pytest.importorskip("celery", reason="needs the [celery] extra")
    from celery import Celery

    from .infra import _current_app

    app = Celery("webfetch-test-send-task", set_as_current=False)
    app.conf.update(broker_url="memory://", task_ignore_result=True)
    with _current_app(app):
        dispatch.send(
            "django_webfetch.not_registered_here",
            "abc",
            soft_time_limit=1.5,
            time_limit=2.5,
            queue="webfetch-send-task",
        )
        with app.connection_for_write() as conn:
            queue = conn.SimpleQueue("webfetch-send-task")
            message = queue.get(timeout=2)
            message.ack()
            queue.close()
    assert message.headers["task"] == "django_webfetch.not_registered_here"
    assert list(message.headers["timelimit"]) == [2.5, 1.5]
    assert list(message.decode()[0]) == ["abc"]
