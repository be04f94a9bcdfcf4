"""Workers that survive the broker (issue 33, item 3).

Real Celery workers (a prefork one and a threads one, as ``docs/operations.rst``
recommends for network tools) run fetches against the lab while their Redis is restarted
without persistence, five times, with tasks in flight each time.  Every worker process
stays up by itself (no supervisor restarts it), and every call ends: the messages the
restart lost are queued again by the sweep, the redeliveries run nothing twice.
"""

from __future__ import annotations

import pytest

pytest.importorskip("celery", reason="needs the [celery] extra")

from django_webfetch import runs
from django_webfetch.models import CallState, HostListEntry, ToolCall, ToolGroup

from .infra import wait_for


@pytest.fixture
def redis_socket(private_redis):
    """The Celery client and workers of these tests use the private Redis."""
    return private_redis.path


real_db = pytest.mark.django_db(transaction=True, serialized_rollback=True)

RESTARTS = 5


@pytest.fixture
def web(lab_settings, group_factory, settings):
    group = group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    lab_settings.dns.set("slowly.lab.example", a=[lab_settings.PUBLIC_V4[1]])
    # Calls run without a human: the group's allowlist names both hosts.
    ToolGroup.objects.filter(pk=group.pk).update(skip_approval_with_allowlist=True)
    for host in ("docs.lab.example", "slowly.lab.example"):
        HostListEntry.objects.create(group=group, list="allow", value=host)
    return lab_settings


def _finished(calls) -> int:
    return ToolCall.objects.filter(
        pk__in=[c.pk for c in calls], state__in=runs.FINISHED_STATES
    ).count()


def _running(calls) -> int:
    return ToolCall.objects.filter(pk__in=[c.pk for c in calls], state=CallState.RUNNING).count()


@pytest.mark.long
@pytest.mark.redis
@pytest.mark.worker
@real_db
def test_workers_survive_five_broker_restarts_under_load(
    web, private_redis, worker_factory, celery_client, editor, settings
):
    settings.WEBFETCH_TIMEOUT = 2.0  # /slow ends as a timeout after 2 s: a busy worker
    env = {
        "WEBFETCH_TEST_SWEEP_EVERY": "1",
        "WEBFETCH_TEST_REQUEUE_AFTER": "2",
        # The per-destination limit counts in the broker's Redis: calls over it wait as
        # countdown messages the workers hold (unacknowledged) when Redis goes.
        "WEBFETCH_TEST_MAX_CALLS_PER_HOST": "2",
        "WEBFETCH_TEST_DESTINATION_REDIS_URL": f"unix://{private_redis.path}",
    }
    workers = [
        worker_factory("prefork", pool="prefork", concurrency=2, beat=True, env=env),
        worker_factory("threads", pool="threads", concurrency=4, env=env),
    ]
    calls = []
    for round_ in range(RESTARTS):
        batch = []
        for i in range(8):
            host, path = ("slowly.lab.example", "/slow") if i % 2 else ("docs.lab.example", "/page")
            url = web.url(host, f"{path}?round={round_}&n={i}")
            batch.append(runs.request_call("fetch_external_url", {"url": url}, user=editor))
        assert {c.state for c in batch} == {CallState.APPROVED}
        calls += batch
        # Restart while tasks run (acknowledged late: they are the worker's unacked
        # messages) and others wait in the queue.
        wait_for(lambda b=batch: _running(b) >= 2, 30, what=f"tasks running in round {round_}")
        private_redis.crash_and_restart()
        for worker in workers:
            output = worker.output()
            start = max(0, output.find("Unrecoverable error") - 1000)
            assert worker.process.poll() is None, (
                f"worker {worker.name} exited after restart {round_ + 1}:\n" + output[start:][:8000]
            )
    wait_for(lambda: _finished(calls) == len(calls), 90, interval=0.2, what="every call to end")
    for worker in workers:
        assert worker.process.poll() is None, worker.output()[-4000:]
        output = worker.output()
        for fatal in ("Unrecoverable error", "AttributeError", "Warm shutdown", "Cold shutdown"):
            assert fatal not in output, output[max(0, output.find(fatal) - 3000) :][:6000]
    rows = list(ToolCall.objects.filter(pk__in=[c.pk for c in calls]))
    # Nothing lost, nothing run twice: a page fetched at most once per call.
    assert {r.state for r in rows if "/page" in r.arguments["url"]} == {CallState.SUCCEEDED}
    assert {r.reason for r in rows if "/slow" in r.arguments["url"]} == {"timeout"}
    fetched = [r.path for r in web.requests]
    for row in rows:
        query = row.arguments["url"].split("?", 1)[1]
        assert sum(1 for p in fetched if p.endswith(query)) == 1, row.arguments["url"]


@pytest.mark.redis
def test_an_ack_on_a_lost_connection_is_a_connection_error(private_redis):
    """The path that ended busy workers, on kombu itself: a message taken before the
    connection was lost and acknowledged after Celery collected the connection.  Celery's
    ``ack_log_error`` handles the transport's connection errors (and logs "Couldn't ack");
    anything else reaches the worker's event loop and ends the worker."""
    import logging

    import redis
    from kombu import Connection

    from django_webfetch.broker import survive_lost_connections

    assert survive_lost_connections()
    assert survive_lost_connections()  # idempotent: wrapped once
    connection = Connection(f"redis+socket://{private_redis.path}")
    queue = connection.SimpleQueue("webfetch-broker-fix")
    queue.put({"n": 1})
    message = queue.get(timeout=5)
    assert message.payload == {"n": 1}
    channel = message.channel
    private_redis.crash_and_restart()
    # What Celery's consumer does when the broker is lost: the transport forgets its client
    # (collect), and the channel its pools (as its close does); the worker's traceback
    # showed both.
    connection.collect()
    channel._disconnect_pools()
    assert channel._pool is None and getattr(channel.connection, "client", None) is None
    with pytest.raises(redis.exceptions.ConnectionError):
        message.ack()
    assert issubclass(redis.exceptions.ConnectionError, connection.connection_errors)
    message.ack_log_error(logging.getLogger("test"), connection.connection_errors)
