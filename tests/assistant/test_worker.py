"""Assistant runs on real Celery workers (Redis broker): the approval resumes the run on a
worker, and a worker killed in the middle of a provider request is recovered."""

from __future__ import annotations

import threading

import pytest
from rest_framework.test import APIClient

from django_webfetch.models import AssistantRun, Message, ToolCall
from tests.runs.infra import wait_for
from tests.settle import SAFETY_NET

from .provider import Turn, tool_results

pytestmark = [
    pytest.mark.redis,
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
]

BEGIN = "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce="


#: The provider timeout of the tests that kill a worker mid-request.  It sets the run's
#: lease (timeout + 5 s), which is what recovery waits for, so it is short; it only has to
#: cover what a worker does inside it there: a held request killed as soon as it arrived,
#: and, after recovery, a ten-character answer sent at once (one slow try is retried).
LEASE_TEST_TIMEOUT = 3.0


@pytest.fixture
def api(editor, settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    client = APIClient()
    client.force_login(editor)
    return client


@pytest.fixture
def short_lease(settings):
    """The test process and its workers agree on a short provider timeout (the dispatch
    sizes the task's time limit from it; the worker sizes the run's lease from it)."""
    settings.WEBFETCH_TIMEOUT = 5.0
    settings.WEBFETCH_ASSISTANT_TIMEOUT = LEASE_TEST_TIMEOUT
    return {
        "WEBFETCH_TEST_ASSISTANT_TIMEOUT": str(LEASE_TEST_TIMEOUT),
        "WEBFETCH_TEST_SWEEP_EVERY": "1",
    }


def ask(api, content):
    conv = api.post("/api/conversations/", {}, format="json").json()["id"]
    response = api.post(f"/api/conversations/{conv}/messages/", {"content": content}, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def test_editor_asks_admin_approves_worker_fetches_run_answers(
    api, provider, lab_settings, group_factory, worker_factory, celery_client, client, approver
):
    """The issue's "done when": nobody touches the run after the approval.

    No deadline of this test's own: the provider and the fetch run with the shipped
    timeouts (a streamed answer that writes its deltas can outlast a few seconds on a busy
    machine, and nothing here is about timing out); the waits are the far safety net."""
    from .test_provider_loop import approve_in_admin

    group_factory("web", enabled=True)
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[2]])
    url = lab_settings.url("news.lab.example", "/page?from=worker", scheme="https")
    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": url})]),
        lambda record: Turn(text="Quoted: " + "\n".join(tool_results(record))),
    )
    worker = worker_factory(env={"WEBFETCH_TEST_SWEEP_EVERY": "1"})
    run = ask(api, "What does the lab news page say?")
    run_id = run["id"]
    wait_for(
        lambda: AssistantRun.objects.get(pk=run_id).state == "waiting_for_approval",
        SAFETY_NET,
        what="the run to pause",
    )
    [call] = ToolCall.objects.filter(run__isnull=False)
    approve_in_admin(client, approver, [str(call.pk)])
    try:
        wait_for(
            lambda: AssistantRun.objects.get(pk=run_id).finished,
            SAFETY_NET,
            what="the run to finish",
        )
    except AssertionError:
        print(worker.output()[-4000:])
        raise
    body = api.get(f"/api/runs/{run_id}/").json()
    assert body["state"] == "completed", (body, worker.output()[-3000:])
    # One provider request per step: nothing timed out and was sent again.
    assert len(provider.requests) == 2
    assert BEGIN in body["final_message"]["content"]
    assert "Lab page" in body["final_message"]["content"]
    call.refresh_from_db()
    assert call.state == "succeeded" and call.attempts == 1
    assert call.worker.startswith("w1-")


def test_worker_killed_mid_request_resumes_and_duplicates_nothing(
    api, provider, worker_factory, celery_client, short_lease
):
    hold = threading.Event()
    # The recovered worker sends the same request again: its repeat is answered at once.
    provider.add(Turn(text="never delivered", hold=hold, repeat=Turn(text="the answer")))
    first = worker_factory("w1", env=short_lease)
    try:
        run = ask(api, "hello")
        assert provider.arrived.wait(30), first.output()[-3000:]
        first.kill9()
        second = worker_factory("w2", beat=True, env=short_lease)
        wait_for(
            lambda: AssistantRun.objects.get(pk=run["id"]).finished,
            SAFETY_NET,
            what="the run to be recovered",
        )
    finally:
        hold.set()
    row = AssistantRun.objects.get(pk=run["id"])
    assert row.state == "completed", (row.error_code, second.output()[-3000:])
    assert [m.content for m in Message.objects.filter(run=row, role="assistant")] == ["the answer"]
    assert len(provider.requests) == 2
    kinds = list(row.events.values_list("kind", flat=True))
    assert kinds.count("worker_lost") == 1
    assert kinds.count("completed") == 1


@pytest.mark.long
def test_worker_lost_twice_fails_the_run(api, provider, worker_factory, celery_client, short_lease):
    holds = [threading.Event(), threading.Event()]
    provider.add(Turn(text="x", hold=holds[0], repeat=Turn(text="y", hold=holds[1])))
    try:
        first = worker_factory("w1", env=short_lease)
        run = ask(api, "hello")
        assert provider.arrived.wait(30)
        provider.arrived.clear()
        first.kill9()
        second = worker_factory("w2", beat=True, env=short_lease)
        assert provider.arrived.wait(SAFETY_NET), second.output()[-3000:]
        second.kill9()
        third = worker_factory("w3", beat=True, env=short_lease)
        wait_for(
            lambda: AssistantRun.objects.get(pk=run["id"]).finished,
            SAFETY_NET,
            what="the run to fail",
        )
    finally:
        for hold in holds:
            hold.set()
    row = AssistantRun.objects.get(pk=run["id"])
    assert (row.state, row.error_code) == ("failed", "worker_lost"), third.output()[-3000:]
    assert not Message.objects.filter(run=row, role="assistant").exists()
