"""The process's one notifier (``assistant.watch``): its work is one query per round for
every waiter together, a write wakes a waiter, and nobody waiting means no connection."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.db import connections

from django_webfetch.assistant import watch
from django_webfetch.assistant.models import AssistantRun, Conversation
from django_webfetch.assistant.state import event

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def make_run(editor: Any) -> Any:
    def make(state: str = "running") -> AssistantRun:
        conversation = Conversation.objects.create(owner=editor)
        return AssistantRun.objects.create(conversation=conversation, user=editor, state=state)

    return make


def test_one_read_wakes_every_waiter(make_run):
    """Two hundred waiters on ten runs that all moved: one query answers every one."""
    runs = [make_run() for _ in range(10)]
    for run in runs:
        event(run.pk, "started", {})

    async def scenario() -> tuple[list[bool], int]:
        woken = await asyncio.gather(
            *(watch.wait_for_event(runs[n % 10].pk, 0, 60) for n in range(200))
        )
        return list(woken), watch.notifier().reads

    woken, reads = asyncio.run(scenario())
    assert woken == [True] * 200
    assert reads == 1


def test_finished_and_missing_runs_wake_their_waiters(make_run):
    done = make_run(state="completed")

    async def scenario() -> list[bool]:
        return list(
            await asyncio.gather(
                watch.wait_for_event(done.pk, 0, 60),
                watch.wait_for_event("00000000-0000-0000-0000-000000000000", 0, 60),
            )
        )

    assert asyncio.run(scenario()) == [True, True]


def test_a_write_wakes_the_waiter_and_a_quiet_run_times_out(make_run):
    run, quiet = make_run(), make_run()
    writer = threading.Timer(0.2, lambda: (event(run.pk, "started", {}), connections.close_all()))

    async def scenario() -> tuple[bool, bool, Any]:
        writer.start()
        woken, timed_out = await asyncio.gather(
            watch.wait_for_event(run.pk, 0, 120), watch.wait_for_event(quiet.pk, 0, 0.5)
        )
        notifier = watch.notifier()
        if notifier.task is not None:
            await notifier.task  # nobody waits: the task ends
        held = await asyncio.get_running_loop().run_in_executor(
            notifier.executor, lambda: connections["default"].connection
        )
        return woken, timed_out, held

    woken, timed_out, held = asyncio.run(scenario())
    writer.join()
    assert woken is True and timed_out is False
    # Nobody waits: the notifier's connection is closed, not kept.
    assert held is None
