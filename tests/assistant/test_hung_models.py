"""A slow or hung model never stalls another editor (issue 33 item 2).

The background runner hands each provider request to the provider I/O loop
(``assistant/aio.py``) and its thread is released: four models hung mid-request on a
runner of four threads leave a fifth editor's plain question to be answered at once.  The
provider is the scripted OpenAI-compatible server of the lab (``provider.py``), reached
through the guard, with the real SDK doing the requests; "hung" is a request the server
holds until the test lets it go.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from django_webfetch.assistant.aio import provider_loop
from django_webfetch.assistant.models import Message
from django_webfetch.models import AssistantRun
from django_webfetch.runs.runner import runner
from tests.runs.infra import wait_for
from tests.settle import settled_run

from .provider import Recorded, Turn

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

HUNG = "please hang"


@pytest.fixture
def background(settings: Any) -> Iterator[Any]:
    settings.WEBFETCH_RUNNER = "background"
    settings.WEBFETCH_RUNNER_THREADS = 4
    settings.ROOT_URLCONF = "tests.runs.urls"
    runner.stop()
    yield runner
    runner.wait_idle(60)
    runner.stop()


def _asks(record: Recorded) -> str:
    return json.dumps(record.body)


def hung_or_plain(hold: threading.Event) -> Callable[[Recorded], Turn]:
    """The scripted turn: a question asking to hang is held until ``hold``; any other is
    answered at once."""

    def turn(record: Recorded) -> Turn:
        if HUNG in _asks(record):
            return Turn(text="Late, but here.", hold=hold)
        return Turn(text="A plain answer.")

    return turn


def post_as(user: Any, content: str) -> str:
    client = APIClient()
    client.force_login(user)
    conv = client.post("/api/conversations/", {}, format="json").json()["id"]
    response = client.post(
        f"/api/conversations/{conv}/messages/", {"content": content}, format="json"
    )
    assert response.status_code == 202, response.content
    return str(response.json()["id"])


def answer(run: Any) -> str | None:
    """The run's last assistant message, if any."""
    message = Message.objects.filter(
        run_id=run if isinstance(run, str) else run.pk, role="assistant"
    )
    last = message.order_by("pk").last()
    return None if last is None else last.content


def hung_deliveries(provider: Any) -> int:
    return sum(HUNG in _asks(r) for r in provider.requests)


def test_four_hung_models_do_not_stall_a_fifth_editor(provider, background, user_factory, hold):
    """Four editors' models hang on a runner of four threads; a fifth editor's question is
    answered while all four are still hung: the provider has seen each hung request once
    (none timed out and was repeated, which is how a thread held by one would come free)."""
    provider.add(*[hung_or_plain(hold)] * 5)
    editors = [user_factory(staff=True) for _ in range(5)]
    hung = [post_as(editor, f"{HUNG} ({n})") for n, editor in enumerate(editors[:4])]
    wait_for(lambda: hung_deliveries(provider) == 4, 60, what="the four hung requests")

    plain = post_as(editors[4], "A plain question")
    answered = settled_run(plain, timeout=50)

    assert answered.state == "completed"
    assert answer(answered) == "A plain answer."
    # The four are still hung: held by the provider, never answered nor repeated.
    assert not hold.is_set()
    assert hung_deliveries(provider) == 4
    assert len(provider.requests) == 5
    states = set(AssistantRun.objects.filter(pk__in=hung).values_list("state", flat=True))
    assert states == {"running"}
    assert provider_loop.in_flight == 4

    hold.set()
    for run in hung:
        done = settled_run(run)
        assert done.state == "completed"
        assert answer(done) == "Late, but here."
    assert hung_deliveries(provider) == 4


def test_requests_beyond_the_provider_bound_wait_without_a_thread(
    provider, background, user_factory, hold, settings
):
    """At most ``WEBFETCH_ASSISTANT_PROVIDER_CONCURRENCY`` requests stream at once per
    provider; the next waits on the loop (its runner thread released, the run leased) and
    is sent as soon as one ends."""
    settings.WEBFETCH_ASSISTANT_PROVIDER_CONCURRENCY = 2
    settings.WEBFETCH_RUNNER_THREADS = 1
    provider.add(*[hung_or_plain(hold)] * 3)
    runs = [post_as(user_factory(staff=True), f"{HUNG} ({n})") for n in range(3)]

    wait_for(
        lambda: provider_loop.waiting == 1 and hung_deliveries(provider) == 2,
        60,
        what="two requests sent and the third waiting for the bound",
    )
    assert provider_loop.in_flight == 3
    # One runner thread handed all three off: the run waiting for the bound holds its lease.
    leased = AssistantRun.objects.filter(pk__in=runs, lease_expires_at__isnull=False)
    assert leased.count() == 3

    hold.set()
    for run in runs:
        assert settled_run(run).state == "completed"
    assert hung_deliveries(provider) == 3
    assert provider_loop.waiting == 0


