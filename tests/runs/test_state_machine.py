"""The ToolCall state machine: every allowed and every forbidden transition, and the
services that drive it (request, approve, deny, cancel, expire, execute, recover)."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from django_webfetch.models.calls import FINISHED_STATES, TRANSITIONS
from django_webfetch.runs.execute import finish
from tests.settle import settled_call

from .conftest import EchoTool

ALL_STATES = [s.value for s in CallState]
ALLOWED = [(a, b) for a in ALL_STATES for b in ALL_STATES if b in TRANSITIONS[a]]
FORBIDDEN = [(a, b) for a in ALL_STATES for b in ALL_STATES if b not in TRANSITIONS[a]]


def make_call(state: str = CallState.AWAITING_APPROVAL, **fields: Any) -> ToolCall:
    fields.setdefault("tool", "runs_echo")
    fields.setdefault("arguments", {"text": "hi"})
    # runs_echo needs approval: a row past awaiting_approval was approved by a human
    # (runs.execute treats only that as an approval, review9 F2).
    fields.setdefault("requires_approval", True)
    return ToolCall.objects.create(state=state, **fields)


# -- the table ------------------------------------------------------------------------------


def test_table_covers_every_state_and_names_only_states():
    assert set(TRANSITIONS) == set(ALL_STATES)
    for targets in TRANSITIONS.values():
        assert targets <= set(ALL_STATES)
    assert {"succeeded", "failed", "denied", "expired", "cancelled"} == FINISHED_STATES
    # Every open state can end somehow, and nothing leads back to pending.
    assert all(CallState.PENDING not in t for t in TRANSITIONS.values())


def test_the_documented_path_exists():
    path = ["pending", "awaiting_approval", "approved", "running", "succeeded"]
    for a, b in itertools.pairwise(path):
        assert b in TRANSITIONS[a]


@pytest.mark.parametrize(("current", "target"), ALLOWED)
def test_allowed_transition(db, current, target):
    call = make_call(current)
    changed = runs.transition(call, target)
    assert changed.state == target
    row = ToolCall.objects.get(pk=call.pk)
    assert row.state == target
    if target in FINISHED_STATES:
        assert row.finished_at is not None
        assert row.lease_expires_at is None


@pytest.mark.parametrize(("current", "target"), FORBIDDEN)
def test_forbidden_transition(db, current, target):
    call = make_call(current)
    with pytest.raises(runs.InvalidTransition) as info:
        runs.transition(call, target)
    assert info.value.code == "invalid_transition"
    assert (info.value.current, info.value.target) == (current, target)
    assert ToolCall.objects.get(pk=call.pk).state == current


def test_a_refused_check_changes_nothing(db):
    call = make_call()

    def refuse(row):
        raise runs.ApprovalPermissionDenied()

    with pytest.raises(runs.ApprovalPermissionDenied):
        runs.transition(call, CallState.APPROVED, check=refuse)
    assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL


def test_a_stale_writer_loses(db):
    """The compare-and-set: a writer that read an older state writes nothing."""
    call = make_call()
    ToolCall.objects.filter(pk=call.pk).update(state=CallState.DENIED)
    with pytest.raises(runs.InvalidTransition):
        runs.transition(call, CallState.APPROVED)


def test_nothing_is_deleted(db, run_tools, editor, approver):
    calls = [runs.request_call("runs_echo", {"text": str(i)}, user=editor) for i in range(4)]
    runs.deny(calls[0], by=approver)
    runs.cancel(calls[1], by=editor)
    ToolCall.objects.filter(pk=calls[2].pk).update(expires_at=timezone.now())
    runs.expire_due()
    runs.approve(calls[3], by=approver)
    settled_call(calls[3])
    assert ToolCall.objects.count() == 4
    assert sorted(ToolCall.objects.values_list("state", flat=True)) == [
        "cancelled",
        "denied",
        "expired",
        "succeeded",
    ]


# -- requesting -----------------------------------------------------------------------------


def test_request_a_tool_not_offered(db, run_tools, editor):
    with pytest.raises(runs.ToolNotOfferedError) as info:
        runs.request_call("runs_admin_only", {"text": "x"}, user=editor)
    assert info.value.code == "tool_not_offered"
    with pytest.raises(runs.ToolNotOfferedError):
        runs.request_call("no_such_tool", {}, user=editor)
    with pytest.raises(runs.ToolNotOfferedError):
        runs.request_call("fetch_external_url", {"url": "https://a.example/"}, user=editor)
    # Each refused request stays on record as a finished call that ran nothing.
    refused = ToolCall.objects.order_by("created")
    assert [(c.tool, c.state, c.reason) for c in refused] == [
        ("runs_admin_only", CallState.FAILED, "tool_not_offered"),
        ("no_such_tool", CallState.FAILED, "tool_not_offered"),
        ("fetch_external_url", CallState.FAILED, "tool_not_offered"),
    ]
    assert refused.last().group == "web"
    assert refused.last().arguments == {"url": "https://a.example/"}


def test_invalid_arguments_end_the_call(db, run_tools, editor):
    call = runs.request_call(
        "runs_echo", {"text": 5, "extra": 1}, user=editor, conversation="conv-1"
    )
    assert call.state == CallState.FAILED
    assert call.reason == "invalid_arguments"
    result = call.tool_result()
    assert result.error == "invalid_arguments"
    assert {e["path"] for e in result.meta["errors"]} == {"", "text"}
    assert call.conversation == "conv-1"
    assert not call.requires_approval
    assert EchoTool.executed == []


@pytest.mark.parametrize("arguments", [None, [], "text", 3])
def test_arguments_must_be_an_object(db, run_tools, editor, arguments):
    call = runs.request_call("runs_echo", arguments, user=editor)
    assert call.state == CallState.FAILED
    assert call.reason == "invalid_arguments"


def test_a_call_that_needs_approval_waits(db, run_tools, editor, settings):
    settings.WEBFETCH_APPROVAL_TTL = 600
    before = timezone.now()
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL
    assert call.requires_approval
    assert call.approval_preview["tool"] == "runs_echo"
    assert call.approval_preview["user"] == "editor"
    assert call.approval_preview["group"] == "runs-test"
    assert call.approval_preview["arguments"] == {"text": "hi"}
    assert before + timedelta(seconds=600) <= call.expires_at
    assert call.expires_at <= timezone.now() + timedelta(seconds=600)
    assert call.result is None
    assert EchoTool.executed == []


def test_a_call_without_approval_runs_in_process(db, run_tools, editor, settings):
    settings.WEBFETCH_ASYNC_RUNS = False
    EchoTool.needs_approval = False
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    # Approved at request time, it runs on the background runner after the commit.
    assert call.state == CallState.APPROVED
    call = settled_call(call)
    assert call.state == CallState.SUCCEEDED
    assert not call.requires_approval
    assert call.tool_result().content == "echo: hi"
    assert call.tool_result().meta == {"call": str(call.pk)}
    assert call.attempts == 1
    assert call.worker.startswith("in-process:")
    assert call.started_at and call.finished_at and call.queued_at


def test_a_write_always_needs_approval(db, run_tools, editor):
    """WriteTool's own rule says "no approval"; the write effect overrides it."""
    call = runs.request_call("runs_write", {"text": "x"}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL


def test_a_tool_refusal_fails_the_call_with_its_code(db, run_tools, editor, approver):
    call = runs.request_call("runs_echo", {"text": "refuse"}, user=editor)
    call = settled_call(runs.approve(call, by=approver))
    assert call.state == CallState.FAILED
    assert call.reason == "refused_by_tool"
    assert call.tool_result().error == "refused_by_tool"


def test_a_tool_exception_is_a_failed_call(db, run_tools, editor, approver):
    call = settled_call(
        runs.approve(runs.request_call("runs_echo", {"text": "explode"}, user=editor), by=approver)
    )
    assert call.state == CallState.FAILED
    assert call.reason == "internal_error"


def test_a_tool_withdrawn_after_approval_does_not_run(
    db, run_tools, editor, approver, group_factory
):
    call = runs.request_call("runs_echo", {"text": "x"}, user=editor)
    group_factory("runs-test", enabled=False)  # the operator disables the group meanwhile
    call = settled_call(runs.approve(call, by=approver))
    assert call.state == CallState.FAILED
    assert call.reason == "tool_unavailable"
    assert EchoTool.executed == []


# -- decisions ------------------------------------------------------------------------------


def test_approve(db, run_tools, editor, approver):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    call = runs.approve(call, by=approver, comment="looks fine")
    assert call.state == CallState.APPROVED  # the runner takes it after the commit
    call = settled_call(call)
    assert call.state == CallState.SUCCEEDED
    assert call.decided_by == approver
    assert call.decision_comment == "looks fine"
    assert call.decided_at is not None
    assert EchoTool.executed == [{"text": "hi"}]


def test_approve_twice(db, run_tools, editor, approver):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    runs.approve(call, by=approver)
    with pytest.raises(runs.InvalidTransition):
        runs.approve(call, by=approver)
    assert settled_call(call).state == CallState.SUCCEEDED
    with pytest.raises(runs.InvalidTransition):
        runs.approve(call, by=approver)
    assert len(EchoTool.executed) == 1


def test_deny(db, run_tools, editor, approver):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    call = runs.deny(call, by=approver, comment="no")
    assert call.state == CallState.DENIED
    assert call.reason == "approval_denied"
    assert call.tool_result().error == "approval_denied"
    assert call.decision_comment == "no"
    assert EchoTool.executed == []
    with pytest.raises(runs.InvalidTransition):
        runs.approve(call, by=approver)


@pytest.mark.parametrize("decide", [runs.approve, runs.deny])
def test_only_approvers_decide(db, run_tools, editor, user_factory, decide):
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    other_editor = user_factory(staff=True)
    with pytest.raises(runs.ApprovalPermissionDenied) as info:
        decide(call, by=other_editor)
    assert info.value.code == "approval_not_permitted"
    assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL


@pytest.mark.parametrize("decide", [runs.approve, runs.deny])
def test_no_self_approval(db, run_tools, approver, superuser, settings, decide):
    for user in (approver, superuser):
        call = runs.request_call("runs_echo", {"text": "mine"}, user=user)
        with pytest.raises(runs.SelfApprovalDenied) as info:
            decide(call, by=user)
        assert info.value.code == "self_approval"
        assert not runs.can_approve(user, call)
    settings.WEBFETCH_ALLOW_SELF_APPROVAL = True
    call = runs.request_call("runs_echo", {"text": "mine"}, user=approver)
    assert runs.can_approve(approver, call)
    assert decide(call, by=approver).decided_by == approver


def test_inactive_approver(db, run_tools, editor, approver):
    approver.is_active = False
    approver.save()
    call = runs.request_call("runs_echo", {"text": "hi"}, user=editor)
    with pytest.raises(runs.ApprovalPermissionDenied):
        runs.approve(call, by=approver)


def test_cancel(db, run_tools, editor, approver, user_factory):
    first = runs.request_call("runs_echo", {"text": "1"}, user=editor)
    with pytest.raises(runs.CancelPermissionDenied):
        runs.cancel(first, by=user_factory(staff=True))
    call = runs.cancel(first, by=editor, comment="changed my mind")
    assert call.state == CallState.CANCELLED
    assert call.tool_result().error == "cancelled"
    second = runs.request_call("runs_echo", {"text": "2"}, user=editor)
    assert runs.cancel(second, by=approver).state == CallState.CANCELLED
    with pytest.raises(runs.InvalidTransition):
        runs.approve(second, by=approver)


def test_cannot_cancel_a_running_or_finished_call(db, run_tools, editor):
    for state in (CallState.RUNNING, CallState.SUCCEEDED):
        call = make_call(state, user=editor)
        with pytest.raises(runs.InvalidTransition):
            runs.cancel(call, by=editor)


# -- expiry ---------------------------------------------------------------------------------


def test_expire_due(db, run_tools, editor, approver):
    due = runs.request_call("runs_echo", {"text": "old"}, user=editor)
    fresh = runs.request_call("runs_echo", {"text": "new"}, user=editor)
    ToolCall.objects.filter(pk=due.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert runs.expire_due() == 1
    due.refresh_from_db()
    fresh.refresh_from_db()
    assert due.state == CallState.EXPIRED
    assert due.reason == "approval_expired"
    assert due.tool_result().error == "approval_expired"
    assert fresh.state == CallState.AWAITING_APPROVAL
    assert runs.expire_due() == 0


def test_approving_an_expired_call_expires_it(db, run_tools, editor, approver):
    call = runs.request_call("runs_echo", {"text": "late"}, user=editor)
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now())
    with pytest.raises(runs.CallExpiredError) as info:
        runs.approve(call, by=approver)
    assert info.value.code == "expired"
    assert ToolCall.objects.get(pk=call.pk).state == CallState.EXPIRED
    assert EchoTool.executed == []


def test_expiry_is_enforced_on_read(db, run_tools, editor):
    call = runs.request_call("runs_echo", {"text": "late"}, user=editor)
    assert runs.refresh(call).state == CallState.AWAITING_APPROVAL
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now())
    call.refresh_from_db()
    assert runs.refresh(call).state == CallState.EXPIRED


