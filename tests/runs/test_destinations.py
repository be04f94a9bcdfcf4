"""At most N calls in flight per destination host (``runs.destinations``): across two real
worker processes sharing Redis, a slow host's excess calls wait in the queue (``approved``,
queued again with a countdown), not in a worker thread, and other hosts go on; in-process,
a full host makes the call fail ``destination_busy`` after the wait."""

from __future__ import annotations

import os
import time
import uuid

import pytest

pytest.importorskip("celery", reason="needs the [celery] extra")

from django_webfetch import runs
from django_webfetch.models import CallState, HostListEntry, ToolCall, ToolGroup
from django_webfetch.runs.destinations import destination_of, slots
from tests.settle import settled_call

from .infra import wait_for

real_db = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def web(lab_settings, group_factory, settings):
    group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    settings.ROOT_URLCONF = "tests.runs.urls"
    return lab_settings


def slow_host(web) -> str:
    """A fresh name per test: slots held in the shared Redis by an earlier test never count."""
    host = f"slow-{uuid.uuid4().hex[:8]}.lab.example"
    web.dns.set(host, a=[web.PUBLIC_V4[1]])
    return host


def fetch(web, editor, approver, host, path):
    call = runs.request_call("fetch_external_url", {"url": web.url(host, path)}, user=editor)
    return runs.approve(call, by=approver)


def states(calls) -> list[str]:
    return list(
        ToolCall.objects.filter(pk__in=[c.pk for c in calls]).values_list("state", flat=True)
    )


def test_the_destination_is_the_first_requested_host(run_tools):
    assert destination_of("fetch_external_url", {"url": "https://Docs.Example.org./x?q=1"}) == (
        "docs.example.org"
    )
    assert destination_of("fetch_external_url", {"url": "not a url"}) is None
    assert destination_of("runs_echo", {"text": "no network"}) is None
    assert destination_of("no_such_tool", {}) is None


@pytest.mark.redis
@pytest.mark.worker
@real_db
@pytest.mark.long  # tens of seconds: started first (tests/conftest.py)
def test_at_most_n_calls_per_host_across_two_workers(
    web, worker_factory, celery_client, editor, approver, settings
):
    redis_url = os.environ.get("WEBFETCH_TEST_REDIS_URL")
    if not redis_url:
        pytest.skip("no Redis (run through tests/run.sh)")
    settings.WEBFETCH_NETWORK_QUEUE = network = f"{celery_client.queue}-net"
    env = {
        "WEBFETCH_TEST_NETWORK_QUEUE": network,
        "WEBFETCH_TEST_TIMEOUT": "4",
        "WEBFETCH_TEST_MAX_CALLS_PER_HOST": "2",
        "WEBFETCH_TEST_DESTINATION_REDIS_URL": redis_url,
    }
    workers = [
        worker_factory(f"net{i}", pool="threads", concurrency=4, queues=[network], env=env)
        for i in range(2)
    ]
    host = slow_host(web)
    slow = [fetch(web, editor, approver, host, f"/slow?n={i}") for i in range(6)]
    # Sample the calls while they drain: never more than 2 running at once (8 threads were
    # free), the rest approved in the queue.
    most_running = 0
    waited_in_queue = False
    normal = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        now = states(slow)
        running = now.count(CallState.RUNNING)
        most_running = max(most_running, running)
        if running == 2 and now.count(CallState.APPROVED) >= 1:
            waited_in_queue = True
            if not normal:
                # Another host is not held up by the full one.
                normal = [fetch(web, editor, approver, "docs.lab.example", "/page")]
                wait_for(
                    lambda calls=normal: states(calls) == [CallState.SUCCEEDED],
                    15,
                    what="the normal call",
                )
                assert states(slow).count(CallState.APPROVED) >= 1
        if all(ToolCall.objects.get(pk=c.pk).finished for c in slow):
            break
        time.sleep(0.05)
    assert most_running == 2
    assert waited_in_queue and normal
    finished = ToolCall.objects.filter(pk__in=[c.pk for c in slow])
    # Every slow call ran (the page trickles past the 4 s budget) and none was lost.
    assert {c.state for c in finished} == {CallState.FAILED}
    assert {c.reason for c in finished} == {"timeout"}
    assert all(c.attempts == 1 for c in finished)
    assert sum(1 for r in web.requests if r.path.startswith("/slow")) == 6
    # The limit was counted in Redis by both workers; every slot was given back.
    logs = "".join(w.output() for w in workers)
    assert "deferred" in logs
    import redis

    shared = redis.Redis.from_url(redis_url)
    assert shared.zcard(f"django_webfetch:destination_calls:host:{host}") == 0


@pytest.mark.django_db
def test_in_process_a_full_host_fails_the_call_after_the_wait(web, editor, settings):
    settings.WEBFETCH_MAX_CALLS_PER_HOST = 1
    settings.WEBFETCH_TIMEOUT = 1
    group = ToolGroup.objects.get(slug="web")
    group.skip_approval_with_allowlist = True
    group.save()
    HostListEntry.objects.create(group=group, list="allow", value="docs.lab.example")
    url = web.url("docs.lab.example", "/page")
    held = slots().acquire("host:docs.lab.example", 1, wait=0, ttl=30)
    try:
        # The runner's thread waits for the slot (WEBFETCH_TIMEOUT) while it is held.
        busy = settled_call(runs.request_call("fetch_external_url", {"url": url}, user=editor))
    finally:
        held.release()
    assert (busy.state, busy.reason) == (CallState.FAILED, "destination_busy")
    assert "Too many calls to this destination are in flight (at most 1)" in (
        busy.tool_result().content
    )
    assert not [r for r in web.requests if r.path == "/page"]
    # The slot given back, the next call runs.
    ok = settled_call(runs.request_call("fetch_external_url", {"url": url}, user=editor))
    assert ok.state == CallState.SUCCEEDED, ok.result


@pytest.mark.django_db
def test_an_unreachable_shared_count_fails_closed(web, editor, settings):
    settings.WEBFETCH_REDIS_URL = "unix:///nonexistent/redis.sock"  # nothing listens there
    group = ToolGroup.objects.get(slug="web")
    group.skip_approval_with_allowlist = True
    group.save()
    HostListEntry.objects.create(group=group, list="allow", value="docs.lab.example")
    call = settled_call(
        runs.request_call(
            "fetch_external_url", {"url": web.url("docs.lab.example", "/page")}, user=editor
        )
    )
    assert (call.state, call.reason) == (CallState.FAILED, "destination_limit_unavailable")
    assert not [r for r in web.requests if r.path == "/page"]


def test_a_deferred_call_comes_back_sooner_the_shorter_it_waited():
    from django_webfetch.runs.destinations import DEFER_MAX, DEFER_MIN, countdown_after

    for waited, low, high in ((0, DEFER_MIN, DEFER_MIN), (8, 2, 2), (600, DEFER_MAX, DEFER_MAX)):
        for _ in range(20):
            assert low * 0.75 <= countdown_after(waited) <= high * 1.25
