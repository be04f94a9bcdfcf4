"""Requests return at once, answers stream: the background runner, ``text_delta`` events
from the provider's real streaming wire formats (the scripted provider in the lab), the
long-poll, Server-Sent Events under uvicorn, and a server killed mid-run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from rest_framework.test import APIClient

from django_webfetch.models import AssistantRun
from django_webfetch.runs.runner import runner
from tests.asgi import CSRF, free_port, post_message, uvicorn_in_a_thread
from tests.runs.infra import wait_for
from tests.settle import settled_run

from .provider import Turn
from .servers import serve as _serve
from .servers import served as _served
from .servers import server_env

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True, serialized_rollback=True)]
BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"], indirect=True)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def background(settings: Any) -> Iterator[Any]:
    settings.WEBFETCH_RUNNER = "background"
    settings.WEBFETCH_RUNNER_SWEEP_EVERY = 1
    runner.stop()
    yield runner
    runner.wait_idle(30)
    runner.stop()


@pytest.fixture
def api(editor: Any, settings: Any) -> APIClient:
    settings.ROOT_URLCONF = "tests.runs.urls"
    client = APIClient()
    client.force_login(editor)
    return client


@pytest.fixture
def news_page(lab_settings: Any, group_factory: Any) -> str:
    """A public page in the lab, for ``fetch_external_url`` (group ``web`` enabled)."""
    group_factory("web", enabled=True)
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[2]])
    return str(lab_settings.url("news.lab.example", "/page", scheme="https"))


def post(api: Any, content: str) -> Any:
    conv = api.post("/api/conversations/", {}, format="json").json()["id"]
    return api.post(f"/api/conversations/{conv}/messages/", {"content": content}, format="json")


def events_until(api: Any, run_id: str, done: Any, *, timeout: float = 60.0) -> list[dict]:
    """Long-poll the run's events until ``done(events)``; every event, in order."""
    seen: list[dict] = []

    def more() -> bool:
        since = seen[-1]["seq"] if seen else 0
        page = api.get(f"/api/runs/{run_id}/events/", {"since": since, "wait": 5}).json()
        seen.extend(page["events"])
        return bool(done(seen))

    wait_for(more, timeout, interval=0, what="the run's events")
    return seen


def finished(events: list[dict]) -> bool:
    return any(e["kind"] in ("completed", "failed", "cancelled") for e in events)


def kinds(events: list[dict]) -> list[str]:
    return [e["kind"] for e in events]


# -- requests return at once ------------------------------------------------------------------


@BOTH
def test_posting_a_message_answers_before_the_provider_may_answer(api, provider, background):
    """The provider holds its answer until the test releases it: a request that waited for
    the run would never have come back to be asserted on."""
    hold = threading.Event()
    provider.add(Turn(text="The answer, at last.", hold=hold))
    response = post(api, "A slow question")
    assert not hold.is_set()
    assert response.status_code == 202, response.content
    run = response.json()
    assert (run["state"], run["final_message"]) == ("running", None)
    assert response["Location"].endswith(f"/api/runs/{run['id']}/")
    assert run["stream_url"].endswith(f"/api/runs/{run['id']}/stream/")
    # The runner asks the provider on its own thread, after the answer went out.
    assert provider.arrived.wait(30)
    assert AssistantRun.objects.get(pk=run["id"]).state == "running"
    hold.set()
    events = events_until(api, run["id"], finished)
    assert kinds(events)[-1] == "completed"
    final = api.get(f"/api/runs/{run['id']}/").json()
    assert final["final_message"]["content"] == "The answer, at last."
    assert AssistantRun.objects.get(pk=run["id"]).worker.startswith("in-process:")


