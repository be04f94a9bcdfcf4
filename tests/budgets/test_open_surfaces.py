"""Every surface that opens something long-lived goes through the one door
(``budgets.holds``), found by enumeration, not by trust.

- Every URL route of the project (the API, the admin, the django CMS pages, the metrics)
  is walked; a route whose view can stay open (it streams, sleeps, waits, or is a
  coroutine that awaits anything but a short read) must be marked as a surface of a kind,
  and a marked route must answer ``429`` ``too_many_open`` (with ``Retry-After``) when its
  principal is at the bound, while another principal is still served.
- Every request handler of the MCP server is enumerated: opening a session (the HTTP
  transport's session manager) and waiting for an approval (``tools/call``) are the
  long-lived ones, and both are the door's.
"""

from __future__ import annotations

import inspect
import re
import textwrap
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from django_webfetch.assistant.models import AssistantRun, Conversation
from django_webfetch.budgets import holds

pytestmark = pytest.mark.django_db

#: What a view's code does when it stays open.
LONG_LIVED = re.compile(
    r"StreamingHttpResponse|text/event-stream|\bsleep\(|wait_for_event|\.wait\(|"
    r"run_in_executor|while True"
)
URLCONFS = ("tests.django.urls", "tests.metrics.urls", "tests.diagnostics.urls")


def routes(urlconf: str) -> Iterator[tuple[str, str, Any]]:
    """``(pattern, name, callback)`` of every route of ``urlconf``, nested includes too."""

    def walk(patterns: Any, prefix: str, namespace: str) -> Iterator[tuple[str, str, Any]]:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                space = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
                yield from walk(entry.url_patterns, prefix + str(entry.pattern), space)
            elif isinstance(entry, URLPattern):
                name = f"{namespace}{entry.name}" if entry.name else ""
                yield prefix + str(entry.pattern), name, entry.callback

    yield from walk(get_resolver(urlconf).url_patterns, "", "")


def _own(target: Any) -> bool:
    return getattr(target, "__module__", "").startswith("django_webfetch")


def code_of(callback: Any, depth: int = 3) -> str:
    """The code a route runs that this package owns: the callback, its view class's own
    methods (not Django's or DRF's), and what they call by name in their module, down to
    ``depth`` calls."""
    seen: set[int] = set()
    parts: list[str] = []

    def visit(target: Any, level: int) -> None:
        target = inspect.unwrap(target)
        if target is None or id(target) in seen or not _own(target):
            return
        seen.add(id(target))
        try:
            parts.append(textwrap.dedent(inspect.getsource(target)))
        except (OSError, TypeError):
            return
        if level >= depth:
            return
        functions = [target] if inspect.isfunction(target) else []
        if inspect.isclass(target):
            for base in target.__mro__[1:]:
                visit(base, level)
            functions = [v for v in vars(target).values() if inspect.isfunction(v)]
        for function in functions:
            for name in function.__code__.co_names:
                found = function.__globals__.get(name)
                if inspect.isfunction(found) or inspect.isclass(found):
                    visit(found, level + 1)

    for target in (
        callback,
        getattr(callback, "view_class", None),
        getattr(callback, "cls", None),
        getattr(callback, "model_admin", None),
    ):
        if target is not None:
            visit(target, 0)
    return "\n".join(parts)


def every_route() -> list[tuple[str, str, Any]]:
    found = {}
    for urlconf in URLCONFS:
        try:
            for pattern, name, callback in routes(urlconf):
                found[(pattern, name)] = (pattern, name, callback)
        except ImportError:  # pragma: no cover - an optional surface not installed
            continue
    return list(found.values())


def test_every_long_lived_route_goes_through_the_door():
    walked = every_route()
    assert len(walked) > 40, "the walk found too few routes to be trusted"
    long_lived = {name or pattern for pattern, name, cb in walked if LONG_LIVED.search(code_of(cb))}
    marked = {
        name or pattern for pattern, name, cb in walked if getattr(cb, "webfetch_holds", None)
    }
    # Each route that can stay open is a marked surface, and each marked one is found.
    assert long_lived == marked, (long_lived, marked)
    assert marked == {"django_webfetch:run-stream", "django_webfetch:run-events"}
    assert {k: v for k, v in holds.surfaces().items() if not k.startswith("mcp:")} == {
        "django_webfetch:run-stream": "streams",
        "django_webfetch:run-events": "long_polls",
    }


def test_the_route_walk_sees_a_view_that_would_wait():
    """The detector is not blind: a view that sleeps in a loop is long-lived."""

    def sneaky(request: Any) -> Any:  # a view someone might add
        while True:
            import time

            time.sleep(1)

    sneaky.__module__ = "django_webfetch.api.sneaky"
    assert LONG_LIVED.search(code_of(sneaky))


@pytest.fixture
def open_run(editor: Any) -> AssistantRun:
    """A run of the editor that is not finished and has no event yet."""
    conversation = Conversation.objects.create(owner=editor)
    return AssistantRun.objects.create(conversation=conversation, user=editor, state="running")


