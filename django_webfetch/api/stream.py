"""A run's events as Server-Sent Events: ``GET runs/{id}/stream/``.

Under ASGI the view is async: it answers with a ``StreamingHttpResponse`` over an async
iterator that writes the run's new events (``RunEvent`` rows) as ``id: <seq>`` /
``event: <kind>`` / ``data: <json>``, sends ``: ping`` after ``WEBFETCH_STREAM_HEARTBEAT``
seconds (15) of silence, and ends after the run's last event (``completed``, ``failed``,
``cancelled``), or after ``MAX_STREAM_SECONDS``, or when the server is asked to stop
(``api.shutdown``; seen within ``STOP_CHECK_SECONDS``): the client reconnects with
``Last-Event-ID`` and goes on where it left off.  Between two reads it waits on the
process's one notifier (``assistant.watch``): no polling thread and no database connection of
its own while it waits; each read is a short one in a worker thread, whose connection is closed
or kept as ``CONN_MAX_AGE`` says, and the checks' connection is closed before the stream
starts.

Under WSGI the same view answers the same stream but ends it after ``WSGI_STREAM_SECONDS``
(25): a WSGI worker is held while it streams, as for the long-poll of ``events/?wait=``;
``EventSource`` reconnects by itself.

An open stream is a hold of kind ``streams`` (``budgets.holds``): at most
``WEBFETCH_OPEN_PER_PRINCIPAL["streams"]`` per user and ``WEBFETCH_OPEN_PER_PROCESS["streams"]``
per process; past a bound the answer is ``429`` ``too_many_open`` with ``Retry-After``, and
the client polls ``runs/{id}/events/`` instead.

Who may read it, and the errors: exactly as ``runs/{id}/events/`` (the run's owner only;
``404`` for anyone else), because the check is that DRF view's own code
(:class:`RunStreamCheckView`), run before the stream starts.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections, connections
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from django_webfetch.assistant import services, watch
from django_webfetch.assistant.models import RUN_FINISHED_STATES, AssistantRun
from django_webfetch.budgets import holds
from django_webfetch.conf import conf

from .assistant import AssistantView, RunEventsView
from .shutdown import stopping, watch_signals
from .views import release_pooled_connection, too_many_open_response

__all__ = [
    "END_KINDS",
    "MAX_STREAM_SECONDS",
    "POLL_INTERVAL",
    "WSGI_STREAM_SECONDS",
    "RunStreamCheckView",
    "checked_view",
    "run_events",
    "run_stream",
]

#: The kinds after which a run writes no more events.
END_KINDS = frozenset({"completed", "failed", "cancelled"})
#: Seconds between two reads of the run's new events.
POLL_INTERVAL = 0.1
#: An ASGI stream ends after this long (the client reconnects with ``Last-Event-ID``).
MAX_STREAM_SECONDS = 600.0
#: How soon a waiting stream or long-poll sees that the server is stopping.
STOP_CHECK_SECONDS = 0.5
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
        return Response(
            {"run": str(run.pk), "since": query.validated_data["since"], "user": request.user.pk}
        )


_check = RunStreamCheckView.as_view()


async def checked_view(view: Any, request: HttpRequest, **kwargs: Any) -> Any:
    """Run the synchronous (DRF) ``view``; under ASGI its database connections are closed
    before the caller goes on to wait or stream (nothing is held across the wait)."""

    def run() -> Any:
        try:
            return view(request, **kwargs)
        finally:
            if isinstance(request, ASGIRequest):
                connections.close_all()

    return await sync_to_async(run, thread_sensitive=True)()


def _frame(event: dict[str, Any]) -> bytes:
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"id: {event['seq']}\nevent: {event['kind']}\ndata: {data}\n\n".encode()


def _release_request_thread() -> None:
    connections.close_all()


def _read_briefly(run_id: Any, since: int) -> tuple[str, list[dict[str, Any]]]:
    try:
        return _read(run_id, since)
    finally:
        close_old_connections()


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

    def quiet_for(self) -> float:
        """Seconds until a ping or the end is due."""
        due = min(self.last_sent + self.heartbeat, self.started + self.limit)
        return max(due - time.monotonic(), 0.0)


async def _aevents(stream: _Stream, lease: holds.Lease) -> AsyncIterator[bytes]:
    try:
        # The middleware's response phase ran on the request's thread after the checks
        # (django CMS's toolbar reads the database there): that thread's connection goes
        # back now, not when the stream ends, so an open stream holds none.
        await sync_to_async(_release_request_thread, thread_sensitive=True)()
        yield f"retry: {RETRY_MS}\n\n".encode()
        read = sync_to_async(_read_briefly, thread_sensitive=False)
        while True:
            state, events = await read(stream.run_id, stream.since)
            for frame in stream.take(state, events):
                yield frame
            if stream.done:
                return
            # The process's one notifier wakes it when the run moves (no connection held);
            # a stop of the server is seen within STOP_CHECK_SECONDS, without a read.
            while not stopping():
                quiet = stream.quiet_for()
                slice_ = min(quiet, STOP_CHECK_SECONDS)
                if await watch.wait_for_event(stream.run_id, stream.since, slice_):
                    break
                if quiet <= STOP_CHECK_SECONDS:
                    break  # a ping or the end is due
            if stopping():
                return  # the server waits for every stream to end: this one ends now
    finally:
        lease.release()


def _events(stream: _Stream, lease: holds.Lease) -> Iterator[bytes]:
    try:
        yield f"retry: {RETRY_MS}\n\n".encode()
        while True:
            state, events = _read(stream.run_id, stream.since)
            yield from stream.take(state, events)
            if stream.done:
                return
            time.sleep(POLL_INTERVAL)
    finally:
        lease.release()


class _HeldStream(StreamingHttpResponse):
    """The stream's hold is released when the stream ends, when the response is closed
    unread (the client left before the first byte), and at the latest when it is collected."""

    def __init__(self, content: Any, lease: holds.Lease) -> None:
        super().__init__(content, content_type="text/event-stream")
        self.lease = lease
        # A response dropped without being closed (a server that breaks PEP 3333) gives its
        # hold back when it is collected.
        weakref.finalize(self, lease.release)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.lease.release()


@holds.surface("streams", "django_webfetch:run-stream")
async def run_stream(request: HttpRequest, pk: Any) -> HttpResponseBase:
    """``GET runs/{id}/stream/``: the run's events as Server-Sent Events (see the module
    docstring)."""
    watch_signals()  # in the server's event loop: the main thread
    checked = await checked_view(_check, request, pk=pk)
    if checked.status_code != 200:
        return checked  # type: ignore[no-any-return]
    data = checked.data
    try:
        lease = holds.acquire("streams", ("user", str(data["user"])))
    except holds.TooManyOpen as exc:
        return too_many_open_response(exc)
    if isinstance(request, ASGIRequest):
        stream = _Stream(data["run"], data["since"], limit=MAX_STREAM_SECONDS)
        response = _HeldStream(_aevents(stream, lease), lease)
    else:
        stream = _Stream(data["run"], data["since"], limit=WSGI_STREAM_SECONDS)
        response = _HeldStream(_events(stream, lease), lease)
    response["Cache-Control"] = "no-cache"
    # Proxies (nginx) pass each event on as it comes.
    response["X-Accel-Buffering"] = "no"
    return response


# Its checks and every error it answers are those of the DRF view (JSON with a ``code``).
run_stream.view_class = RunStreamCheckView


_events_view = RunEventsView.as_view()


def _wait_in_thread(run_id: Any, since: int, wait: float) -> None:
    """WSGI: the request's own thread waits (it is held anyway), reading the run."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not stopping():
        time.sleep(min(POLL_INTERVAL, max(deadline - time.monotonic(), 0.0)))
        state, events = _read(run_id, since)
        if events or not state or state in RUN_FINISHED_STATES:
            return