def test_an_approval_answers_before_the_run_goes_on(api, provider, background, news_page, approver):
    """Approving runs the fetch and the next provider step off the request: the next step's
    answer is held, and the approval's response is there."""
    url = news_page
    hold = threading.Event()
    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": url})]),
        Turn(text="Read it.", hold=hold),
    )
    run = post(api, "Read the news page").json()
    events = events_until(api, run["id"], lambda ev: "paused" in kinds(ev))
    [paused] = [e for e in events if e["kind"] == "paused"]
    [call_id] = paused["data"]["calls"]
    approver_api = APIClient()
    approver_api.force_login(approver)
    response = approver_api.post(f"/api/calls/{call_id}/approve/", {}, format="json")
    assert not hold.is_set()
    assert response.status_code == 202, response.content
    assert response.json()["state"] in ("approved", "running")
    wait_for(lambda: len(provider.requests) == 2, 30, what="the second provider request")
    hold.set()
    events = events_until(api, run["id"], finished)
    order = kinds(events)
    assert order.index("paused") < order.index("resumed") < order.index("completed")
    states = [e["data"]["state"] for e in events if e["kind"] == "call_state"]
    assert states == ["approved", "running", "succeeded"]


# -- streaming ----------------------------------------------------------------------------------


@BOTH
def test_the_answer_streams_as_text_deltas_before_the_run_ends(api, provider, background):
    pause = threading.Event()
    text = "The first forty characters of an answer, then the rest of it, after the pause."
    provider.add(Turn(text=text, chunk=40, pause=pause))
    run = post(api, "Stream it").json()
    # The provider wrote its first chunk and waits: the delta is there, the run is not over.
    early = events_until(api, run["id"], lambda ev: "text_delta" in kinds(ev))
    [first] = [e for e in early if e["kind"] == "text_delta"]
    assert first["data"] == {"text": text[:40], "step": 1}
    assert AssistantRun.objects.get(pk=run["id"]).state == "running"
    assert "completed" not in kinds(early)
    pause.set()
    events = early + events_until(
        api, run["id"], finished, timeout=60
    )  # from where the first poll stopped
    events = list({e["seq"]: e for e in events}.values())
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    deltas = [e["data"]["text"] for e in events if e["kind"] == "text_delta"]
    assert "".join(deltas) == text
    order = kinds(events)
    assert order[:2] == ["run_started", "started"]
    assert order.index("text_delta") < order.index("step") < order.index("completed")
    assert events[-1]["data"]["incomplete"] is False
    final = api.get(f"/api/runs/{run['id']}/").json()
    assert final["final_message"]["content"] == text


def test_deltas_are_coalesced_and_bounded(api, provider, background):
    """A provider that streams two characters at a time: at least 32 characters per
    event, far fewer rows than chunks, and the text whole."""
    text = "".join(f"word{i} " for i in range(200))
    provider.add(Turn(text=text, chunk=2))
    run = post(api, "Many tiny chunks").json()
    events = events_until(api, run["id"], finished)
    deltas = [e["data"]["text"] for e in events if e["kind"] == "text_delta"]
    assert "".join(deltas) == text
    assert all(len(d) >= 32 for d in deltas[:-1])
    assert len(deltas) <= len(text) // 32 + 1


def test_the_offline_planner_streams_its_answer_too(api, background):
    run = post(api, "What can you do?").json()
    events = events_until(api, run["id"], finished)
    final = api.get(f"/api/runs/{run['id']}/").json()
    assert final["offline"] is True and final["state"] == "completed"
    deltas = "".join(e["data"]["text"] for e in events if e["kind"] == "text_delta")
    assert deltas == final["final_message"]["content"] and deltas