def at_bound(kind: str, principal: tuple[str, str], settings: Any, bound: int = 2) -> list[Any]:
    settings.WEBFETCH_OPEN_PER_PRINCIPAL = {kind: bound}
    return [holds.acquire(kind, principal) for _ in range(bound)]


@pytest.mark.parametrize(
    ("name", "kind", "query"),
    [
        ("django_webfetch:run-stream", "streams", ""),
        ("django_webfetch:run-events", "long_polls", "?since=0&wait=1"),
    ],
)
def test_each_marked_route_is_refused_at_the_bound_and_serves_others(
    name, kind, query, editor, user_factory, settings, open_run
):
    from django.urls import reverse

    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.WEBFETCH_OPEN_RETRY_AFTER = 3
    url = reverse(name, kwargs={"pk": open_run.pk}) + query
    leases = at_bound(kind, ("user", str(editor.pk)), settings)
    try:
        client = Client()
        client.force_login(editor)
        refused = client.get(url, HTTP_ACCEPT="application/json")
        assert refused.status_code == 429
        assert refused["Retry-After"] == "3"
        assert refused.json()["code"] == "too_many_open" and refused.json()["kind"] == kind
        # Another editor at no bound is served (their own run).
        other = user_factory(staff=True, username="other-editor")
        conversation = Conversation.objects.create(owner=other)
        theirs = AssistantRun.objects.create(
            conversation=conversation, user=other, state="completed"
        )
        client.force_login(other)
        served = client.get(reverse(name, kwargs={"pk": theirs.pk}) + query)
        assert served.status_code == 200
        if served.streaming:
            b"".join(served.streaming_content)
            served.close()
        assert holds.principal_counts(("user", str(other.pk)))[kind] == 0
        # Someone else's run is still 404 before any bound is looked at.
        client.force_login(editor)
        missing = client.get(reverse(name, kwargs={"pk": uuid.uuid4()}) + query)
        assert missing.status_code == 404
    finally:
        for lease in leases:
            lease.release()


def test_every_mcp_handler_that_stays_open_goes_through_the_door():
    from django_webfetch.mcp import http, server

    async def nobody(ctx: Any) -> Any:
        raise AssertionError("not called")

    assert server.build_server(nobody) is not None
    # The handlers the server was built with: every one is read here.
    source = inspect.getsource(server.build_server)
    registered = set(re.findall(r"on_[a-z_]+=([a-z_]+)", source))
    registered |= set(re.findall(r"add_request_handler\([^,]+, [^,]+, ([a-z_]+)\)", source))
    assert registered == {
        "list_tools",
        "call_tool",
        "list_resources",
        "read_resource",
        "discover",
        "get_task",
        "update_task",
        "cancel_task",
    }
    # Of those, only ``tools/call`` waits (for an approval): through the marked ``_wait``
    # (a task's methods answer at once; its client polls).
    waits = {
        name for name in registered if re.search(r"_wait\(|sleep\(", _handler_source(source, name))
    }
    assert waits == {"call_tool"}
    assert getattr(server._wait, "webfetch_holds", None) == "mcp_waits"
    assert "holds.acquire(" in inspect.getsource(server._wait)
    assert "sleep(" not in inspect.getsource(server._refused_wait)
    # A session is opened by the endpoint's session manager: the door's.
    _endpoint, manager = http.mcp_endpoint()
    assert isinstance(manager, http.SessionManager)
    assert getattr(http.SessionManager, "webfetch_holds", None) == "mcp_sessions"
    assert manager.session_idle_timeout is not None and manager.session_idle_timeout <= 3600
    assert holds.surfaces()["mcp:initialize"] == "mcp_sessions"
    assert holds.surfaces()["mcp:tools/call"] == "mcp_waits"


def _handler_source(source: str, name: str) -> str:
    match = re.search(
        rf"async def {name}\(.*?(?=\n    async def |\n    server: Server)", source, re.S
    )
    assert match, name
    return match.group(0)


def test_a_stream_dropped_unread_gives_its_hold_back(editor, settings, open_run):
    """Closed unread, or dropped by a server that never closes it: the hold is given back."""
    import gc

    from django.urls import reverse

    settings.ROOT_URLCONF = "tests.runs.urls"
    client = Client()
    client.force_login(editor)
    url = reverse("django_webfetch:run-stream", kwargs={"pk": open_run.pk})
    me = ("user", str(editor.pk))
    closed = client.get(url)
    assert closed.streaming and holds.principal_counts(me)["streams"] == 1
    closed.close()
    assert holds.principal_counts(me)["streams"] == 0
    dropped = client.get(url)
    assert dropped.streaming and holds.principal_counts(me)["streams"] == 1
    del dropped
    gc.collect()
    assert holds.principal_counts(me)["streams"] == 0
