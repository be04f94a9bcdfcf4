"""A human decision applies only to a call awaiting approval: approving a call that is
already running must not take the state machine's retry edge (running -> approved) and run
the tool a second time."""

from __future__ import annotations

import pytest

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from tests.settle import settled_call

from .conftest import EchoTool

pytestmark = pytest.mark.django_db


def test_approving_a_running_call_does_not_run_it_again(
    run_tools, editor, approver_factory, monkeypatch
):
    first, second = approver_factory(), approver_factory()
    call = runs.request_call("runs_echo", {"text": "x"}, user=editor)
    during_the_run = []
    execute = EchoTool.execute

    def approve_again_while_running(self, arguments, context):
        if not during_the_run:
            during_the_run.append(ToolCall.objects.get(pk=call.pk).state)
            try:
                runs.approve(call.pk, by=second)
            except runs.InvalidTransition as refused:
                during_the_run.append(refused.current)
        return execute(self, arguments, context)

    monkeypatch.setattr(EchoTool, "execute", approve_again_while_running)
    EchoTool.executed.clear()
    done = settled_call(runs.approve(call.pk, by=first))
    assert during_the_run == [CallState.RUNNING, CallState.RUNNING]
    assert EchoTool.executed == [{"text": "x"}]
    assert (done.state, done.attempts) == (CallState.SUCCEEDED, 1)
    assert ToolCall.objects.get(pk=call.pk).decided_by_id == first.pk