def test_a_denied_call_streams_its_state_and_the_comment(
    api, provider, background, news_page, approver
):
    url = news_page
    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": url})]),
        Turn(text="I could not read it."),
    )
    run = post(api, "Read the news page").json()
    events = events_until(api, run["id"], lambda ev: "paused" in kinds(ev))
    [requested] = [e for e in events if e["kind"] == "call_requested"]
    assert requested["data"]["state"] == "awaiting_approval"
    call_id = requested["data"]["call"]
    approver_api = APIClient()
    approver_api.force_login(approver)
    denied = approver_api.post(
        f"/api/calls/{call_id}/deny/", {"comment": "Not that site, please."}, format="json"
    )
    assert (denied.status_code, denied.json()["state"]) == (200, "denied")
    events = events + events_until(api, run["id"], finished)
    [state] = [e for e in events if e["kind"] == "call_state"]
    assert state["data"] == {
        "call": call_id,
        "tool": "fetch_external_url",
        "state": "denied",
        "reason": state["data"]["reason"],
        "comment": "Not that site, please.",
    }
    order = kinds(events)
    assert order.index("paused") < order.index("call_state") < order.index("resumed")
    assert order[-1] == "completed"


# -- the documented schema ---------------------------------------------------------------------


def documented_schema() -> dict[str, Any]:
    """The JSON Schema of docs/assistant.rst (the code block titled ``RunEvent``)."""
    text = (ROOT / "docs" / "assistant.rst").read_text()
    directive = text.rindex(".. code-block:: json", 0, text.index('"title": "RunEvent"'))
    lines = []
    for line in text[directive:].splitlines()[2:]:
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    return json.loads("\n".join(lines))


def test_every_event_matches_the_documented_schema(api, provider, background, news_page, approver):
    import jsonschema

    url = news_page
    provider.add(
        Turn(text="Let me read it first.", tool_calls=[("fetch_external_url", {"url": url})]),
        Turn(text="It says what it says, and here it is in a few words."),
    )
    run = post(api, "Read the news page").json()
    events = events_until(api, run["id"], lambda ev: "paused" in kinds(ev))
    call_id = next(e for e in events if e["kind"] == "paused")["data"]["calls"][0]
    approver_api = APIClient()
    approver_api.force_login(approver)
    assert approver_api.post(f"/api/calls/{call_id}/approve/", {}, format="json").status_code == 202
    events = events + events_until(api, run["id"], finished)
    offline = post(api, "And now without tools? cancel me").json()
    events += events_until(api, offline["id"], finished)
    schema = documented_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    for item in events:
        validator.validate(item)
    seen = set(kinds(events))
    assert {"run_started", "started", "text_delta", "step", "call_requested", "call_state"} <= seen
    assert {"paused", "resumed", "tool_results", "completed"} <= seen
    assert set(schema["properties"]["kind"]["enum"]) >= seen


# -- the long-poll ------------------------------------------------------------------------------


def test_the_long_poll_answers_at_once_when_there_are_events(api):
    response = post(api, "hello")
    assert response.status_code == 202, response.content
    run = settled_run(response.json())
    assert run.state == "completed"
    page = api.get(f"/api/runs/{run.pk}/events/", {"since": 0, "wait": 25}).json()
    assert page["events"] and page["state"] == "completed"
    # Finished, nothing after the last event: an empty page, at once.
    last = page["last_event"]
    empty = api.get(f"/api/runs/{run.pk}/events/", {"since": last, "wait": 25}).json()
    assert empty["events"] == []


def test_the_long_poll_bounds_its_wait(api):
    run = post(api, "hello").json()
    response = api.get(f"/api/runs/{run['id']}/events/", {"wait": 26})
    assert response.status_code == 400
    assert [e["code"] for e in response.json()["errors"]["wait"]] == ["max_value"]


# -- Server-Sent Events -------------------------------------------------------------------------


def session_cookie(user: Any) -> dict[str, str]:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return {"sessionid": client.cookies["sessionid"].value, "csrftoken": CSRF}