@holds.surface("long_polls", "django_webfetch:run-events")
async def run_events(request: HttpRequest, pk: Any) -> HttpResponseBase:
    """``GET runs/{id}/events/``: :class:`~.assistant.RunEventsView`, whose answer, when it
    has no event for the client yet and ``wait`` asks for it, is read again after a wait:
    a hold of kind ``long_polls`` (past a bound: ``429`` ``too_many_open``, poll instead);
    under ASGI on the process's one notifier (no polling thread, no connection while it waits)."""
    response = await checked_view(_events_view, request, pk=pk)
    wanted = getattr(response, "webfetch_wait", None)
    if response.status_code != 200 or wanted is None or wanted[0] <= 0:
        return response  # type: ignore[no-any-return]
    wait, user, since = wanted
    try:
        lease = holds.acquire("long_polls", ("user", str(user)))
    except holds.TooManyOpen as exc:
        return too_many_open_response(exc)
    with lease:
        if isinstance(request, ASGIRequest):
            watch_signals()
            # In slices: a stop of the server answers what there is within
            # STOP_CHECK_SECONDS (``api.shutdown``).
            deadline = time.monotonic() + wait
            while not stopping():
                left = deadline - time.monotonic()
                if left <= 0 or await watch.wait_for_event(
                    response.data["run"], since, min(left, STOP_CHECK_SECONDS)
                ):
                    break
        else:
            await sync_to_async(_wait_in_thread, thread_sensitive=True)(
                response.data["run"], since, wait
            )
        response = await checked_view(_events_view, request, pk=pk)
    return response  # type: ignore[no-any-return]


# Its checks and every error it answers are those of the DRF view (and its schema: the
# schema generator reads ``cls``, as of DRF's ``as_view``).
run_events.view_class = RunEventsView
run_events.cls = RunEventsView
run_events.initkwargs = {}
