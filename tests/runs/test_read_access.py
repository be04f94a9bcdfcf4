"""Who reads a tool call's result (issue 19, item 1): the requester and superusers only.

An approver (the approve permission, and every view permission of the app's models on
top) reads the card and the outcome state of a call that went to approval, never what it
returned; another editor reads nothing of it.  The class test walks every route of the
project's URLconf (``tests/django/urls.py``, the same shape as the example project's): a
route added later that shows a result to the wrong reader fails here because the walk
finds it, not because someone remembered to list it.

The walk is shared with ``test_every_surface_reads_results_through_the_door.py``: that
test fetches every path whose parameters are all row ids or ``1`` as these readers and
three more (the same rows: two calls, a conversation and a run holding the result, with
the run events of this test's world), and asserts this test's rule on each (no reader
but the requester and superusers sees a result; the requester sees it where the row is
theirs).  This test fetches the rest of its paths (a parameter filled with a word), the
catch-alls and the paths where the requester must see the result, so that no page is
rendered twice for the same question.
"""

from __future__ import annotations

import itertools
import re
import uuid
from typing import Any, ClassVar

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.exceptions import Resolver404
from django.urls.resolvers import RegexPattern, RoutePattern
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from tests.runs.conftest import EchoTool
from tests.runs.readers import VIEW_PERMISSIONS, conversation_holding, grant
from tests.settle import settled_call

#: What the tool returned: never in its arguments, so only a result can carry it.
SECRET = "RESULTSECRET" + uuid.uuid4().hex


class SecretTool(EchoTool):
    """Returns text the requester may read (a restricted page, a source file...)."""

    name = "runs_secret"
    description = "Return something only the requester may read (access tests)."

    def execute(self, arguments: Any, context: Any) -> Any:
        from django_webfetch.tools import ToolResult

        return ToolResult(content=f"restricted text {SECRET}", meta={"note": SECRET})


class DirectSecretTool(SecretTool):
    name = "runs_secret_direct"
    needs_approval: ClassVar[bool] = False

    def requires_approval(self, call: Any, context: Any = None) -> bool:
        return False


@pytest.fixture
def world(tool_registry, user_factory, settings):
    """A requester's two finished calls (one approved by a person, one that needed no
    approval), their conversation and run holding the result, and the readers."""
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, *settings.CMS_MIDDLEWARE]
    for tool in (SecretTool, DirectSecretTool):
        tool_registry.register(tool)
    requester = grant(user_factory(staff=True, username="requester"), *VIEW_PERMISSIONS)
    approver = grant(
        user_factory(staff=True, username="approver"), "approve_toolcall", *VIEW_PERMISSIONS
    )
    decider = grant(user_factory(staff=True, username="decider"), "approve_toolcall")
    other = grant(user_factory(staff=True, username="other_editor"), *VIEW_PERMISSIONS)
    superuser = user_factory(superuser=True, username="root")

    approved = runs.request_call("runs_secret", {"text": "hello"}, user=requester)
    assert approved.state == CallState.AWAITING_APPROVAL
    approved = runs.approve(approved.pk, by=decider, comment="ok")
    direct = runs.request_call("runs_secret_direct", {"text": "hi"}, user=requester)
    for call in (approved, direct):
        settled_call(call)  # both run on the background runner
        call.refresh_from_db()
        assert call.state == CallState.SUCCEEDED and SECRET in str(call.result)
    assert approved.requires_approval and not direct.requires_approval

    conversation, run = conversation_holding(requester, approved, SECRET, events=("call",))
    return {
        "requester": requester,
        "approver": approver,
        "other": other,
        "superuser": superuser,
        "approved": approved,
        "direct": direct,
        "ids": [str(approved.pk), str(direct.pk), str(conversation.pk), str(run.pk)],
    }


# -- the walk over every route --------------------------------------------------------------

_ROUTE_PARAM = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>\w+)>")
_REGEX_GROUP = re.compile(r"\((?:\?P<(?P<name>\w+)>)?(?P<body>[^()]*)\)")