def test_default_ttl_is_a_day(db, run_tools, editor):
    call = runs.request_call("runs_echo", {"text": "x"}, user=editor)
    assert abs((call.expires_at - call.created) - timedelta(days=1)) < timedelta(seconds=5)


# -- execute: idempotence and lost workers ---------------------------------------------------


@pytest.mark.parametrize("state", sorted(set(ALL_STATES) - {"approved", "running"}))
def test_execute_leaves_other_states_alone(db, run_tools, editor, state):
    call = make_call(state, user=editor)
    outcome = runs.execute(call.pk)
    assert outcome.action == "noop"
    assert ToolCall.objects.get(pk=call.pk).state == state
    assert EchoTool.executed == []


def test_execute_unknown_call(db):
    assert runs.execute("00000000-0000-0000-0000-000000000000").action == "noop"
    assert runs.execute("not-a-uuid").action == "noop"


def test_execute_a_call_held_by_a_live_attempt(db, run_tools, editor):
    lease = timezone.now() + timedelta(seconds=30)
    call = make_call(CallState.RUNNING, user=editor, attempts=1, lease_expires_at=lease)
    outcome = runs.execute(call.pk, redelivered=True)
    assert outcome.action == "busy"
    assert 29 <= outcome.retry_after <= 30
    assert ToolCall.objects.get(pk=call.pk).state == CallState.RUNNING


