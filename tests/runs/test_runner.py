"""The background runner (``runs.runner``): without Celery, an approval answers at once and
the call runs on a runner thread; a lost call is taken up by the runner's own sweep."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from django_webfetch.runs.runner import runner
from django_webfetch.tools import ToolContext, ToolResult

from .conftest import EchoTool

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


class GateTool(EchoTool):
    """Blocks until the test opens its gate: a request that ran it would never return."""

    name = "runs_gate"
    gate: ClassVar[threading.Event] = threading.Event()
    entered: ClassVar[threading.Event] = threading.Event()
    threads: ClassVar[list[str]] = []

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        type(self).threads.append(threading.current_thread().name)
        type(self).entered.set()
        if not type(self).gate.wait(30):
            return ToolResult.failure("gate_timeout", "The test never opened the gate.")
        return ToolResult(content=f"gated: {arguments['text']}")


@pytest.fixture
def background(settings: Any, run_tools: Any) -> Iterator[Any]:
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.WEBFETCH_RUNNER = "background"
    settings.WEBFETCH_RUNNER_THREADS = 2
    settings.WEBFETCH_RUNNER_SWEEP_EVERY = 1
    GateTool.gate = threading.Event()
    GateTool.entered = threading.Event()
    GateTool.threads = []
    run_tools.register(GateTool)
    runner.stop()
    yield runner
    GateTool.gate.set()
    runner.wait_idle(30)
    runner.stop()


def test_an_approval_answers_202_before_the_call_runs(background, editor, approver):
    call = runs.request_call("runs_gate", {"text": "later"}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL
    client = APIClient()
    client.force_login(approver)
    response = client.post(f"/api/calls/{call.pk}/approve/", {}, format="json")
    # The tool blocks until the gate opens: had the request run it, it would not be here.
    assert not GateTool.gate.is_set()
    assert response.status_code == 202
    assert response.json()["state"] in (CallState.APPROVED, CallState.RUNNING)
    assert GateTool.entered.wait(30)
    assert ToolCall.objects.get(pk=call.pk).state == CallState.RUNNING
    GateTool.gate.set()
    assert background.wait_idle(30)
    done = ToolCall.objects.get(pk=call.pk)
    assert (done.state, done.result["content"]) == (CallState.SUCCEEDED, "gated: later")
    assert GateTool.threads and GateTool.threads[0].startswith("webfetch-runner-")
    assert done.worker.startswith("in-process:")


def test_a_call_approved_at_request_time_runs_on_the_runner(background, editor):
    GateTool.needs_approval = False
    try:
        call = runs.request_call("runs_gate", {"text": "now"}, user=editor)
        assert call.state == CallState.APPROVED
        GateTool.gate.set()
        assert background.wait_idle(30)
    finally:
        GateTool.needs_approval = True
    assert ToolCall.objects.get(pk=call.pk).state == CallState.SUCCEEDED


def test_the_runner_sweep_takes_up_a_call_whose_worker_was_lost(background, editor, settings):
    """A web process killed mid-call leaves a ``running`` call with a lease; the next
    process's runner sweeps at start and retries it (a read tool, once)."""
    GateTool.gate.set()
    call = runs.request_call("runs_echo", {"text": "lost"}, user=editor)
    past = timezone.now() - timedelta(seconds=5)
    ToolCall.objects.filter(pk=call.pk).update(
        state=CallState.RUNNING,
        attempts=1,
        started_at=past,
        lease_expires_at=past,
        worker="in-process:gone:1",
        decided_at=past,
    )
    background.start()
    deadline = threading.Event()
    for _ in range(300):
        current = ToolCall.objects.get(pk=call.pk)
        if current.finished:
            break
        deadline.wait(0.1)
    current = ToolCall.objects.get(pk=call.pk)
    assert (current.state, current.attempts) == (CallState.SUCCEEDED, 2)
    assert current.result["content"] == "echo: lost"


def test_a_lost_message_is_queued_again_by_the_sweep(background, editor, settings):
    """An approved call whose runner queue died with its process is run again."""
    settings.WEBFETCH_REQUEUE_AFTER = 1
    call = runs.request_call("runs_echo", {"text": "queued"}, user=editor)
    past = timezone.now() - timedelta(seconds=5)
    ToolCall.objects.filter(pk=call.pk).update(
        state=CallState.APPROVED, queued_at=past, decided_at=past
    )
    background.start()
    for _ in range(300):
        if ToolCall.objects.get(pk=call.pk).finished:
            break
        threading.Event().wait(0.1)
    assert ToolCall.objects.get(pk=call.pk).state == CallState.SUCCEEDED


@pytest.mark.inline_runner(
    "a test of WEBFETCH_RUNNER = 'inline' itself: the call runs in the request"
)
def test_inline_mode_runs_in_the_request(settings, run_tools, editor, approver):
    settings.ROOT_URLCONF = "tests.runs.urls"
    assert settings.WEBFETCH_RUNNER == "inline"
    call = runs.request_call("runs_echo", {"text": "here"}, user=editor)
    client = APIClient()
    client.force_login(approver)
    response = client.post(f"/api/calls/{call.pk}/approve/", {}, format="json")
    assert (response.status_code, response.json()["state"]) == (200, CallState.SUCCEEDED)
    assert not runner.running


def test_a_bad_runner_setting_is_refused(settings):
    from django_webfetch.conf import conf
    from django_webfetch.exceptions import WebFetchConfigurationError

    settings.WEBFETCH_RUNNER = "threads"
    with pytest.raises(WebFetchConfigurationError, match="WEBFETCH_RUNNER"):
        assert conf.WEBFETCH_RUNNER
