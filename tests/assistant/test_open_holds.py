"""What one editor may hold open on the event stream (issue 29, finding 4): streams and
long-polls are holds (``budgets.holds``), bounded per user and per process; past the bound
the editor is answered ``429`` ``too_many_open`` with ``Retry-After`` (poll instead) while
every other editor is still served; the holds are released when a stream or a wait ends,
and no waiter keeps a database connection of its own (counted on PostgreSQL, where
tests/runs/test_postgres.py runs this file again).

Served by uvicorn (ASGI) in this process, so the counts and the gauges are read here."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import connection

from django_webfetch.budgets import holds
from tests.asgi import post_message
from tests.runs.infra import wait_for

from . import test_streaming as streaming
from .provider import Turn
from .test_streaming import read_sse, session_cookie

# The fixtures of the streaming tests: the background runner, uvicorn in a thread.
asgi_site = streaming.asgi_site
background = streaming.background

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True, serialized_rollback=True)]


def gauge(kind: str) -> float | None:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(f"webfetch_open_{kind}")


@contextlib.contextmanager
def paused_run(provider: Any, client: httpx.Client) -> Iterator[str]:
    """A run of the client's editor whose provider answer waits: it stays open."""
    pause = threading.Event()
    provider.add(Turn(text="An answer that waits for the test, then ends.", pause=pause))
    posted = post_message(client, "hold on")
    assert posted.status_code == 202, posted.text
    try:
        settled_in_the_pause(provider)
        yield posted.json()["id"]
    finally:
        pause.set()


def settled_in_the_pause(provider: Any) -> None:
    """The provider has sent its first chunk and waits: the run wrote every event it writes
    before the pause (a first chunk is under ``MIN_DELTA_CHARS``: no delta yet), so a
    ``since`` read now has nothing after it until the pause ends, however slow the machine."""
    wait_for(lambda: provider.written, 60, what="the provider's first chunk")


def assert_told_to_poll(response: httpx.Response, kind: str) -> None:
    assert response.status_code == 429, response.text
    body = response.json()
    assert body["code"] == "too_many_open" and body["kind"] == kind
    assert int(response.headers["Retry-After"]) == body["retry_after"] >= 1


@pytest.fixture(autouse=True)
def _nothing_held_before() -> None:
    import gc

    gc.collect()  # a response another test left unclosed gives its hold back
    assert sum(holds.counts().values()) == 0, holds.counts()


def held(kind: str, n: int) -> None:
    try:
        wait_for(lambda: holds.counts()[kind] == n, 30, what=f"{n} {kind} held")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {holds.counts()}") from None


def backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


def kept_backends(reads: int = 10) -> int:
    """The fewest backends over ``reads`` reads a tenth of a second apart: a connection kept
    (by a stream) is in every read, one opened for a moment (the lease keeper's beat, the
    notifier's read, a loop's database write) is not."""
    counts = []
    for _ in range(reads):
        counts.append(backends())
        time.sleep(0.1)
    return min(counts)


def test_an_editors_streams_past_the_bound_are_told_to_poll(
    provider, asgi_site, editor, user_factory, settings
):
    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {"streams": 3}
    settings.WEBFETCH_OPEN_RETRY_AFTER = 4
    other = user_factory(staff=True, username="other-editor")
    with (
        httpx.Client(base_url=asgi_site, cookies=session_cookie(editor), timeout=60) as client,
        httpx.Client(base_url=asgi_site, cookies=session_cookie(other), timeout=60) as theirs,
        paused_run(provider, client) as run_id,
        contextlib.ExitStack() as streams,
    ):
        baseline = backends() if connection.vendor == "postgresql" else 0
        url = f"/api/runs/{run_id}/stream/"
        readers = []  # kept: a reader dropped closes its connection (and the stream)
        for _ in range(3):
            response = streams.enter_context(client.stream("GET", url))
            assert response.status_code == 200
            readers.append(response.iter_lines())
            assert next(readers[-1]).startswith("retry: ")
        held("streams", 3)
        assert gauge("streams") == 3
        # Every further stream of this editor (every tab's EventSource) is told to poll ...
        assert_told_to_poll(client.get(url, headers={"Accept": "text/event-stream"}), "streams")
        assert holds.counts()["streams"] == 3
        # ... and polling works: a plain read of the events holds nothing.
        page = client.get(f"/api/runs/{run_id}/events/")
        assert page.status_code == 200 and page.json()["run"] == run_id
        if connection.vendor == "postgresql":
            # Three streams wait, and none keeps a database connection of its own: the
            # process's one notifier reads for all of them.
            assert kept_backends() - baseline <= 1, backends()
        # Another editor is still served.
        with (
            paused_run(provider, theirs) as their_run,
            theirs.stream("GET", f"/api/runs/{their_run}/stream/") as response,
        ):
            assert response.status_code == 200
            held("streams", 4)
            assert holds.principal_counts(("user", str(other.pk)))["streams"] == 1
    # The streams closed by the client gave their holds back.
    held("streams", 0)
    assert gauge("streams") == 0


