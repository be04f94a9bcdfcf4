"""A web process killed mid-run: its runs are taken over in seconds (issue 33, item 6).

uvicorn (ASGI, the background runner) is killed with ``kill -9`` while one run waits for
the provider (its lease, the provider timeout plus 5 s, runs a minute longer) and another
waits in the runner's in-memory queue.  The next process's first sweep finds the holder's
process gone (``durable.holder_gone``: same machine, PID gone) and takes the first run over
at once, and queues the second again at once (its queue died with the process), instead
of waiting for the lease and for ``WEBFETCH_REQUEUE_AFTER``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import httpx
from django.db import connections

from django_webfetch.models import AssistantRun
from tests.asgi import free_port, post_message
from tests.runs.infra import wait_for
from tests.settle import SAFETY_NET

from .provider import Turn
from .test_streaming import _serve, _served, loopback_only_to, session_cookie


def _env(lab_settings) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "DATABASE_URL"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="tests.assistant.serve_settings",
        PYTHONPATH=os.getcwd(),
        PYTHONWARNINGS="ignore",
        WEBFETCH_TEST_DB=str(connections["default"].settings_dict["NAME"]),
        WEBFETCH_TEST_NAMESERVERS=json.dumps(list(lab_settings.nameservers)),
        WEBFETCH_TEST_CA_FILE=str(lab_settings.ca_file),
        # The shipped provider timeout: the run's lease is 65 s, and the sweep runs every
        # 15 s, as shipped.  One request at a time to the provider: the second run waits
        # for its turn on the provider loop (leased by the first process, renewed, no
        # thread held: ADR 0043).
        WEBFETCH_TEST_SWEEP_EVERY="15",
        WEBFETCH_TEST_RUNNER_THREADS="1",
        WEBFETCH_TEST_PROVIDER_CONCURRENCY="1",
        # Longer than the safety net: a run is never queued again by age here.
        WEBFETCH_TEST_REQUEUE_AFTER="600",
    )
    env.pop("WEBFETCH_TEST_ASSISTANT_TIMEOUT", None)
    return env


def _stop(process):
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


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
            first = _serve(env, port, log)
            wait_for(lambda: _served(url), 60, interval=0.2, what="the first server")
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
            second = _serve(env, port, log)
            wait_for(lambda: _served(url), 60, interval=0.2, what="the second server")
            served = time.monotonic()

            # When each step of the recovery was seen (seconds after the new server answered),
            # for the report; nothing is asserted on them.
            marks: dict[str, float] = {}

            def every_run_final() -> bool:
                a = AssistantRun.objects.get(pk=held)
                b = AssistantRun.objects.get(pk=queued)
                now = round(time.monotonic() - served, 1)
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
            took, after_served = time.monotonic() - restarted, time.monotonic() - served
        finally:
            hold.set()
            _stop(first)
            _stop(second)
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
