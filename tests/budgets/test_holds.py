"""The one door for what a principal holds open (``budgets.holds``): counted per principal
and per process under one lock, refused past a bound with ``too_many_open``, released once;
a property test searches for an order of acquires and releases that breaks a bound."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.budgets import holds
from django_webfetch.conf import conf

pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture(autouse=True)
def _nothing_held():
    """These tests hold nothing else: other tests of the process that left a response
    unclosed are collected first."""
    import gc

    gc.collect()
    assert sum(holds.counts().values()) == 0, holds.counts()
    yield
    assert sum(holds.counts().values()) == 0, "a test leaked a hold"


def gauge(kind: str) -> float | None:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(f"webfetch_open_{kind}")


def test_one_principal_is_refused_at_its_bound_and_another_is_still_served(settings):
    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {"streams": 3}
    settings.WEBFETCH_OPEN_RETRY_AFTER = 7
    mine = [holds.acquire("streams", ("user", "1")) for _ in range(3)]
    with pytest.raises(holds.TooManyOpen) as refused:
        holds.acquire("streams", ("user", "1"))
    assert refused.value.as_dict() == {
        "detail": refused.value.args[0],
        "code": "too_many_open",
        "kind": "streams",
        "retry_after": 7,
    }
    assert refused.value.scope == "principal" and refused.value.limit == 3
    # Another principal, and another kind of the same principal, are still served.
    other = holds.acquire("streams", ("user", "2"))
    poll = holds.acquire("long_polls", ("user", "1"))
    assert holds.counts()["streams"] == 4
    assert holds.principal_counts(("user", "1"))["streams"] == 3
    for lease in [*mine, other, poll]:
        lease.release()
    assert holds.counts()["streams"] == 0


def test_the_process_bound_holds_for_everyone_together(settings):
    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {"long_polls": 2}
    settings.WEBFETCH_OPEN_PER_PROCESS = {"long_polls": 5}
    leases = [holds.acquire("long_polls", ("user", str(n // 2))) for n in range(5)]
    with pytest.raises(holds.TooManyOpen) as refused:
        holds.acquire("long_polls", ("user", "new"))
    assert refused.value.scope == "process" and refused.value.limit == 5
    leases.pop().release()
    leases.append(holds.acquire("long_polls", ("user", "new")))
    for lease in leases:
        lease.release()


def test_a_token_is_bounded_alone_and_its_user_across_tokens(settings):
    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {"mcp_sessions": 2}
    user = ("user", "9")
    a = [holds.acquire("mcp_sessions", user, ("token", "a")) for _ in range(2)]
    # The user is at its bound: another token of the same user opens nothing either.
    with pytest.raises(holds.TooManyOpen):
        holds.acquire("mcp_sessions", user, ("token", "b"))
    a[0].release()
    b = holds.acquire("mcp_sessions", user, ("token", "b"))
    # A refusal takes nothing: no count of the token moved.
    assert holds.principal_counts(("token", "b"))["mcp_sessions"] == 1
    assert holds.principal_counts(("token", "a"))["mcp_sessions"] == 1
    for lease in (a[1], b):
        lease.release()


def test_a_lease_is_released_once_and_the_context_managers_release_it():
    lease = holds.acquire("mcp_waits", ("user", "1"))
    lease.release()
    lease.release()
    assert holds.counts()["mcp_waits"] == 0 and lease.released
    with holds.hold("mcp_waits", ("user", "1")):
        assert holds.counts()["mcp_waits"] == 1
    assert holds.counts()["mcp_waits"] == 0

    async def held() -> int:
        async with holds.hold("mcp_waits", ("user", "1")):
            return holds.counts()["mcp_waits"]

    assert asyncio.run(held()) == 1
    with pytest.raises(RuntimeError), holds.hold("streams", ("user", "1")):
        raise RuntimeError("the block failed")
    assert holds.counts()["streams"] == 0


def test_the_gauges_show_what_is_held_and_refusals_are_counted(settings):
    from prometheus_client import REGISTRY

    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {"streams": 1}
    before = (
        REGISTRY.get_sample_value("webfetch_refusals_total", {"kind": "too_many_open:streams"})
        or 0.0
    )
    with holds.hold("streams", ("user", "1")), holds.hold("streams", ("user", "2")):
        assert gauge("streams") == 2
        with pytest.raises(holds.TooManyOpen):
            holds.acquire("streams", ("user", "1"))
    assert gauge("streams") == 0
    after = REGISTRY.get_sample_value("webfetch_refusals_total", {"kind": "too_many_open:streams"})
    assert after == before + 1


def test_unknown_kinds_and_missing_principals_are_errors():
    with pytest.raises(ValueError, match="unknown kind"):
        holds.acquire("sockets", ("user", "1"))
    with pytest.raises(ValueError, match="principal"):
        holds.acquire("streams")
    with pytest.raises(ValueError, match="unknown kind"):
        holds.surface("sockets", "x")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "a dict"),
        ({"sockets": 1}, "keys among"),
        ({"streams": 0}, "integers 1..100000"),
        ({"streams": True}, "integers 1..100000"),
        ({"streams": "3"}, "integers 1..100000"),
    ],
)
def test_bad_bounds_name_the_setting(settings, value, message):
    from django_webfetch.exceptions import WebFetchConfigurationError

    settings.WEBFETCH_OPEN_PER_PRINCIPAL = value
    with pytest.raises(WebFetchConfigurationError, match=f"WEBFETCH_OPEN_PER_PRINCIPAL.*{message}"):
        _ = conf.WEBFETCH_OPEN_PER_PRINCIPAL


def test_w063_one_principal_may_hold_a_quarter_at_most(settings):
    from django_webfetch.checks import check_operations

    def w063() -> list[str]:
        return [m.msg for m in check_operations() if m.id == "django_webfetch.W063"]

    assert w063() == []  # the defaults
    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {"mcp_waits": 60}
    settings.WEBFETCH_OPEN_PER_PROCESS = {"mcp_waits": 200}
    [message] = w063()
    assert "mcp_waits" in message


def test_many_threads_never_pass_the_bounds(settings):
    """Acquire and release from many threads at once: the lock keeps every count exact."""
    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {"streams": 3}
    settings.WEBFETCH_OPEN_PER_PROCESS = {"streams": 10}
    peak = {"process": 0, "principal": 0}
    lock = threading.Lock()
    start = threading.Barrier(16)

    def worker(n: int) -> None:
        start.wait()
        for _ in range(200):
            try:
                lease = holds.acquire("streams", ("user", str(n % 4)))
            except holds.TooManyOpen:
                continue
            with lock:
                peak["process"] = max(peak["process"], holds.counts()["streams"])
                peak["principal"] = max(
                    peak["principal"], holds.principal_counts(("user", str(n % 4)))["streams"]
                )
            lease.release()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak["process"] <= 10 and peak["principal"] <= 3
    assert holds.counts()["streams"] == 0


_STEPS = st.lists(
    st.tuples(st.booleans(), st.sampled_from(holds.KINDS), st.integers(0, 5)), max_size=120
)


@settings(max_examples=150, deadline=None)
@given(steps=_STEPS)
def test_no_order_of_acquires_and_releases_breaks_a_bound(steps):
    """Hypothesis looks for the worst order: the counts always equal a plain model, no
    principal passes its bound, the process never passes its own, and a refusal happens
    exactly when the model says a bound is reached."""
    from django.test import override_settings

    per_principal, per_process = 2, 5
    bounds = {
        "WEBFETCH_OPEN_PER_PRINCIPAL": dict.fromkeys(holds.KINDS, per_principal),
        "WEBFETCH_OPEN_PER_PROCESS": dict.fromkeys(holds.KINDS, per_process),
    }
    held: list[holds.Lease] = []
    model: dict[tuple[str, str], int] = {}
    with override_settings(**bounds):
        try:
            for take, kind, who in steps:
                principal = ("user", str(who))
                if take:
                    total = sum(n for (k, _), n in model.items() if k == kind)
                    full = total >= per_process or model.get((kind, principal[1]), 0) >= (
                        per_principal
                    )
                    try:
                        held.append(holds.acquire(kind, principal))
                    except holds.TooManyOpen:
                        assert full
                        continue
                    assert not full
                    model[(kind, principal[1])] = model.get((kind, principal[1]), 0) + 1
                elif held:
                    lease = held.pop(who % len(held))
                    lease.release()
                    key = (lease.kind, lease.principals[0][1])
                    model[key] -= 1
                for kind_ in holds.KINDS:
                    assert holds.counts()[kind_] == sum(
                        n for (k, _), n in model.items() if k == kind_
                    )
                    assert holds.counts()[kind_] <= per_process
        finally:
            for lease in held:
                lease.release()
