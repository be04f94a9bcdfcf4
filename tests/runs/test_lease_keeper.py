"""Issue 33, item 6: one heartbeat per process renews every lease the process holds
(``durable.keeper``), so a short lease (``WEBFETCH_LEASE_SECONDS``) tells a dead holder
anywhere from a live one; the step deadline ends a live holder's stuck step.

The beat is one ``UPDATE`` per leased model and a compare-and-set: it renews only running
records held under this process's labels whose step is within its deadline, never another
worker's, a released one, a finished one or a stuck one.  The sweep takes over exactly the
records ``lost()`` calls lost (lease run out, or step deadline passed).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from django_webfetch import runs
from django_webfetch.assistant.models import AssistantRun
from django_webfetch.assistant.services import create_conversation
from django_webfetch.models import CallState, ToolCall
from django_webfetch.runs.durable import keeper, lease_lost, worker_label
from django_webfetch.runs.recover import out_of_time
from django_webfetch.runs.state import lost

real_db = pytest.mark.django_db(transaction=True, serialized_rollback=True)

OTHER = "in-process:elsewhere:4242~0123abcd.4026531836.99"


def _call(**fields: Any) -> ToolCall:
    fields.setdefault("state", CallState.RUNNING)
    fields.setdefault("attempts", 1)
    return ToolCall.objects.create(
        tool="runs_echo", arguments={"text": "hi"}, requires_approval=True, **fields
    )


@real_db
def test_one_beat_renews_every_record_the_process_holds_and_nothing_else(
    editor, django_assert_num_queries
):
    mine = keeper.hold(f"in-process:{worker_label()}")
    now = timezone.now()
    soon, later = now + timedelta(seconds=3), now + timedelta(minutes=5)
    held = [_call(user=editor, worker=mine, lease_expires_at=soon) for _ in range(3)]
    no_deadline = _call(user=editor, worker=mine, lease_expires_at=soon)
    run = AssistantRun.objects.create(
        conversation=create_conversation(editor),
        user=editor,
        state="running",
        worker=mine,
        lease_expires_at=soon,
        step_deadline=later,
    )
    ToolCall.objects.filter(pk__in=[c.pk for c in held]).update(step_deadline=later)
    others = _call(user=editor, worker=OTHER, lease_expires_at=soon, step_deadline=later)
    stuck = _call(user=editor, worker=mine, lease_expires_at=soon, step_deadline=now)
    released = _call(user=editor, state=CallState.APPROVED, worker=mine, lease_expires_at=None)
    finished = _call(user=editor, state=CallState.SUCCEEDED, worker=mine, lease_expires_at=soon)

    with django_assert_num_queries(2):  # one UPDATE per leased model, however many records
        renewed = keeper.beat()
    assert renewed == 5
    for row in [*held, no_deadline]:
        row.refresh_from_db()
        assert row.lease_expires_at > soon
    run.refresh_from_db()
    assert run.lease_expires_at > soon
    for row, before in ((others, soon), (stuck, soon), (released, None), (finished, soon)):
        row.refresh_from_db()
        assert row.lease_expires_at == before
    # A process that holds nothing any more renews nothing (its heartbeat rests).
    keeper.forget()
    assert keeper.labels() == []
    with django_assert_num_queries(0):
        assert keeper.beat() == 0


@real_db
def test_a_live_holders_stuck_step_is_taken_over_at_its_deadline(editor, settings):
    """The holder lives (its heartbeat would renew the lease), but its step outlived its
    deadline: lost, and the sweep recovers it although its lease has not run out."""
    settings.WEBFETCH_RUNNER = "inline"  # no retry off a request: the call fails
    mine = keeper.hold(f"in-process:{worker_label()}")
    now = timezone.now()
    call = _call(
        user=editor,
        worker=mine,
        lease_expires_at=now + timedelta(minutes=1),
        step_deadline=now - timedelta(seconds=1),
    )
    assert keeper.beat() == 0  # never renewed past its deadline
    assert lost(call)
    assert runs.recover_lost() == 1
    call.refresh_from_db()
    assert (call.state, call.reason) == (CallState.FAILED, "worker_lost")


OFFSETS = st.one_of(st.none(), st.integers(min_value=-120, max_value=120))


@real_db
@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    own=st.booleans(),
    state=st.sampled_from([CallState.RUNNING, CallState.APPROVED, CallState.SUCCEEDED]),
    lease=OFFSETS,
    deadline=OFFSETS,
)
def test_the_beat_and_the_sweep_never_disagree(editor, own, state, lease, deadline):
    """Whatever the record's lease and deadline: the beat renews exactly a running record
    of this process within its deadline, and then the sweep never takes it; the sweep's
    query selects exactly the records ``lost()`` calls lost."""
    ToolCall.objects.all().delete()
    label = keeper.hold(f"in-process:{worker_label()}") if own else OTHER
    now = timezone.now()
    call = _call(
        user=editor,
        state=state,
        worker=label,
        lease_expires_at=None if lease is None else now + timedelta(seconds=lease),
        step_deadline=None if deadline is None else now + timedelta(seconds=deadline),
    )
    expected = (
        own
        and state == CallState.RUNNING
        and lease is not None
        and (deadline is None or deadline > 0)
    )
    renewed = keeper.beat() if own else 0
    assert renewed == int(expected)
    call.refresh_from_db()
    at = timezone.now()
    running = ToolCall.objects.filter(state=CallState.RUNNING)
    selected = out_of_time(running, at).filter(pk=call.pk).exists()
    assert selected == (lost(call, at) and state == CallState.RUNNING)
    assert selected == (
        state == CallState.RUNNING and lease_lost(call.lease_expires_at, "", at, call.step_deadline)
    )
    if expected:
        assert not selected  # renewed, within its deadline: never taken over
