"""A slow or hung model never holds a Celery worker's slot (issue 33 item 2, on Celery).

The task that advances a run hands its provider request to the provider I/O loop of the
worker process that ran it and ends (the slot is free); when the request ends, its
follow-up is sent by name as a Celery task (``assistant.loop.answered``).  Real parts: real
``celery worker`` processes on Redis, the scripted provider server of the lab reached
through the guard, the real SDK.  The helpers are those of ``test_hung_models.py``.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytest

from django_webfetch.models import AssistantRun, RunEvent
from tests.runs.infra import wait_for
from tests.settle import SAFETY_NET, settled_run

from .provider import Turn
from .test_hung_models import (
    HUNG,
    answer,
    hung_deliveries,
    hung_or_plain,
    post_as,
)

pytestmark = [
    pytest.mark.lab,
    pytest.mark.redis,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

#: The provider timeout of the test and its workers: a hung request fails after it (and
#: after its one retry).  Far above what a plain answer takes, so "answered while the four
#: hang" is an ordering, not a race.
TIMEOUT = 12.0


@pytest.fixture
def on_celery(settings: Any) -> dict[str, str]:
    """The test process and its workers agree on the provider timeout (the dispatch sizes
    the task's time limits from it, the worker its request and the run's lease)."""
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.WEBFETCH_ASSISTANT_TIMEOUT = TIMEOUT
    # The SDK imported once in the worker's main process, not once per pool child.
    return {
        "WEBFETCH_TEST_ASSISTANT_TIMEOUT": str(TIMEOUT),
        "WEBFETCH_TEST_PRELOAD_PROVIDER": "openai",
    }


def _first(run: str, kinds: tuple[str, ...]) -> Any:
    return RunEvent.objects.filter(run_id=run, kind__in=kinds).order_by("pk").first()


@pytest.mark.parametrize("pool", ["prefork", "threads"])
@pytest.mark.long  # tens of seconds: started first (tests/conftest.py)
def test_four_hung_models_leave_a_two_slot_worker_free_for_a_fifth_editor(
    pool, provider, worker_factory, celery_client, on_celery, user_factory, hold
):
    """A worker of concurrency 2 (prefork: the loop of each pool child; threads: one loop
    in the worker's process); four editors' models hang; a fifth editor's plain
    question is answered while all four are still on their first request (no timeout,
    no retry yet: a slot held by a hung request would come free only so).  Then each hung
    run ends with its stable code after the timeout and its one retry."""
    provider.add(*[hung_or_plain(hold)] * 5)
    worker = worker_factory(pool=pool, concurrency=2, env=on_celery)
    editors = [user_factory(staff=True) for _ in range(5)]
    hung = [post_as(editor, f"{HUNG} ({n})") for n, editor in enumerate(editors[:4])]
    wait_for(
        lambda: hung_deliveries(provider) == 4,
        SAFETY_NET,
        what="the four hung requests (two slots: only the loop holds four at once)",
    )
    assert not RunEvent.objects.filter(run_id__in=hung, kind="provider_retry").exists()

    plain = post_as(editors[4], "A plain question")
    answered = settled_run(plain)

    assert answered.state == "completed", worker.output()[-3000:]
    assert answer(answered) == "A plain answer."
    completed = _first(plain, ("completed",))
    # Answered while the four still hang: each is still on its first request.
    assert not hold.is_set()
    for run in hung:
        later = _first(run, ("provider_retry", "failed", "worker_lost"))
        assert later is None or later.pk > completed.pk, (run, later.kind)
    assert hung_deliveries(provider) == 4
    assert set(AssistantRun.objects.filter(pk__in=hung).values_list("state", flat=True)) == {
        "running"
    }

    # The hung requests time out on the loop, are asked once more, and fail in our words.
    for run in hung:
        done = settled_run(run)
        assert (done.state, done.error_code) == ("failed", "provider_timeout"), worker.output()[
            -3000:
        ]
        kinds = list(done.events.values_list("kind", flat=True))
        assert kinds.count("provider_retry") == 1
        assert "worker_lost" not in kinds
        assert answer(done) is None
    assert hung_deliveries(provider) == 8
    assert len(provider.requests) == 9


def test_a_warm_shutdown_releases_the_runs_its_loop_holds(
    provider, worker_factory, celery_client, on_celery, user_factory
):
    """A worker stopped warm (``SIGTERM``) while its loop holds a hung request releases
    the run (a ``released`` event, no lost attempt) and queues it again at once; the next
    worker asks again and answers it."""
    held = threading.Event()
    provider.add(Turn(text="never delivered", hold=held, repeat=Turn(text="the answer")))
    first = worker_factory("w1", env=on_celery)
    try:
        run = post_as(user_factory(staff=True), "hello")
        assert provider.arrived.wait(SAFETY_NET), first.output()[-3000:]
        first.process.send_signal(signal.SIGTERM)
        first.process.wait(SAFETY_NET)
        released = AssistantRun.objects.get(pk=run)
        assert released.state == "running" and released.lease_expires_at is None, first.output()[
            -3000:
        ]
        # No sweep is needed: the release queued the run again (sweeps off, no beat).
        second = worker_factory("w2", env={**on_celery, "WEBFETCH_TEST_WORKER_SWEEP_EVERY": "0"})
        done = settled_run(run)
    finally:
        held.set()
    assert done.state == "completed", second.output()[-3000:]
    assert answer(done) == "the answer"
    kinds = list(done.events.values_list("kind", flat=True))
    assert kinds.count("released") == 1
    assert "worker_lost" not in kinds
    assert done.attempts == 0
    assert len(provider.requests) == 2
