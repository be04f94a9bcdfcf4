"""A web process killed mid-run: its runs and calls are taken over in seconds (issue 33,
item 6).

uvicorn (ASGI, the background runner) is killed with ``kill -9`` while it holds runs and
calls; the next process finishes every one of them:

- on the same machine, its first sweep finds the holder's process gone
  (``durable.holder_gone``: same boot id and PID namespace, PID gone) and takes the runs
  over at once;
- a holder that looks like another machine (started in a PID namespace of its own, so
  ``/proc`` cannot tell whether it lives) is judged by its lease alone: the lease is short
  (``WEBFETCH_LEASE_SECONDS``, 15 s, renewed by one heartbeat per process), and the new
  process's runner sweeps just after the first lease held elsewhere runs out;
- a holder that is alive and healthy is never taken over, however much longer than a
  lease its steps take.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest

from django_webfetch.models import AssistantRun, CallState, ToolCall
from django_webfetch.runs import request_call
from django_webfetch.runs.durable import holder_gone
from tests.asgi import CSRF, free_port, post_message
from tests.runs.infra import wait_for
from tests.settle import SAFETY_NET

from .provider import Turn
from .servers import serve, served, server_env, stop
from .test_streaming import loopback_only_to, session_cookie


def _env(lab_settings, **overrides):
    # One request at a time to the provider: a second run waits for its turn on the
    # provider loop (leased by the first process, renewed, no thread held: ADR 0043).
    return server_env(
        lab_settings,
        **{
            "WEBFETCH_TEST_RUNNER_THREADS": "1",
            "WEBFETCH_TEST_PROVIDER_CONCURRENCY": "1",
            **overrides,
        },
    )


def _approver(user_factory):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = user_factory(staff=True, username="approver")
    user.user_permissions.add(
        Permission.objects.get(
            codename="approve_toolcall", content_type__app_label="django_webfetch"
        )
    )
    return get_user_model().objects.get(pk=user.pk)


def _approve(url, approver, call):
    """The approver approves ``call`` on the server at ``url``: that server runs it."""
    with httpx.Client(base_url=url, cookies=session_cookie(approver), timeout=30) as client:
        response = client.post(
            f"/api/calls/{call.pk}/approve/", json={}, headers={"X-CSRFToken": CSRF}
        )
    assert response.status_code in (200, 202), response.text


def _requests_to(lab, path):
    return [r for r in lab.requests if r.path.startswith(path)]


def test_runs_of_a_killed_process_are_taken_over_at_once(provider, editor, lab_settings, tmp_path):
    hold = threading.Event()
    provider.add(
        Turn(text="never delivered", hold=hold, repeat=Turn(text="first, after the restart")),
        Turn(text="second, after the restart"),
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    cookies = session_cookie(editor)
    env = _env(lab_settings)
    first = second = None
    with loopback_only_to(lab_settings, url):
        try:
            first = serve(env, port, log)
            wait_for(lambda: served(url), 60, interval=0.2, what="the first server")
            with httpx.Client(base_url=url, cookies=cookies, timeout=30) as client:
                held = post_message(client, "one").json()["id"]
                assert provider.arrived.wait(30), log.read_text(errors="replace")[-3000:]
                queued = post_message(client, "two").json()["id"]
            # The first run's request is held by the provider; the second run waits for
            # the provider's one slot, both leased by the first process.
            wait_for(
                lambda: AssistantRun.objects.get(pk=queued).lease_expires_at is not None,
                SAFETY_NET,
                interval=0.2,
                what="the second run to wait for the provider",
            )
            held_run = AssistantRun.objects.get(pk=held)
            queued_run = AssistantRun.objects.get(pk=queued)
            for run in (held_run, queued_run):
                assert run.state == "running" and run.lease_expires_at is not None
                assert f":{first.pid}~" in run.worker
            assert len(provider.requests) == 1  # the second waits its turn, unsent

            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
            hold.set()
            restarted = time.monotonic()
            second = serve(env, port, log)
            wait_for(lambda: served(url), 60, interval=0.2, what="the second server")
            served_at = time.monotonic()

            # When each step of the recovery was seen (seconds after the new server answered),
            # for the report; nothing is asserted on them.
            marks: dict[str, float] = {}

            def every_run_final() -> bool:
                a = AssistantRun.objects.get(pk=held)
                b = AssistantRun.objects.get(pk=queued)
                now = round(time.monotonic() - served_at, 1)
                if f":{second.pid}~" in a.worker:
                    marks.setdefault("A taken", now)
                if a.finished:
                    marks.setdefault("A done", now)
                if b.lease_expires_at is not None:
                    marks.setdefault("B taken", now)
                if b.finished:
                    marks.setdefault("B done", now)
                if a.events.filter(kind="step").exists():
                    marks.setdefault("A step", now)
                return all(AssistantRun.objects.get(pk=pk).finished for pk in (held, queued))

            wait_for(every_run_final, SAFETY_NET, interval=0.2, what="both runs to finish")
            took, after_served = time.monotonic() - restarted, time.monotonic() - served_at
        finally:
            hold.set()
            stop(first)
            stop(second)
    print(marks)
    print(
        f"every run final {took:.1f} s after the restart "
        f"({after_served:.1f} s after the new server answered)"
    )
    rows = {pk: AssistantRun.objects.get(pk=pk) for pk in (held, queued)}
    assert rows[held].state == "completed", log.read_text(errors="replace")[-3000:]
    assert rows[queued].state == "completed"
    # The recovery path, not the lease: both runs were taken over before the leases the
    # killed process held on them would have run out (its identity is gone).
    for pk, before in ((held, held_run), (queued, queued_run)):
        lost = rows[pk].events.get(kind="worker_lost")
        assert lost.created < before.lease_expires_at
    # One request lost with the process, its repeat, the second run's: nothing else.
    assert len(provider.requests) == 3


#: The lab page the tool call fetches: its answer comes after this many seconds of silence.
LATE = 3
RUNS_FINAL = (CallState.SUCCEEDED, CallState.FAILED)


@pytest.mark.long  # tens of seconds: started first (tests/conftest.py)
def test_a_killed_holder_on_another_machine_is_taken_over_within_its_lease(
    provider, editor, user_factory, web, lab_settings, tmp_path
):
    """The holder runs in a PID namespace of its own (it looks like another machine: no
    sweep can judge it by ``/proc``) and holds a run inside a hung provider request and a
    tool call in the middle of its fetch when it is killed.  The next process (a real
    server, its runner and sweep, as shipped: lease 15 s, sweep period 15 s) finishes both
    within 20 s of the restart, and nothing ran twice at once."""
    hold = threading.Event()
    provider.add(Turn(text="never delivered", hold=hold, repeat=Turn(text="after the restart")))
    approver = _approver(user_factory)
    page = lab_settings.url("news.lab.example", f"/late?seconds={LATE}")
    call = request_call("fetch_external_url", {"url": page}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL, call.result
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    # The shipped runner threads (4): the call's retry and the run's repeat run side by side.
    env = _env(lab_settings, WEBFETCH_TEST_RUNNER_THREADS="4")
    first = second = None
    with loopback_only_to(lab_settings, url):
        try:
            first = serve(env, port, log, own_pid_namespace=True)
            wait_for(lambda: served(url), 60, interval=0.2, what="the first server")
            with httpx.Client(base_url=url, cookies=session_cookie(editor), timeout=30) as client:
                held = post_message(client, "one").json()["id"]
            assert provider.arrived.wait(30), log.read_text(errors="replace")[-3000:]
            _approve(url, approver, call)
            wait_for(
                lambda: (
                    _requests_to(lab_settings, "/late")
                    and ToolCall.objects.get(pk=call.pk).state == CallState.RUNNING
                ),
                SAFETY_NET,
                interval=0.05,
                what="the call's fetch to start",
            )
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
            killed = time.monotonic()
            run_before = AssistantRun.objects.get(pk=held)
            call_before = ToolCall.objects.get(pk=call.pk)
            # Killed mid-step: both still held by the dead process, which no sweep can
            # judge from /proc (another PID namespace): only the lease tells.
            assert run_before.state == "running" and run_before.lease_expires_at is not None
            assert call_before.state == CallState.RUNNING and call_before.attempts == 1
            assert run_before.worker == call_before.worker
            assert not holder_gone(call_before.worker)
            hold.set()

            second = serve(env, port, log)
            restarted = time.monotonic()
            wait_for(lambda: served(url), 60, interval=0.2, what="the second server")
            marks: dict[str, float] = {"served": round(time.monotonic() - restarted, 1)}

            def all_final() -> bool:
                run = AssistantRun.objects.get(pk=held)
                row = ToolCall.objects.get(pk=call.pk)
                now = round(time.monotonic() - restarted, 1)
                if run.worker != run_before.worker and run.lease_expires_at is not None:
                    marks.setdefault("run taken", now)
                if row.attempts == 2:
                    marks.setdefault("call taken", now)
                if run.finished:
                    marks.setdefault("run done", now)
                if row.state in (CallState.SUCCEEDED, CallState.FAILED):
                    marks.setdefault("call done", now)
                return run.finished and row.state in (CallState.SUCCEEDED, CallState.FAILED)

            wait_for(all_final, SAFETY_NET, interval=0.1, what="the run and the call to finish")
            took = time.monotonic() - restarted
            after_kill = time.monotonic() - killed
        finally:
            hold.set()
            stop(first)
            stop(second)
    print(marks)
    print(
        f"every run and call final {took:.1f} s after the restart "
        f"({after_kill:.1f} s after the kill)"
    )
    run = AssistantRun.objects.get(pk=held)
    row = ToolCall.objects.get(pk=call.pk)
    assert run.state == "completed", log.read_text(errors="replace")[-3000:]
    assert row.state == CallState.SUCCEEDED, row.result
    # Taken over by the lease, which ran out: not before it (the holder could not be
    # judged), and within one lease of the kill.
    lost = run.events.get(kind="worker_lost")
    assert lost.created >= run_before.lease_expires_at
    assert row.attempts == 2
    # Nothing ran twice: one request lost with the process and its one repeat, for the
    # provider and for the page alike.
    assert len(provider.requests) == 2
    assert len(_requests_to(lab_settings, "/late")) == 2


def test_a_live_holder_whose_steps_outlast_its_lease_is_never_taken_over(
    provider, editor, user_factory, web, lab_settings, tmp_path
):
    """A healthy holder that looks like another machine (its own PID namespace) runs a
    provider request and a fetch that each take several leases (lease 2 s) while another
    server sweeps every second: its heartbeat keeps both, and nothing runs twice."""
    hold = threading.Event()
    provider.add(Turn(text="answered late", hold=hold))
    approver = _approver(user_factory)
    page = lab_settings.url("news.lab.example", "/late?seconds=8")
    call = request_call("fetch_external_url", {"url": page}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL, call.result
    first_port, second_port = free_port(), free_port()
    url, other = f"http://127.0.0.1:{first_port}", f"http://127.0.0.1:{second_port}"
    log = tmp_path / "server.log"
    env = _env(lab_settings, WEBFETCH_TEST_LEASE_SECONDS="2", WEBFETCH_TEST_SWEEP_EVERY="1")
    first = second = None
    with loopback_only_to(lab_settings, url, other):
        try:
            first = serve(env, first_port, log, own_pid_namespace=True)
            second = serve(env, second_port, log)
            wait_for(lambda: served(url) and served(other), 60, interval=0.2, what="the servers")
            with httpx.Client(base_url=url, cookies=session_cookie(editor), timeout=30) as client:
                held = post_message(client, "one").json()["id"]
            assert provider.arrived.wait(30), log.read_text(errors="replace")[-3000:]
            _approve(url, approver, call)
            # Four leases: the sweeps of the other server look at both all along, while
            # the holder's heartbeat renews their leases.
            leases: dict[str, set[object]] = {"run": set(), "call": set()}
            until = time.monotonic() + 8
            while time.monotonic() < until:
                leases["run"].add(AssistantRun.objects.get(pk=held).lease_expires_at)
                leases["call"].add(ToolCall.objects.get(pk=call.pk).lease_expires_at)
                time.sleep(0.25)
            hold.set()
            wait_for(
                lambda: (
                    AssistantRun.objects.get(pk=held).finished
                    and ToolCall.objects.get(pk=call.pk).state in RUNS_FINAL
                ),
                SAFETY_NET,
                interval=0.2,
                what="the run and the call to finish",
            )
        finally:
            hold.set()
            stop(first)
            stop(second)
    run = AssistantRun.objects.get(pk=held)
    row = ToolCall.objects.get(pk=call.pk)
    assert run.state == "completed", log.read_text(errors="replace")[-3000:]
    assert not run.events.filter(kind="worker_lost").exists()
    assert row.state == CallState.SUCCEEDED and row.attempts == 1, row.result
    assert len(provider.requests) == 1
    assert len(_requests_to(lab_settings, "/late")) == 1
    # Each held on through several renewals of a 2 s lease (a beat every 0.7 s).
    assert len(leases["run"] - {None}) >= 4 and len(leases["call"] - {None}) >= 4