def _walk(resolver: URLResolver, prefix: tuple[Any, ...] = ()):
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern, (*prefix, pattern.pattern))
        else:
            assert isinstance(pattern, URLPattern)
            yield (*prefix, pattern.pattern), pattern


def _template(parts: tuple[Any, ...]) -> tuple[str, int] | None:
    """The route as one path with ``{}`` where a parameter goes (None: not a path we can
    build, e.g. a catch-all regex)."""
    out = []
    count = 0
    for part in parts:
        text = str(part)
        if isinstance(part, RoutePattern):
            text, n = _ROUTE_PARAM.subn("{}", text.replace("{", "{{").replace("}", "}}"))
        elif isinstance(part, RegexPattern):
            text = text.removeprefix("^").removesuffix("$").removesuffix("\\Z")
            text, n = _REGEX_GROUP.subn("{}", text)
            text = re.sub(r"\\(.)", r"\1", text)
            if re.search(r"[\^$*+?\[\]|()]", text):
                return None
        else:  # pragma: no cover - Django has only these two
            return None
        out.append(text)
        count += n
    return "/" + "".join(out), count


#: The values the door test fills parameters with, beside the row ids (its candidates).
DOOR_VALUES = ("1",)


def _paths(ids: list[str]) -> tuple[list[str], list[str], set[str]]:
    """Every path the URLconf serves, with each parameter filled by each candidate value
    (the ids of the rows that hold the secret, and the words some routes expect); only
    paths that resolve back to the route they were built from.  Also the routes that could
    not be built (reported, and checked to be catch-alls), and the paths the door test
    walks too (every parameter a row id or ``1``)."""
    candidates = [*ids, "django_webfetch", "toolcall", "approve", "1", "en"]
    door_values = {*ids, *DOOR_VALUES}
    paths: list[str] = []
    unbuilt: list[str] = []
    shared: set[str] = set()
    for parts, pattern in _walk(get_resolver()):
        built = _template(parts)
        route = "".join(str(p) for p in parts)
        if built is None:
            unbuilt.append(route)
            continue
        template, count = built
        for values in itertools.product(candidates, repeat=count):
            path = template.format(*values)
            try:
                match = resolve(path)
            except Resolver404:
                continue
            if match.func is pattern.callback or getattr(match.func, "view_class", 1) is getattr(
                pattern.callback, "view_class", 2
            ):
                paths.append(path)
                if door_values.issuperset(values):
                    shared.add(path)
    return sorted(set(paths)), unbuilt, shared


def _body(response: Any) -> str:
    if getattr(response, "streaming", False):  # pragma: no cover - no route streams here
        return ""
    return response.content.decode("utf-8", "replace")


def _client(user: Any) -> Client:
    client = APIClient()
    client.force_login(user)
    return client


#: The admin's pages in groups, one test each, so that the walk (over a thousand paths)
#: spreads over the workers: this app's models, other apps by app.  Every other path (the
#: API, the site, the admin's own pages, an admin model in no group) is in "api-and-site":
#: each path is walked by exactly one of the tests.
PATH_GROUPS: dict[str, frozenset[str]] = {
    "admin-calls-conversations-runs-tokens": frozenset(
        {"toolcall", "conversation", "assistantrun", "accesstoken"}
    ),
    "admin-budgets-endpoints-events": frozenset(
        {"budget", "budgetusage", "configuredendpoint", "egressevent"}
    ),
    "admin-overview-plugins-hosts-groups": frozenset(
        {"operationsoverview", "plugininstance", "sitehost", "toolgroup"}
    ),
    "admin-cms": frozenset({"cms"}),
    "admin-auth-sites-authtoken": frozenset({"auth", "sites", "authtoken"}),
    "admin-oauth2_provider": frozenset({"oauth2_provider"}),
    "api-and-site": frozenset(),
}


def _path_group(path: str) -> str:
    parts = path.split("/")
    if len(parts) > 4 and parts[1] == "admin" and parts[3]:
        key = parts[3] if parts[2] == "django_webfetch" else parts[2]
        for name, members in PATH_GROUPS.items():
            if key in members:
                return name
    return "api-and-site"


