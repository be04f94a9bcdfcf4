"""A run's events as Server-Sent Events: ``GET runs/{id}/stream/``.

Under ASGI the view is async: it answers with a ``StreamingHttpResponse`` over an async
iterator that reads the run's new events (``RunEvent`` rows) from the database every tenth
of a second (one read of the run's ``last_event``, the rows only when it moved), writes
each as ``id: <seq>`` / ``event: <kind>`` / ``data: <json>``, sends ``: ping`` after
``WEBFETCH_STREAM_HEARTBEAT`` seconds (15) of silence, and ends after the run's last event
(``completed``, ``failed``, ``cancelled``), or after ``MAX_STREAM_SECONDS``, or when the
server is asked to stop (``api.shutdown``): the client reconnects with ``Last-Event-ID``
and goes on where it left off.  No worker
thread is held while it waits.

Under WSGI the same view answers the same stream but ends it after ``WSGI_STREAM_SECONDS``
(25): a WSGI worker is held while it streams, as for the long-poll of ``events/?wait=``;
``EventSource`` reconnects by itself.

Who may read it, and the errors: exactly as ``runs/{id}/events/`` (the run's owner only;
``404`` for anyone else), because the check is that DRF view's own code
(:class:`RunStreamCheckView`), run before the stream starts.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from django_webfetch.assistant import services
from django_webfetch.assistant.models import RUN_FINISHED_STATES, AssistantRun
from django_webfetch.conf import conf

from .assistant import AssistantView
from .shutdown import stopping, watch_signals
from .views import release_pooled_connection

__all__ = [
    "END_KINDS",
    "MAX_STREAM_SECONDS",
    "POLL_INTERVAL",
    "WSGI_STREAM_SECONDS",
    "RunStreamCheckView",
    "run_stream",
]

#: The kinds after which a run writes no more events.
END_KINDS = frozenset({"completed", "failed", "cancelled"})
#: Seconds between two reads of the run's new events.
POLL_INTERVAL = 0.1
#: An ASGI stream ends after this long (the client reconnects with ``Last-Event-ID``).
MAX_STREAM_SECONDS = 600.0
#: A WSGI stream ends after this long: it holds a worker thread.
WSGI_STREAM_SECONDS = 25.0
#: What ``EventSource`` waits before it reconnects, in milliseconds.
RETRY_MS = 1000


class _StreamQuery(serializers.Serializer[Any]):
    since = serializers.IntegerField(min_value=0, required=False, default=0)


class _AnyAccept(BaseContentNegotiation):
    """``EventSource`` asks for ``text/event-stream``: the checks answer (errors) in JSON
    whatever the client accepts."""

    def select_parser(self, request: Any, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        return (renderers[0], renderers[0].media_type)


class RunStreamCheckView(AssistantView):
    """The checks of ``GET runs/{id}/stream/``, in DRF: authentication, the owner-only
    permission, input errors.  Answers ``{"run", "since"}`` when the stream may start."""

    renderer_classes = [JSONRenderer]
    content_negotiation_class = _AnyAccept

    def get(self, request: Request, pk: Any) -> Response:
        run = self.get_run(request, pk)
        since = request.headers.get("Last-Event-ID") or request.query_params.get("since", "0")
        query = _StreamQuery(data={"since": since})
        query.is_valid(raise_exception=True)
        services.refresh(run)
        return Response({"run": str(run.pk), "since": query.validated_data["since"]})


_check = RunStreamCheckView.as_view()


def _frame(event: dict[str, Any]) -> bytes:
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"id: {event['seq']}\nevent: {event['kind']}\ndata: {data}\n\n".encode()


def _read(run_id: Any, since: int) -> tuple[str, list[dict[str, Any]]]:
    """The run's state and its events after ``since`` (at most 200); a pooled connection
    goes back to the pool after each read (a stream holds none while it waits)."""
    try:
        return _read_once(run_id, since)
    finally:
        release_pooled_connection()


def _read_once(run_id: Any, since: int) -> tuple[str, list[dict[str, Any]]]:
    run = AssistantRun.objects.filter(pk=run_id).only("pk", "state", "last_event").first()
    if run is None:
        return "", []
    if run.last_event <= since:
        return run.state, []
    return run.state, [e.as_dict() for e in services.events_since(run, since)]


class _Stream:
    """What is sent, and when it ends: shared by the async and the sync stream."""

    def __init__(self, run_id: Any, since: int, *, limit: float) -> None:
        self.run_id = run_id
        self.since = since
        self.limit = limit
        self.heartbeat = conf.WEBFETCH_STREAM_HEARTBEAT
        self.started = time.monotonic()
        self.last_sent = self.started
        self.done = False

    def take(self, state: str, events: list[dict[str, Any]]) -> list[bytes]:
        frames = []
        for item in events:
            frames.append(_frame(item))
            self.since = item["seq"]
            if item["kind"] in END_KINDS:
                self.done = True
        if not events and (not state or state in RUN_FINISHED_STATES):
            self.done = True  # finished, and every event sent
        now = time.monotonic()
        if frames:
            self.last_sent = now
        elif now - self.last_sent >= self.heartbeat:
            frames.append(b": ping\n\n")
            self.last_sent = now
        if now - self.started >= self.limit or stopping():
            # The server stops: the client reconnects (Last-Event-ID) to the next one.
            self.done = True
        return frames


async def _aevents(stream: _Stream) -> AsyncIterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    read = sync_to_async(_read, thread_sensitive=True)
    while True:
        if stopping():
            return  # without another read: the server waits for every stream to end
        state, events = await read(stream.run_id, stream.since)
        for frame in stream.take(state, events):
            yield frame
        if stream.done:
            return
        await asyncio.sleep(POLL_INTERVAL)


def _events(stream: _Stream) -> Iterator[bytes]:
    yield f"retry: {RETRY_MS}\n\n".encode()
    while True:
        state, events = _read(stream.run_id, stream.since)
        yield from stream.take(state, events)
        if stream.done:
            return
        time.sleep(POLL_INTERVAL)


async def run_stream(request: HttpRequest, pk: Any) -> HttpResponseBase:
    """``GET runs/{id}/stream/``: the run's events as Server-Sent Events (see the module
    docstring)."""
    watch_signals()  # in the server's event loop: the main thread
    checked = await sync_to_async(_check, thread_sensitive=True)(request, pk=pk)
    if checked.status_code != 200:
        return checked
    data = checked.data
    if isinstance(request, ASGIRequest):
        stream = _Stream(data["run"], data["since"], limit=MAX_STREAM_SECONDS)
        response = StreamingHttpResponse(_aevents(stream), content_type="text/event-stream")
    else:
        stream = _Stream(data["run"], data["since"], limit=WSGI_STREAM_SECONDS)
        response = StreamingHttpResponse(_events(stream), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    # Proxies (nginx) pass each event on as it comes.
    response["X-Accel-Buffering"] = "no"
    return response


# Its checks and every error it answers are those of the DRF view (JSON with a ``code``).
run_stream.view_class = RunStreamCheckView  # type: ignore[attr-defined]