def read_sse(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """Each event of an SSE body: ``{"id", "event", "data"}``, comments as ``{"comment"}``."""
    fields: dict[str, Any] = {}
    for line in response.iter_lines():
        if line == "":
            if fields:
                yield fields
            fields = {}
        elif line.startswith(":"):
            yield {"comment": line[1:].strip()}
        else:
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value


@contextlib.contextmanager
def loopback_only_to(lab: Any, *urls: str) -> Iterator[None]:
    """The test talks to its own servers on loopback: the lab's backstop (no connect to a
    non-public address) is narrowed to "none but those servers' ports", checked here."""
    lab.expect_private_accepts = True
    yield
    ports = {int(url.rsplit(":", 1)[1]) for url in urls}
    local = [
        c
        for c in lab.connects
        if c.event == "connect" and c.address in ("127.0.0.1", "::1") and c.port not in ports
    ]
    assert not local, f"the test connected to another local address: {local}"
    assert not lab.private_accepts()


@pytest.fixture
def asgi_site(settings: Any, background: Any, lab_settings: Any) -> Iterator[str]:
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1"]
    with uvicorn_in_a_thread() as url, loopback_only_to(lab_settings, url):
        yield url


@BOTH
def test_the_sse_stream_sends_the_events_in_order_and_ends(
    provider, asgi_site, editor, user_factory
):
    pause = threading.Event()
    text = "Streamed over Server-Sent Events, chunk after chunk, to the very end."
    provider.add(Turn(text=text, chunk=33, pause=pause))
    cookies = session_cookie(editor)
    with httpx.Client(base_url=asgi_site, cookies=cookies, timeout=60) as client:
        posted = post_message(client, "stream")
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["id"]
        received: list[dict[str, Any]] = []
        # As EventSource asks for it.
        accept = {"Accept": "text/event-stream"}
        with client.stream("GET", f"/api/runs/{run_id}/stream/", headers=accept) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["cache-control"] == "no-cache"
            for item in read_sse(response):
                if "event" not in item:
                    continue
                received.append(item)
                if item["event"] == "text_delta" and not pause.is_set():
                    # The first chunk arrived while the provider still writes.
                    assert AssistantRun.objects.get(pk=run_id).state == "running"
                    pause.set()
        # The stream ended by itself after the run's last event.
        ids = [int(e["id"]) for e in received]
        assert ids == list(range(1, len(ids) + 1))
        payloads = [json.loads(e["data"]) for e in received]
        assert [p["kind"] for p in payloads] == [e["event"] for e in received]
        assert [p["seq"] for p in payloads] == ids
        assert received[-1]["event"] == "completed"
        streamed = "".join(p["data"]["text"] for p in payloads if p["kind"] == "text_delta")
        assert streamed == text

        # Reconnecting with Last-Event-ID sends only what came after it.
        middle = ids[len(ids) // 2]
        with client.stream(
            "GET", f"/api/runs/{run_id}/stream/", headers={"Last-Event-ID": str(middle)}
        ) as again:
            rest = [int(e["id"]) for e in read_sse(again) if "id" in e]
        assert rest == ids[ids.index(middle) + 1 :]
        with client.stream("GET", f"/api/runs/{run_id}/stream/?since={ids[-2]}") as tail:
            assert [int(e["id"]) for e in read_sse(tail) if "id" in e] == ids[-1:]

    # Owner only, as the events endpoint: another editor gets 404, nobody 403.
    other = session_cookie(user_factory(staff=True, username="other"))
    with httpx.Client(base_url=asgi_site, cookies=other, timeout=30) as client:
        response = client.get(
            f"/api/runs/{run_id}/stream/", headers={"Accept": "text/event-stream"}
        )
        assert (response.status_code, response.json()["code"]) == (404, "not_found")
        events = client.get(f"/api/runs/{run_id}/events/")
        assert events.status_code == 404
    with httpx.Client(base_url=asgi_site, timeout=30) as client:
        response = client.get(f"/api/runs/{run_id}/stream/")
        assert response.status_code in (401, 403)
        assert response.status_code == client.get(f"/api/runs/{run_id}/events/").status_code
    with httpx.Client(base_url=asgi_site, cookies=cookies, timeout=30) as client:
        bad = client.get(f"/api/runs/{run_id}/stream/", params={"since": "x"})
        assert (bad.status_code, bad.json()["code"]) == (400, "invalid")


def test_the_sse_stream_pings_while_a_run_waits(provider, asgi_site, editor, settings, news_page):
    """A paused run sends nothing for a while: the stream sends ``: ping`` comments."""
    settings.WEBFETCH_STREAM_HEARTBEAT = 1
    url = news_page
    provider.add(Turn(tool_calls=[("fetch_external_url", {"url": url})]))
    api = APIClient()
    api.force_login(editor)
    run = post(api, "Read it").json()
    with (
        httpx.Client(base_url=asgi_site, cookies=session_cookie(editor), timeout=60) as client,
        client.stream("GET", f"/api/runs/{run['id']}/stream/") as response,
    ):
        seen: list[str] = []
        for item in read_sse(response):
            seen.append(item.get("event") or f": {item.get('comment')}")
            if seen[-1] == ": ping" and "paused" in seen:
                break
    # A ping may also come before the run pauses (its start is slow on a busy machine: a
    # full run saw one first); one must come while it waits.
    assert "paused" in seen and seen[-1] == ": ping", seen


def test_the_stream_under_wsgi_sends_the_same_events(api):
    """The Django test client is WSGI: the same view, a synchronous stream."""
    run = post(api, "hello").json()
    response = api.get(f"/api/runs/{run['id']}/stream/")
    assert response.status_code == 200 and response.streaming
    body = b"".join(response.streaming_content).decode()
    ids = [int(line[4:]) for line in body.splitlines() if line.startswith("id: ")]
    events = api.get(f"/api/runs/{run['id']}/events/").json()["events"]
    assert ids == [e["seq"] for e in events]
    assert body.startswith("retry: ")


# -- a server killed mid-run --------------------------------------------------------------------


def test_a_server_killed_mid_run_loses_nothing(provider, editor, lab_settings, tmp_path):
    """uvicorn (ASGI, background runner) is killed while the provider streams its answer;
    a new server's runner sweeps, finds the lost lease and finishes the run."""
    hold = threading.Event()
    provider.add(
        Turn(text="never delivered", hold=hold, repeat=Turn(text="Answered after the restart."))
    )
    env = server_env(
        lab_settings,
        WEBFETCH_TEST_ASSISTANT_TIMEOUT="3",
        WEBFETCH_TEST_SWEEP_EVERY="1",
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    cookies = session_cookie(editor)
    with loopback_only_to(lab_settings, url):
        _kill_and_restart(provider, hold, env, url, port, log, cookies)


def _kill_and_restart(provider, hold, env, url, port, log, cookies):
    first = _serve(env, port, log)
    second = None
    try:
        wait_for(lambda: _served(url), 60, interval=0.2, what="the first server")
        with httpx.Client(base_url=url, cookies=cookies, timeout=30) as client:
            posted = post_message(client, "q")
            assert posted.status_code == 202, posted.text
            run_id = posted.json()["id"]
        # The first server's runner holds the run (its lease) and waits for the provider.
        assert provider.arrived.wait(30)
        assert AssistantRun.objects.get(pk=run_id).lease_expires_at is not None
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        hold.set()
        second = _serve(env, port, log)
        wait_for(lambda: _served(url), 60, interval=0.2, what="the second server")
        with httpx.Client(base_url=url, cookies=cookies, timeout=30) as client:
            seen: list[dict[str, Any]] = []

            def done() -> bool:
                since = seen[-1]["seq"] if seen else 0
                page = client.get(
                    f"/api/runs/{run_id}/events/", params={"since": since, "wait": 5}
                ).json()
                seen.extend(page["events"])
                return finished(seen)

            wait_for(done, 90, interval=0, what="the run to finish after the restart")
            final = client.get(f"/api/runs/{run_id}/").json()
        assert final["state"] == "completed", (final, log.read_text(errors="replace")[-3000:])
        assert final["final_message"]["content"] == "Answered after the restart."
        order = kinds(seen)
        assert order.count("worker_lost") == 1
        assert order.index("worker_lost") < order.index("completed")
        assert len(provider.requests) == 2
    finally:
        hold.set()
        for process in (first, second):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(10)