def test_a_run_cancelled_while_its_model_hangs_stays_cancelled(
    provider, background, user_factory, hold
):
    """The editor cancels while the request is on the loop; the late answer is dropped
    (the run's version moved on) and the runner goes on with other work."""
    editor = user_factory(staff=True)
    provider.add(hung_or_plain(hold), hung_or_plain(hold))
    client = APIClient()
    client.force_login(editor)
    run = post_as(editor, HUNG)
    wait_for(lambda: hung_deliveries(provider) == 1, 60, what="the hung request")
    response = client.post(f"/api/runs/{run}/cancel/", {}, format="json")
    assert response.status_code in (200, 202), response.content
    hold.set()
    other = post_as(user_factory(staff=True), "A plain question")
    assert settled_run(other).state == "completed"
    assert background.wait_idle(60)
    cancelled = AssistantRun.objects.get(pk=run)
    assert cancelled.state == "cancelled"
    assert answer(cancelled) is None


def test_a_follow_up_acts_once_at_the_hand_off_version(provider, background, user_factory, hold):
    """The follow-up of a request handed to the loop (``loop.answered``, the same on Celery)
    acts only at the run's version of the hand-off, and only once: a follow-up for an older
    version is left alone; the first for the hand-off's version decides (here a failure
    delivered before the model answers); the model's late answer is then dropped."""
    from django_webfetch.assistant.loop import answered

    provider.add(hung_or_plain(hold))
    run = post_as(user_factory(staff=True), HUNG)
    wait_for(lambda: hung_deliveries(provider) == 1, 60, what="the hung request")
    handed = AssistantRun.objects.get(pk=run)
    failure = {"failure": {"code": "provider_rejected", "message": "Refused.", "retry_safe": False}}

    assert answered(run, handed.version - 1, failure).action == "noop"
    assert AssistantRun.objects.get(pk=run).state == "running"
    assert answered(run, handed.version, failure).action == "advanced"
    assert answered(run, handed.version, failure).action == "noop"

    hold.set()
    assert background.wait_idle(60)
    row = AssistantRun.objects.get(pk=run)
    assert (row.state, row.error_code) == ("failed", "provider_rejected")
    assert answer(row) is None
    assert list(row.events.values_list("kind", flat=True)).count("failed") == 1


@pytest.fixture
def held_runner(background: Any) -> Iterator[tuple[threading.Event, threading.Event]]:
    """The runner's only thread held by a job of the test until ``gate`` is set: what is
    queued meanwhile (a follow-up) waits, as on a busy worker."""
    from django_webfetch.runs import dispatch

    name = "tests.hold_the_runner"
    busy, gate = threading.Event(), threading.Event()

    def hold_thread() -> None:
        busy.set()
        gate.wait(120)

    dispatch.bind(name, hold_thread)
    try:
        yield busy, gate
    finally:
        gate.set()
        dispatch._handlers.pop(name, None)


def test_a_handed_off_request_is_not_lost_while_its_follow_up_waits(
    provider, background, held_runner, user_factory, hold, settings
):
    """The step deadline of a request handed to the loop is renewed when it is sent and
    when it ends: a follow-up that waits in a busy queue finds its run still its own, not
    taken over as lost (ci57, loaded: the sweep found a hung request's step past its
    deadline, fixed at the hand-off, and the run lost its retry to a ``worker_lost``).
    Bounds by construction, not by the clock: between the two renewals the request lasted
    its whole timeout, and "lost" is asked at explicit instants."""
    from datetime import timedelta

    from django_webfetch.assistant.state import lost

    settings.WEBFETCH_ASSISTANT_TIMEOUT = 2.0
    settings.WEBFETCH_RUNNER_THREADS = 1
    busy, gate = held_runner
    provider.add(*[hung_or_plain(hold)] * 2)
    run = post_as(user_factory(staff=True), HUNG)
    wait_for(lambda: hung_deliveries(provider) == 1, 60, what="the hung request")
    sent = AssistantRun.objects.get(pk=run)

    background.submit("tests.hold_the_runner")
    assert busy.wait(60)
    wait_for(lambda: provider_loop.in_flight == 0, 60, what="the request's timeout")
    waiting = AssistantRun.objects.get(pk=run)
    # Nothing took the run up: the follow-up waits behind the held thread.
    assert waiting.version == sent.version and not hold.is_set()
    assert waiting.step_deadline - sent.step_deadline >= timedelta(seconds=2.0)
    assert not lost(waiting, sent.step_deadline + timedelta(milliseconds=1))
    assert lost(waiting, waiting.step_deadline)

    gate.set()
    done = settled_run(run)
    assert (done.state, done.error_code) == ("failed", "provider_timeout")
    kinds = list(done.events.values_list("kind", flat=True))
    assert kinds.count("provider_retry") == 1 and "worker_lost" not in kinds, kinds
    assert hung_deliveries(provider) == 2