def test_an_editors_long_polls_past_the_bound_are_told_to_poll(
    provider, asgi_site, editor, user_factory, settings
):
    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {"long_polls": 2}
    other = user_factory(staff=True, username="other-editor")
    answers: list[httpx.Response] = []
    cookies = session_cookie(editor)
    with (
        httpx.Client(base_url=asgi_site, cookies=cookies, timeout=60) as client,
        httpx.Client(base_url=asgi_site, cookies=session_cookie(other), timeout=60) as theirs,
    ):
        pause = threading.Event()
        provider.add(Turn(text="Waited for, then written.", pause=pause))
        posted = post_message(client, "wait for it")
        run_id = posted.json()["id"]
        settled_in_the_pause(provider)
        since = client.get(f"/api/runs/{run_id}/events/").json()["last_event"]
        url = f"/api/runs/{run_id}/events/?since={since}&wait=25"

        def long_poll() -> None:
            with httpx.Client(base_url=asgi_site, cookies=cookies, timeout=60) as own:
                answers.append(own.get(url))

        waiters = [threading.Thread(target=long_poll) for _ in range(2)]
        try:
            for waiter in waiters:
                waiter.start()
            held("long_polls", 2)
            assert gauge("long_polls") == 2
            assert_told_to_poll(client.get(url), "long_polls")
            # Without ``wait`` nothing is held: the page answers at once.
            assert client.get(f"/api/runs/{run_id}/events/?since={since}").status_code == 200
            # Another editor's long-poll is served (their run is finished: at once).
            provider.add(Turn(text="Theirs."))
            their_run = post_message(theirs, "mine").json()["id"]
            wait_for(
                lambda: theirs.get(f"/api/runs/{their_run}/").json()["state"] == "completed",
                60,
                what="their run",
            )
            their = theirs.get(f"/api/runs/{their_run}/events/?since=0&wait=25")
            assert their.status_code == 200 and their.json()["events"]
        finally:
            pause.set()
            for waiter in waiters:
                waiter.join(60)
    # The provider wrote: both waiters were woken with the new events, and let go.
    assert [a.status_code for a in answers] == [200, 200]
    assert all(a.json()["events"] and a.json()["events"][0]["seq"] > since for a in answers)
    held("long_polls", 0)


def test_a_refused_stream_holds_nothing_and_a_stream_of_a_finished_run_lets_go(
    provider, asgi_site, editor, settings
):
    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {"streams": 1}
    with httpx.Client(base_url=asgi_site, cookies=session_cookie(editor), timeout=60) as client:
        provider.add(Turn(text="Done at once."))
        run_id = post_message(client, "quick").json()["id"]
        # The stream ends by itself after the run's last event, and gives its hold back;
        # so the next one (the same editor's) is served.
        for _ in range(3):
            with client.stream("GET", f"/api/runs/{run_id}/stream/") as response:
                assert response.status_code == 200
                kinds = [e.get("event") for e in read_sse(response)]
            assert "completed" in kinds
            held("streams", 0)


# This file runs again on PostgreSQL (the stock setting where one editor's streams made every
# other request answer 500: the bounds, and no connection per waiter), in the one PostgreSQL
# session of tests/runs/test_postgres.py.
