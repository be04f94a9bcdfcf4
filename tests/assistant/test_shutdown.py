"""A graceful stop does not wait for the editors watching a run: uvicorn, sent ``SIGTERM``
with Server-Sent Events streams and a long-poll open on a running run, ends them (the
clients reconnect to the next server) and exits well within its
``--timeout-graceful-shutdown`` (``tests.asgi.GRACEFUL_SHUTDOWN``, as ``run.sh`` gives it)."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import httpx
import pytest

from tests.asgi import GRACEFUL_SHUTDOWN, free_port, post_message
from tests.runs.infra import wait_for

from .provider import Turn
from .servers import server_env
from .test_streaming import _serve, _served, loopback_only_to, read_sse, session_cookie

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

STREAMS = int(os.environ.get("WEBFETCH_TEST_SHUTDOWN_STREAMS", "3"))


def test_sigterm_ends_the_open_streams_and_the_server_exits_in_time(
    provider, editor, lab_settings, tmp_path
):
    hold = threading.Event()
    provider.add(Turn(text="never delivered", hold=hold))
    env = server_env(lab_settings)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    server = _serve(env, port, log)
    try:
        with loopback_only_to(lab_settings, url):
            _stop_with_open_streams(provider, server, url, session_cookie(editor), log)
    finally:
        hold.set()
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)


def _stop_with_open_streams(provider: Any, server: Any, url: str, cookies: Any, log: Any) -> None:
    wait_for(lambda: _served(url), 60, interval=0.2, what="the server")
    with httpx.Client(base_url=url, cookies=cookies, timeout=30) as client:
        posted = post_message(client, "q")
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["id"]
    # The runner holds the run: the provider has the request and answers nothing yet.
    assert provider.arrived.wait(30)

    opened = threading.Semaphore(0)
    ended: list[tuple[str, float, Any]] = []

    def watch() -> None:
        with (
            httpx.Client(base_url=url, cookies=cookies, timeout=60) as client,
            client.stream(
                "GET", f"/api/runs/{run_id}/stream/", headers={"Accept": "text/event-stream"}
            ) as response,
        ):
            assert response.status_code == 200
            opened.release()
            try:
                seen = list(read_sse(response))
            except httpx.HTTPError as exc:
                ended.append(("stream", time.monotonic(), exc))
                return
            ended.append(("stream", time.monotonic(), seen))

    def long_poll() -> None:
        with httpx.Client(base_url=url, cookies=cookies, timeout=60) as client:
            since = client.get(f"/api/runs/{run_id}/events/").json()["last_event"]
            opened.release()
            try:
                response = client.get(
                    f"/api/runs/{run_id}/events/", params={"since": since, "wait": 25}
                )
            except httpx.HTTPError as exc:
                ended.append(("long-poll", time.monotonic(), exc))
                return
            ended.append(("long-poll", time.monotonic(), response.status_code))

    threads = [threading.Thread(target=watch, daemon=True) for _ in range(STREAMS)]
    threads.append(threading.Thread(target=long_poll, daemon=True))
    for thread in threads:
        thread.start()
    for _ in threads:
        assert opened.acquire(timeout=30)
    time.sleep(1.0)  # every stream sent its first frames and waits; the long-poll waits
    assert server.poll() is None

    stopped = time.monotonic()
    server.send_signal(signal.SIGTERM)
    server.wait(GRACEFUL_SHUTDOWN + 20)
    took = time.monotonic() - stopped
    for thread in threads:
        thread.join(10)
    output = log.read_text(errors="replace")
    print(f"SIGTERM to exit: {took:.2f} s (timeout {GRACEFUL_SHUTDOWN} s)")
    # Exited by itself, before its graceful-shutdown timeout cancelled anything.
    assert took < GRACEFUL_SHUTDOWN, output[-3000:]
    assert "timeout graceful shutdown exceeded" not in output, output[-3000:]
    # Each stream ended as a complete response (EventSource reconnects to the next
    # server with Last-Event-ID), and the long-poll answered what it had.
    assert sorted(kind for kind, _, _ in ended) == ["long-poll"] + ["stream"] * STREAMS, ended
    for kind, _, result in ended:
        if kind == "stream":
            assert isinstance(result, list), result
            assert not any(item.get("event") in ("completed", "failed") for item in result)
        else:
            assert result == 200, result