def _lost_call(user, attempts):
    return make_call(
        CallState.RUNNING,
        user=user,
        attempts=attempts,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )


def _queued(callbacks: list[Any]) -> list[Any]:
    """The on-commit callbacks that queue work (not the wake-ups of ``runs.settle``)."""
    return [c for c in callbacks if getattr(c, "__module__", "") != "django_webfetch.runs.settle"]


def test_a_redelivered_lost_call_is_retried_in_that_task(
    db, run_tools, editor, settings, django_capture_on_commit_callbacks
):
    settings.WEBFETCH_ASYNC_RUNS = True
    call = _lost_call(editor, attempts=1)
    # In a transaction, so that what is queued on commit is seen (and not yet run).
    with transaction.atomic(), django_capture_on_commit_callbacks() as callbacks:
        outcome = runs.execute(call.pk, redelivered=True)
    assert (outcome.action, outcome.state) == ("ran", CallState.SUCCEEDED)
    assert _queued(callbacks) == []  # nothing queued: the redelivered task ran the retry itself
    row = ToolCall.objects.get(pk=call.pk)
    assert (row.state, row.attempts) == (CallState.SUCCEEDED, 2)
    assert len(EchoTool.executed) == 1


def test_the_sweep_queues_a_lost_call_again(
    db, run_tools, editor, django_capture_on_commit_callbacks
):
    call = _lost_call(editor, attempts=1)
    # In a transaction: the call is queued again on commit, not before.
    with transaction.atomic():
        with django_capture_on_commit_callbacks() as callbacks:
            assert runs.sweep().recovered == 1
        assert len(_queued(callbacks)) == 1  # queued again
        row = ToolCall.objects.get(pk=call.pk)
        assert (row.state, row.lease_expires_at) == (CallState.APPROVED, None)
    # After the commit the background runner runs it, once.
    row = settled_call(call)
    assert (row.state, row.attempts) == (CallState.SUCCEEDED, 2)
    assert len(EchoTool.executed) == 1


