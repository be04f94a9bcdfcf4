"""Row locking where the database has it (PostgreSQL): a second writer waits for the first
and then sees its outcome.  SQLite has no row locks (``select_for_update`` is a no-op);
there the compare-and-set in ``runs.transition`` decides, see test_state_machine.py.

These run in the PostgreSQL session started by test_postgres.py."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]


@pytest.fixture(autouse=True)
def _postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL (tests/runs/test_postgres.py runs this file)")


def test_the_second_writer_waits_for_the_lock(run_tools, editor, approver_factory):
    first, second = approver_factory(), approver_factory()
    call = runs.request_call("runs_echo", {"text": "lock"}, user=editor)
    holding = threading.Event()
    timings: dict[str, float] = {}
    outcomes: dict[str, object] = {}

    def slow_check(row):
        holding.set()
        time.sleep(0.6)  # keeps the row lock for a while

    def writer_a():
        try:
            outcomes["a"] = runs.transition(
                call.pk, CallState.DENIED, check=slow_check, decided_by=first
            )
        finally:
            connection.close()

    def writer_b():
        holding.wait(5)
        start = time.monotonic()
        try:
            outcomes["b"] = runs.approve(call.pk, by=second)
        except runs.InvalidTransition as exc:
            outcomes["b"] = exc
        finally:
            timings["b"] = time.monotonic() - start
            connection.close()

    threads = [threading.Thread(target=writer_a), threading.Thread(target=writer_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert isinstance(outcomes["a"], ToolCall)
    # B blocked on A's row lock, then read A's committed state: a plain refusal, not a
    # lost compare-and-set.
    assert timings["b"] >= 0.4
    assert isinstance(outcomes["b"], runs.InvalidTransition)
    assert str(outcomes["b"]) == "a denied call cannot become approved"
    assert ToolCall.objects.get(pk=call.pk).state == CallState.DENIED


@pytest.mark.parametrize("round_", range(10))
def test_many_approvers_at_once(run_tools, editor, approver_factory, round_):
    approvers = [approver_factory() for _ in range(4)]
    call = runs.request_call("runs_echo", {"text": "race"}, user=editor)
    barrier = threading.Barrier(len(approvers))
    outcomes: list[object] = []

    def decide(index, user):
        try:
            barrier.wait()
            action = runs.approve if index % 2 == 0 else runs.deny
            outcomes.append(action(call.pk, by=user))
        except Exception as exc:  # noqa: BLE001 - the outcome is the point
            outcomes.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(i, u)) for i, u in enumerate(approvers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    won = [o for o in outcomes if isinstance(o, ToolCall)]
    lost = [o for o in outcomes if isinstance(o, runs.InvalidTransition)]
    assert len(won) == 1 and len(lost) == 3, outcomes
    row = ToolCall.objects.get(pk=call.pk)
    assert row.decided_by_id == won[0].decided_by.pk
