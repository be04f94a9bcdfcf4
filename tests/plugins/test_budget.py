"""The per-instance connection budget: shared by processes through Redis, leases expire
when a worker dies, per process without Redis."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

import pytest

from django_webfetch.net.errors import EgressDenied
from django_webfetch.plugins import services
from django_webfetch.plugins.budget import LocalBudget, RedisBudget

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis_url():
    url = os.environ.get("WEBFETCH_TEST_REDIS_URL", "")
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail("WEBFETCH_TEST_REDIS_URL is required in CI")
        pytest.skip("no Redis (run through tests/run.sh)")
    return url


def _hold(url, key, count, ready, release):
    """Child process: take ``count`` leases, signal, hold until told (or killed)."""
    budget = RedisBudget(url)
    leases = [budget.acquire(key, 2, wait=0, ttl=30) for _ in range(count)]
    ready.set()
    release.wait(30)
    for lease in leases:
        lease.release()


def _try(url, key, wait, ttl, results):
    try:
        RedisBudget(url).acquire(key, 2, wait=wait, ttl=ttl).release()
        results.put("acquired")
    except EgressDenied as exc:
        results.put(exc.reason)


def test_budget_is_shared_by_two_processes(redis_url):
    key = f"shared-{os.getpid()}-{time.monotonic_ns()}"
    ctx = multiprocessing.get_context("fork")
    ready, release, results = ctx.Event(), ctx.Event(), ctx.Queue()
    holder = ctx.Process(target=_hold, args=(redis_url, key, 2, ready, release))
    holder.start()
    assert ready.wait(10)
    # Connection N+1, from another process: waits its budget, then is refused.
    other = ctx.Process(target=_try, args=(redis_url, key, 0.3, 30, results))
    other.start()
    other.join(10)
    assert results.get(timeout=5) == "connection_budget"
    # It waits rather than fails when a slot frees up meanwhile.
    waiter = ctx.Process(target=_try, args=(redis_url, key, 5, 30, results))
    waiter.start()
    time.sleep(0.3)
    release.set()
    waiter.join(10)
    holder.join(10)
    assert results.get(timeout=5) == "acquired"
    assert RedisBudget(redis_url).held(key) == 0


def _killed_holder(redis_url, key, ttl):
    """A worker process that takes both slots of ``key`` with leases of ``ttl`` seconds
    and is SIGKILLed holding them (it never releases)."""
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()

    def hold(url):
        budget = RedisBudget(url)
        budget.acquire(key, 2, wait=0, ttl=ttl)
        budget.acquire(key, 2, wait=0, ttl=ttl)
        ready.set()
        release.wait(60)

    worker = ctx.Process(target=hold, args=(redis_url,))
    worker.start()
    assert ready.wait(30)
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(30)


def test_leases_of_a_dead_worker_are_held_until_they_expire(redis_url):
    """A killed worker's leases still count (nothing released them): the next caller is
    refused.  Leases of a minute, so that no machine is slow enough to see them expire
    first (with 1 s leases a loaded machine did: the refusal was not raised)."""
    key = f"dead-held-{os.getpid()}-{time.monotonic_ns()}"
    _killed_holder(redis_url, key, 60.0)
    with pytest.raises(EgressDenied, match="connection_budget"):
        RedisBudget(redis_url).acquire(key, 2, wait=0, ttl=1.0)
    assert RedisBudget(redis_url).held(key) == 2


def test_leases_of_a_dead_worker_expire(redis_url):
    """A killed worker's short leases expire on Redis' clock, with no cleanup job: a caller
    waiting for a slot gets one (the wait bounds the test, not the machine's speed)."""
    key = f"dead-{os.getpid()}-{time.monotonic_ns()}"
    _killed_holder(redis_url, key, 0.5)
    budget = RedisBudget(redis_url)
    # Both slots again: both leases expired (the wait bounds the test, not the machine).
    leases = [budget.acquire(key, 2, wait=30.0, ttl=30.0) for _ in range(2)]
    for lease in leases:
        lease.release()
    assert budget.held(key) == 0


def test_unreachable_redis_fails_closed(tmp_path):
    budget = RedisBudget(f"unix://{tmp_path}/no-such.sock")
    with pytest.raises(EgressDenied) as caught:
        budget.acquire("k", 2, wait=0, ttl=1)
    assert caught.value.reason == "connection_budget_unavailable"


def test_local_budget_waits_then_refuses():
    budget = LocalBudget()
    first = budget.acquire("k", 1, wait=0, ttl=1)
    with pytest.raises(EgressDenied, match="connection_budget"):
        budget.acquire("k", 1, wait=0.05, ttl=1)
    threading.Timer(0.1, first.release).start()
    budget.acquire("k", 1, wait=5, ttl=1).release()
    first.release()  # idempotent
    assert budget.held("k") == 0


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
@pytest.mark.parametrize("use_redis", [False, True])
def test_n_plus_one_real_connections(plugin_lab, settings, use_redis, request):
    """N connections held open on a slow lab server; connection N+1 of the same instance
    waits its connect budget and is refused, and never reaches the server."""
    if use_redis:
        settings.WEBFETCH_PLUGIN_REDIS_URL = request.getfixturevalue("redis_url")
    settings.WEBFETCH_PLUGIN_MAX_CONNECTIONS = 2
    settings.WEBFETCH_TIMEOUT = 2.0
    settings.WEBFETCH_CONNECT_TIMEOUT = 0.3
    instance = services.install("example")
    outcomes = []

    def slow():
        try:
            instance.http.get("http://granted.lab.example/slow")
            outcomes.append("done")
        except EgressDenied as exc:
            outcomes.append(exc.reason)
        except Exception as exc:
            outcomes.append(type(exc).__name__)

    holders = [threading.Thread(target=slow) for _ in range(2)]
    for count, t in enumerate(holders, 1):
        # One after the other: SQLite's shared cache (the test database) refuses two
        # concurrent audit writes instead of queueing them.
        t.start()
        assert plugin_lab.wait_for(lambda n=count: len(plugin_lab.accepts()) == n)
    with pytest.raises(EgressDenied) as caught:
        instance.http.get("http://granted.lab.example/plain")
    assert caught.value.reason == "connection_budget"
    for t in holders:
        t.join(10)
    assert sorted(outcomes) == ["FetchTimeout", "FetchTimeout"]
    assert len(plugin_lab.accepts()) == 2
    # The slots were released when the connections closed.
    assert instance.http.get("http://granted.lab.example/plain").status_code == 200
