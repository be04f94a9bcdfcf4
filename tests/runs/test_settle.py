"""``runs.settle``: the one way to read the outcome of a call just requested or approved
(the call runs off the request, on the background runner, the shipped default)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from django_webfetch import runs
from django_webfetch.models import CallState
from django_webfetch.runs.runner import runner

from .test_runner import GateTool

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def gate(settings: Any, run_tools: Any):
    settings.WEBFETCH_RUNNER = "background"
    GateTool.gate = threading.Event()
    GateTool.entered = threading.Event()
    GateTool.threads = []
    run_tools.register(GateTool)
    yield GateTool
    GateTool.gate.set()
    runner.wait_idle(30)


def test_a_call_read_right_after_its_request_has_not_run_yet(gate, editor):
    """Why the door exists: on the background runner the request returns before the call
    runs, so reading its state right away tells nothing about its outcome."""
    gate.needs_approval = False
    try:
        call = runs.request_call("runs_gate", {"text": "later"}, user=editor)
        assert call.state in runs.SETTLING_STATES
        assert call.tool_result() is None
        gate.gate.set()
        settled = runs.settle(call, timeout=30)
    finally:
        gate.needs_approval = True
    assert settled.state == CallState.SUCCEEDED
    assert settled.tool_result().content == "gated: later"


def test_settle_returns_at_once_for_a_call_that_waits_for_a_human(gate, editor):
    call = runs.request_call("runs_gate", {"text": "ask"}, user=editor)
    settled = runs.settle(call, timeout=30)
    assert settled.state == CallState.AWAITING_APPROVAL
    assert not gate.entered.is_set()


def test_settle_gives_the_row_as_it_is_at_the_timeout(gate, editor):
    gate.needs_approval = False
    try:
        call = runs.request_call("runs_gate", {"text": "held"}, user=editor)
        assert gate.entered.wait(30)
        held = runs.settle(call.pk, timeout=0.2)
    finally:
        gate.needs_approval = True
    assert held.state == CallState.RUNNING
    gate.gate.set()
    assert runs.settle(call.pk, timeout=30).state == CallState.SUCCEEDED


def test_a_finished_call_settles_without_waiting(run_tools, editor, settings):
    settings.WEBFETCH_RUNNER = "inline"
    from .conftest import EchoTool

    EchoTool.needs_approval = False
    try:
        call = runs.request_call("runs_echo", {"text": "now"}, user=editor)
    finally:
        EchoTool.needs_approval = True
    assert call.state == CallState.SUCCEEDED
    assert runs.settle(call, timeout=0).state == CallState.SUCCEEDED