def test_a_call_lost_twice_fails(db, run_tools, editor, settings):
    settings.WEBFETCH_ASYNC_RUNS = True
    call = _lost_call(editor, attempts=2)
    outcome = runs.execute(call.pk, redelivered=True)
    assert (outcome.action, outcome.state) == ("recovered", CallState.FAILED)
    row = ToolCall.objects.get(pk=call.pk)
    assert row.reason == "worker_lost"
    assert row.tool_result().error == "worker_lost"


def test_a_lost_write_is_never_repeated(db, run_tools, editor, settings):
    settings.WEBFETCH_ASYNC_RUNS = True
    call = _lost_call(editor, attempts=1)
    ToolCall.objects.filter(pk=call.pk).update(tool="runs_write")
    runs.recover_lost()
    assert ToolCall.objects.get(pk=call.pk).reason == "worker_lost"


@pytest.mark.inline_runner(
    "about WEBFETCH_RUNNER='inline': no runner to retry a lost call, so it fails "
    "(the background runner retries it: test_the_sweep_queues_a_lost_call_again)"
)
def test_in_process_a_lost_call_fails(db, run_tools, editor):
    """Without workers there is nobody to retry: the call fails (found by the sweep)."""
    call = _lost_call(editor, attempts=1)
    report = runs.sweep()
    assert report.recovered == 1
    assert ToolCall.objects.get(pk=call.pk).reason == "worker_lost"


