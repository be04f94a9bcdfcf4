"""Serving under ASGI in the tests and benchmarks: uvicorn as ``run.sh`` starts it (in a
child process, or in a thread of the test process), and an editor's message posted over
HTTP with the session cookie."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = [
    "CSRF",
    "GRACEFUL_SHUTDOWN",
    "free_port",
    "new_conversation",
    "post_message",
    "uvicorn_command",
    "uvicorn_in_a_thread",
]

#: A CSRF secret of the tests' own (cookie and header carry the same, as Django wants).
CSRF = "s" * 32


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))  # a bind, not a connect: nothing leaves the namespace
        return int(sock.getsockname()[1])


#: ``--timeout-graceful-shutdown`` as ``example_project/run.sh`` gives it.
GRACEFUL_SHUTDOWN = 10


def uvicorn_command(
    python: str, application: str, port: int | None = None, *, lifespan: str = "off", uds: str = ""
) -> list[str]:
    """uvicorn as ``example_project/run.sh`` runs it: Django alone has no lifespan protocol;
    the example's application (with the MCP endpoint) needs ``lifespan="on"``."""
    where = ["--uds", uds] if uds else ["--host", "127.0.0.1", "--port", str(port)]
    return [
        python,
        "-m",
        "uvicorn",
        application,
        *where,
        "--lifespan",
        lifespan,
        "--timeout-graceful-shutdown",
        str(GRACEFUL_SHUTDOWN),
    ]


@contextlib.contextmanager
def uvicorn_in_a_thread(application: Any = None) -> Iterator[str]:
    """This process's Django, served by uvicorn in a thread; yields the base URL."""
    import uvicorn
    from django.core.asgi import get_asgi_application

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            application or get_asgi_application(),
            host="127.0.0.1",
            port=port,
            lifespan="off",
            log_level="warning",
            timeout_graceful_shutdown=2,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


def new_conversation(client: Any) -> str:
    """A new conversation of the client's editor (an ``httpx.Client`` with the session and
    CSRF cookies); its id."""
    response = client.post("/api/conversations/", json={}, headers={"X-CSRFToken": CSRF})
    return str(response.json()["id"])


def post_message(client: Any, content: str, conversation: str | None = None) -> Any:
    """The editor's message (in a new conversation unless one is given); the response."""
    conversation = conversation or new_conversation(client)
    return client.post(
        f"/api/conversations/{conversation}/messages/",
        json={"content": content},
        headers={"X-CSRFToken": CSRF},
    )