@pytest.mark.long
@pytest.mark.parametrize("group", sorted(PATH_GROUPS))
def test_every_route_shows_a_result_to_its_requester_only(world, group):
    paths, unbuilt, shared = _paths(world["ids"])
    # The routes the walk cannot build are catch-alls (the API's 404, django CMS's page
    # slugs); they are fetched with a plain id instead.
    for route in unbuilt:
        assert "(?P<" in route or route.endswith("^"), route
    paths += [f"/api/{world['ids'][0]}/", f"/{world['ids'][0]}/"]
    assert len(paths) > 300  # the walk found the URLconf
    paths = [path for path in paths if _path_group(path) == group]
    assert len(paths) > 30, (group, len(paths))  # each group walks a share of it
    a, d, c, r = world["ids"]
    expected = {
        "/api/calls/",
        f"/api/calls/{a}/",
        f"/api/calls/{d}/",
        f"/api/conversations/{c}/",
        f"/api/runs/{r}/events/",
        f"/admin/django_webfetch/toolcall/{a}/change/",
        f"/admin/django_webfetch/toolcall/{d}/change/",
        f"/admin/django_webfetch/conversation/{c}/change/",
    }
    expected = {path for path in expected if _path_group(path) == group}
    # The door test fetches the shared paths as these readers (module docstring).
    walked = [path for path in paths if path not in shared or path in expected]
    assert walked, group
    clients = {name: _client(world[name]) for name in ("requester", "approver", "other")}
    seen_by_requester = []
    for path in walked:
        bodies = {name: _body(client.get(path)) for name, client in clients.items()}
        if SECRET in bodies["requester"]:
            seen_by_requester.append(path)
        for reader in ("approver", "other"):
            assert SECRET not in bodies[reader], f"{reader} reads a result at {path}"
    assert expected <= set(seen_by_requester), expected - set(seen_by_requester)
    # Superusers are the one named exception (docs/approval.rst), on the call endpoints
    # and in the admin; the conversation endpoints serve their owner alone.
    root = _client(world["superuser"])
    for path in expected:
        assert (SECRET in _body(root.get(path))) == (
            not path.startswith(("/api/conv", "/api/runs"))
        )


def test_an_approver_reads_the_card_and_outcome_not_the_result(world):
    approver = _client(world["approver"])
    a, d = world["ids"][:2]
    body = approver.get(f"/api/calls/{a}/").json()
    assert body["state"] == "succeeded" and body["arguments"] == {"text": "hello"}
    assert body["result"] is None and body["result_withheld"] is True
    assert body["decided_by"] == "decider" and body["finished"] is True
    # A call that never went to approval is not the approvers' business at all.
    assert approver.get(f"/api/calls/{d}/").status_code == 404
    listed = {c["id"]: c for c in approver.get("/api/calls/").json()["results"]}
    assert set(listed) == {a} and listed[a]["result"] is None
    # Their own calls they read in full.
    own = settled_call(
        runs.request_call("runs_secret_direct", {"text": "x"}, user=world["approver"])
    )
    mine = approver.get(f"/api/calls/{own.pk}/").json()
    assert SECRET in mine["result"]["content"] and mine["result_withheld"] is False
    page = approver.get(f"/admin/django_webfetch/toolcall/{a}/change/")
    assert page.status_code == 200 and "Withheld" in page.content.decode()


def test_the_admin_refuses_a_lookup_on_the_result(world):
    approver = _client(world["approver"])
    response = approver.get("/admin/django_webfetch/toolcall/", {"result__icontains": SECRET[:14]})
    assert response.status_code == 400


def test_the_permission_functions_agree_with_visible_calls(world):
    """One rule: ``visible_calls`` lists exactly the calls ``can_read`` admits, and
    ``can_read_result`` implies ``can_read``."""
    calls = list(ToolCall.objects.all())
    for name in ("requester", "approver", "other", "superuser"):
        user = world[name]
        visible = set(runs.visible_calls(user).values_list("pk", flat=True))
        assert visible == {c.pk for c in calls if runs.can_read(user, c)}, name
        for call in calls:
            assert not runs.can_read_result(user, call) or runs.can_read(user, call)
            assert (runs.result_dict(user, call) is not None) == runs.can_read_result(user, call)