def test_lost_calls_are_recovered_on_read(db, run_tools, editor):
    """A read finds the lost attempt: the call is queued again (its retry runs after the
    commit), and a call lost on its last attempt fails."""
    call = _lost_call(editor, attempts=1)
    with transaction.atomic():
        assert runs.refresh(call).state == CallState.APPROVED
    row = settled_call(call)
    assert (row.state, row.attempts) == (CallState.SUCCEEDED, 2)
    last = _lost_call(editor, attempts=2)
    failed = runs.refresh(last)
    assert (failed.state, failed.reason) == (CallState.FAILED, "worker_lost")


def test_the_result_of_a_superseded_attempt_is_discarded(db, run_tools, editor):
    from django_webfetch.tools import ToolResult

    call = make_call(
        CallState.RUNNING,
        user=editor,
        attempts=2,
        lease_expires_at=timezone.now() + timedelta(seconds=30),
    )
    outcome = finish(call.pk, 1, ToolResult(content="late"))
    assert outcome.action == "discarded"
    row = ToolCall.objects.get(pk=call.pk)
    assert row.state == CallState.RUNNING
    assert row.result is None


def test_stale_queued_calls_are_queued_again(db, run_tools, editor, celery_eager):
    # Eager Celery: a queued message runs at once, so a re-queued call ends succeeded.
    old = make_call(
        CallState.APPROVED,
        user=editor,
        arguments={"text": "old"},
        queued_at=timezone.now() - timedelta(seconds=31),
    )
    fresh = make_call(
        CallState.APPROVED, user=editor, arguments={"text": "new"}, queued_at=timezone.now()
    )
    assert runs.sweep().requeued == 1
    old.refresh_from_db()
    fresh.refresh_from_db()
    assert (old.state, fresh.state) == (CallState.SUCCEEDED, CallState.APPROVED)


def test_time_limits_follow_the_fetch_budget(settings):
    settings.WEBFETCH_TIMEOUT = 7
    soft, hard = runs.time_limits()
    assert 7 < soft < hard < runs.lease_seconds()


# -- races (two database connections) -------------------------------------------------------


def _race(*actions):
    """Run the actions at once, each in its own thread (its own DB connection)."""
    barrier = threading.Barrier(len(actions))
    outcomes: list[Any] = [None] * len(actions)

    def run(index, action):
        try:
            barrier.wait()
            outcomes[index] = action()
        except Exception as exc:  # noqa: BLE001 - the outcome is the point
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return outcomes


real_db = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@real_db
@pytest.mark.parametrize("round_", range(3))
def test_two_approvers_at_once(run_tools, editor, approver_factory, round_):
    first, second = approver_factory(), approver_factory()
    call = runs.request_call("runs_echo", {"text": "race"}, user=editor)
    outcomes = _race(lambda: runs.approve(call.pk, by=first), lambda: runs.deny(call.pk, by=second))
    won = [o for o in outcomes if isinstance(o, ToolCall)]
    lost = [o for o in outcomes if isinstance(o, runs.InvalidTransition)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    row = settled_call(call)
    assert row.decided_by_id == won[0].decided_by.pk
    assert row.state in (CallState.SUCCEEDED, CallState.DENIED)
    assert len(EchoTool.executed) == (1 if row.state == CallState.SUCCEEDED else 0)


@real_db
@pytest.mark.parametrize("offset", [-0.05, 0.0, 0.002, 0.01])
def test_approval_racing_expiry(run_tools, editor, approver, offset):
    """The approval lands around the moment the request expires: one outcome, never both."""
    call = runs.request_call("runs_echo", {"text": "race"}, user=editor)
    ToolCall.objects.filter(pk=call.pk).update(
        expires_at=timezone.now() + timedelta(seconds=offset)
    )
    approved, expired = _race(lambda: runs.approve(call.pk, by=approver), runs.expire_due)
    row = settled_call(call)
    if row.state == CallState.EXPIRED:
        assert isinstance(approved, runs.InvalidTransition)
        assert EchoTool.executed == []
        assert row.decided_by is None
    else:
        assert row.state == CallState.SUCCEEDED
        assert isinstance(approved, ToolCall)
        assert expired == 0
        assert len(EchoTool.executed) == 1
