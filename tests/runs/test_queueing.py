"""No call stranded by the broker (issue 15), and no editor stalled by two slow pages.

Each test runs real Celery workers on a private Redis started here (Unix socket, no
persistence: ``save ""``, ``appendonly no``, as many small installs run it), so that it can
be stopped and restarted without touching the session's Redis.
"""

from __future__ import annotations

import pytest

pytest.importorskip("celery", reason="needs the [celery] extra")

from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from django_webfetch.runs.queue import QUEUED_RETRY

from .infra import PrivateRedis, wait_for

real_db = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def redis_socket(private_redis: PrivateRedis) -> str:
    """The Celery client and workers of these tests use the private Redis."""
    return private_redis.path


@pytest.fixture
def web(lab_settings, group_factory, settings):
    group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    lab_settings.dns.set("slowly.lab.example", a=[lab_settings.PUBLIC_V4[1]])
    settings.ROOT_URLCONF = "tests.runs.urls"
    return lab_settings


def _states(calls) -> list[str]:
    return list(
        ToolCall.objects.filter(pk__in=[c.pk for c in calls]).values_list("state", flat=True)
    )


def _approved_fetches(web, editor, approver, count: int, path: str = "/page") -> list:
    calls = []
    for i in range(count):
        call = runs.request_call(
            "fetch_external_url", {"url": web.url("docs.lab.example", f"{path}?n={i}")}, user=editor
        )
        calls.append(runs.approve(call, by=approver))
    return calls


@pytest.mark.redis
@pytest.mark.worker
@real_db
def test_messages_lost_with_a_redis_restart_are_queued_again(
    web, private_redis, worker_factory, celery_client, editor, approver, settings
):
    """Redis restarted without persistence forgets the queued messages; the sweep queues
    the approved calls again after ``WEBFETCH_REQUEUE_AFTER``, and each runs once."""
    settings.WEBFETCH_REQUEUE_AFTER = 2
    calls = _approved_fetches(web, editor, approver, 5)
    assert private_redis.length(celery_client.queue) == 5
    private_redis.restart()
    assert private_redis.length(celery_client.queue) == 0  # the messages are gone

    worker_factory(
        beat=True, env={"WEBFETCH_TEST_SWEEP_EVERY": "0.5", "WEBFETCH_TEST_REQUEUE_AFTER": "2"}
    )
    wait_for(lambda: set(_states(calls)) == {CallState.SUCCEEDED}, 30, what="the re-queued calls")
    rows = ToolCall.objects.filter(pk__in=[c.pk for c in calls])
    assert {(r.attempts, r.reason) for r in rows} == {(1, "")}
    assert len([r for r in web.requests if r.path.startswith("/page")]) == 5  # nothing ran twice


@pytest.mark.redis
@pytest.mark.worker
@real_db
def test_a_call_the_broker_cannot_take_says_so(
    web, private_redis, worker_factory, celery_client, editor, approver, settings
):
    """The broker is down at approval: the response says ``queued_retry`` (never a silent
    success); once it is back, a poll of the call queues it again and it runs."""
    settings.WEBFETCH_REQUEUE_AFTER = 1
    call = runs.request_call(
        "fetch_external_url", {"url": web.url("docs.lab.example", "/page")}, user=editor
    )
    private_redis.stop()
    client = APIClient()
    client.force_login(approver)
    response = client.post(f"/api/calls/{call.pk}/approve/", {}, format="json")
    # Accepted (it runs off the request), and the response says it is not queued yet.
    assert response.status_code == 202
    body = response.json()
    assert (body["state"], body["reason"]) == ("approved", QUEUED_RETRY)
    assert ToolCall.objects.get(pk=call.pk).reason == QUEUED_RETRY

    private_redis.start()
    worker_factory()  # no beat: the editor's polls alone get it queued again
    editor_client = APIClient()
    editor_client.force_login(editor)

    def finished():
        return editor_client.get(f"/api/calls/{call.pk}/").json()["finished"]

    wait_for(finished, 30, interval=0.3, what="the call to run after the broker came back")
    call.refresh_from_db()
    assert (call.state, call.reason, call.attempts) == (CallState.SUCCEEDED, "", 1)


@pytest.mark.redis
@pytest.mark.worker
@real_db
def test_a_request_the_broker_cannot_take_is_202_with_queued_retry(
    web, private_redis, celery_client, editor, settings
):
    from django_webfetch.models import HostListEntry, ToolGroup

    group = ToolGroup.objects.get(slug="web")
    group.skip_approval_with_allowlist = True
    group.save()
    HostListEntry.objects.create(group=group, list="allow", value="docs.lab.example")
    private_redis.stop()
    client = APIClient()
    client.force_login(editor)
    response = client.post(
        "/api/calls/",
        {"tool": "fetch_external_url", "arguments": {"url": "http://docs.lab.example/page"}},
        format="json",
    )
    assert response.status_code == 202
    assert (response.json()["state"], response.json()["reason"]) == ("approved", QUEUED_RETRY)


@pytest.mark.redis
@pytest.mark.worker
@real_db
def test_two_slow_pages_do_not_stall_the_others(
    web, worker_factory, celery_client, editor, approver, settings
):
    """Two calls to a page that trickles one byte a second hold two threads of the network
    queue's I/O pool, not its processes: a normal call queued after them finishes while
    both are still running.  (With the default prefork pool of two processes it waits for
    one of them to time out.)"""
    settings.WEBFETCH_NETWORK_QUEUE = f"{celery_client.queue}-net"
    network = settings.WEBFETCH_NETWORK_QUEUE
    worker_factory(
        "net",
        pool="threads",
        concurrency=4,
        queues=[network],
        env={"WEBFETCH_TEST_NETWORK_QUEUE": network, "WEBFETCH_TEST_TIMEOUT": "40"},
    )
    slow = []
    for i in range(2):
        url = web.url("slowly.lab.example", f"/slow?n={i}")
        call = runs.request_call("fetch_external_url", {"url": url}, user=editor)
        slow.append(runs.approve(call, by=approver))
    wait_for(
        lambda: (
            _states(slow) == [CallState.RUNNING] * 2
            and sum(1 for r in web.requests if r.path.startswith("/slow")) == 2
        ),
        20,
        what="both slow fetches to start",
    )
    normal = _approved_fetches(web, editor, approver, 3)
    wait_for(lambda: set(_states(normal)) == {CallState.SUCCEEDED}, 15, what="the normal calls")
    # The slow calls are still running: the normal ones did not wait for them.
    assert _states(slow) == [CallState.RUNNING] * 2
    assert private_queue_empty(celery_client)


def private_queue_empty(client) -> bool:
    """Nothing went to the default queue: the network tool's calls were routed."""
    import redis

    socket_path = client.broker_url.removeprefix("redis+socket://")
    return int(redis.Redis(unix_socket_path=socket_path).llen(client.queue)) == 0
