"""Review round 4 (issue 29), finding 1 as a class: who reads a call's result, on every surface.

The rule (docs/security.rst, "Who reads a result"): a call's result is read by its
requester and by superusers; an approver reads the record of a call that went to approval
(never what the tool returned); a staff user with one view permission, another editor and
an anonymous client read nothing of it.  The conversations and runs that carry a result
serve their owner (the requester) alone, superusers included only in the admin.

The test enumerates the surfaces, then requires an explicit entry for each, so a route, an
admin registration, an MCP handler or tool, or a mail sender added later without an entry
fails here before anyone asks whether it leaks:

- every route of the project's URLconf (``django.urls.get_resolver``), fetched (GET, and
  POST under ``/api/``) with every id of the rows that hold the result, as each reader
  (``tests/runs/test_read_access.py`` walks the same routes with words for ids, and leaves
  these paths to this walk);
- every ``ModelAdmin`` of ``admin.site`` (its change view is among the routes);
- every request handler of the MCP server (``build_server``) and every tool it offers;
- every module that sends mail, and every mail template.
"""

from __future__ import annotations

import ast
import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.core import mail
from django.test import Client
from django.urls import get_resolver, resolve
from django.urls.exceptions import Resolver404
from rest_framework.test import APIClient

import django_webfetch
from django_webfetch import runs
from django_webfetch.models import AccessToken, CallState, ToolCall
from django_webfetch.tools import ToolResult
from tests.runs.conftest import EchoTool
from tests.runs.readers import VIEW_PERMISSIONS, conversation_holding, grant
from tests.runs.test_read_access import DOOR_VALUES, _template, _walk
from tests.settle import settled_call as settled

pytestmark = pytest.mark.django_db

#: What the tool returned: never in its arguments, so only a result (or a copy) carries it.
SECRET = "DOORSECRET" + uuid.uuid4().hex
#: Every reader of the table.
READERS = ("requester", "approver", "one_permission", "other", "anonymous", "superuser")
OWNER = frozenset({"requester"})
RESULT_READERS = frozenset({"requester", "superuser"})
NOBODY: frozenset[str] = frozenset()


class SecretTool(EchoTool):
    name = "r29_door_secret"
    description = "Return text only the requester may read (access tests)."

    def execute(self, arguments: Any, context: Any) -> Any:
        return ToolResult(content=f"restricted text {SECRET}", meta={"note": SECRET})


class DirectSecretTool(SecretTool):
    name = "r29_door_secret_direct"

    def requires_approval(self, call: Any, context: Any = None) -> bool:
        return False


# -- the table ------------------------------------------------------------------------------

#: Who reads the result at each route of the project (with the world's ids filled in).  A
#: route of this app that is not here fails the test.
ROUTES: dict[str, frozenset[str]] = {
    "api/": NOBODY,
    "api/tools/": NOBODY,
    "api/calls/": RESULT_READERS,
    "api/calls/<uuid:pk>/": RESULT_READERS,
    "api/calls/<uuid:pk>/approve/": NOBODY,
    "api/calls/<uuid:pk>/deny/": NOBODY,
    "api/calls/<uuid:pk>/cancel/": NOBODY,
    "api/conversations/": NOBODY,
    "api/conversations/<uuid:pk>/": OWNER,
    "api/conversations/<uuid:pk>/messages/": NOBODY,
    "api/runs/<uuid:pk>/": NOBODY,
    "api/runs/<uuid:pk>/cancel/": NOBODY,
    "api/runs/<uuid:pk>/events/": OWNER,
    "api/runs/<uuid:pk>/stream/": OWNER,
    "api/schema/": NOBODY,
    "api/^": NOBODY,
    "assistant/": NOBODY,
    # The OAuth authorization server (django_webfetch.oauth): discovery, consent, tokens and
    # the user's Connected apps (token names and clients, never a call's result).
    ".well-known/oauth-authorization-server": NOBODY,
    ".well-known/oauth-protected-resource": NOBODY,
    ".well-known/oauth-protected-resource/<path:resource_path>": NOBODY,
    "oauth/authorize/": NOBODY,
    "oauth/token/": NOBODY,
    "oauth/revoke_token/": NOBODY,
    "oauth/register/": NOBODY,
    "oauth/connections/": NOBODY,
    "assistant/approvals/": NOBODY,
    "assistant/status/": NOBODY,
}
#: Who reads the result on the change page of each model of this app in the admin (every
#: other page of a model's admin: nobody).  A model registered later fails the test.
ADMIN_MODELS: dict[str, frozenset[str]] = {
    "toolcall": RESULT_READERS,
    "conversation": RESULT_READERS,  # its messages carry the result (_OwnOnly)
    "assistantrun": RESULT_READERS,  # its events carry the result (_OwnOnly)
    "accesstoken": NOBODY,
    "budget": NOBODY,
    "budgetusage": NOBODY,
    "configuredendpoint": NOBODY,
    "egressevent": NOBODY,
    "operationsoverview": NOBODY,
    "plugininstance": NOBODY,
    "sitehost": NOBODY,
    "toolgroup": NOBODY,
}
#: Apps of other packages in the admin and the URLconf: they hold nothing of ours (their
#: pages are fetched all the same).
FOREIGN_APPS = {"auth", "sites", "authtoken", "cms", "oauth2_provider"}
#: Routes of other packages (django CMS's pages and login), fetched all the same.
FOREIGN_ROUTES = {"cms_login/", "cms_wizard/^create/$", "^(?P<slug>[0-9A-Za-z-_.//]+)/$", ""}
#: Admin routes that are not a model's: the index, login, logout, password, i18n...
ADMIN_SITE_ROUTES = {
    "admin/",
    "admin/login/",
    "admin/logout/",
    "admin/password_change/",
    "admin/password_change/done/",
    "admin/autocomplete/",
    "admin/jsi18n/",
    "admin/r/<path:content_type_id>/<path:object_id>/",
    "admin/r/<int:content_type_id>/<path:object_id>/",
    "admin/^(?P<app_label>auth|sites|authtoken|django_webfetch|oauth2_provider|cms)/$",
    "admin/(?P<url>.*)$",
}
#: Each MCP request handler, and how this test drives it.
MCP_HANDLERS = {
    "ping": "answers nothing of a call",
    "server/discover": "answers the server's description",
    "tools/list": "tool specs only (offered_tools)",
    "tools/call": "every tool below",
    "resources/list": "list_pages as the token's user (its own call)",
    "resources/read": "read_page as the token's user (its own call)",
    "tasks/get": "a task to the token that created it only (tasks.task_of)",
    "tasks/update": "answers nothing of a call (an acknowledgement or an error)",
    "tasks/cancel": "answers nothing of a call (an acknowledgement or an error)",
}
#: Each tool the MCP server offers beside the registry's: driven below as each reader.
MCP_SERVER_TOOLS = {"webfetch_call_status", "fetch"}
#: Modules that send mail, and the mail templates: each rendered below for the world.
MAIL_SENDERS = {"cms/notify.py"}
MAIL_TEMPLATES = {
    "approval_mail.txt",
    "approval_mail_call.txt",
    "approval_mail_step.txt",
    "approval_mail_step_subject.txt",
    "approval_mail_subject.txt",
}


# -- the world ------------------------------------------------------------------------------


@pytest.fixture
def world(tool_registry, user_factory, settings, group_factory):
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, *settings.CMS_MIDDLEWARE]
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    for tool in (SecretTool, DirectSecretTool):
        tool_registry.register(tool)
    group_factory("web", enabled=True)
    users = {
        "requester": grant(user_factory(staff=True, username="r29req"), *VIEW_PERMISSIONS),
        "approver": grant(
            user_factory(staff=True, username="r29appr"),
            "approve_toolcall",
            *VIEW_PERMISSIONS,
        ),
        "one_permission": grant(user_factory(staff=True, username="r29one"), "view_toolcall"),
        "other": grant(user_factory(staff=True, username="r29other"), *VIEW_PERMISSIONS),
        "superuser": user_factory(superuser=True, username="r29root"),
    }
    decider = grant(user_factory(staff=True, username="r29decider"), "approve_toolcall")
    for user in users.values():
        type(user).objects.filter(pk=user.pk).update(email=f"{user.username}@example.org")
    requester = users["requester"]
    approved = runs.request_call("r29_door_secret", {"text": "hello"}, user=requester)
    assert approved.state == CallState.AWAITING_APPROVAL
    runs.approve(approved.pk, by=decider, comment="ok")
    approved = settled(approved)
    direct = settled(runs.request_call("r29_door_secret_direct", {"text": "hi"}, user=requester))
    for call in (approved, direct):
        assert call.state == CallState.SUCCEEDED and SECRET in str(call.result)
    # A page the requester fetched (MCP ``fetch`` pages over it with start_index).
    fetched = ToolCall.objects.create(
        tool="fetch_external_url",
        group="web",
        user=requester,
        arguments={"url": "https://203.0.113.7/r29", "mode": "main"},
        state=CallState.SUCCEEDED,
        requires_approval=True,
        result=ToolResult(
            content=(
                "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce=" + "a" * 32 + ">>>\n"
                f"page {SECRET}\n"
                "<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce=" + "a" * 32 + ">>>"
            )
        ).to_dict(),
    )
    fetched.finished_at = fetched.created
    fetched.save(update_fields=["finished_at"])

    # The run events of both access tests' worlds: this walk serves test_read_access's
    # rule on the paths both build (see its module docstring).
    conversation, run = conversation_holding(
        requester, approved, SECRET, events=("call", "completed")
    )
    return {
        **users,
        "calls": (approved, direct, fetched),
        "ids": [str(approved.pk), str(direct.pk), str(conversation.pk), str(run.pk)],
    }


# -- routes ---------------------------------------------------------------------------------


def _admin_entry(route: str) -> frozenset[str] | None:
    """The table's answer for an admin route of a model; ``None``: not a model's route."""
    parts = route.split("/")
    if len(parts) < 3 or parts[0] != "admin":
        return None
    app, model = parts[1], parts[2]
    if app in FOREIGN_APPS:
        return NOBODY
    if app != "django_webfetch":
        return None
    assert model in ADMIN_MODELS, f"admin model {model!r} has no entry in ADMIN_MODELS"
    if route == f"admin/django_webfetch/{model}/<path:object_id>/change/":
        return ADMIN_MODELS[model]
    return NOBODY


def _entry(route: str) -> frozenset[str]:
    if route in ROUTES:
        return ROUTES[route]
    if route in FOREIGN_ROUTES or route in ADMIN_SITE_ROUTES:
        return NOBODY
    found = _admin_entry(route)
    assert found is not None, f"route {route!r} has no entry in the table of surfaces"
    return found


def _body(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode("utf-8", "replace")
    return response.content.decode("utf-8", "replace")


def _clients(world: dict[str, Any]) -> dict[str, Client]:
    clients: dict[str, Client] = {}
    for name in READERS:
        clients[name] = APIClient()
        # A third-party page that fails (django CMS's structure views as a superuser with
        # no page) answers its 500: its body is what a reader gets.
        clients[name].raise_request_exception = False
        if name != "anonymous":
            clients[name].force_login(world[name])
    return clients


def _paths_of(parts: tuple[Any, ...], pattern: Any, candidates: list[str]) -> list[str]:
    built = _template(parts)
    if built is None:
        return []
    template, count = built
    paths = []
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
    return paths


#: The routes in groups, one test each, so that the walk (a few thousand requests) spreads
#: over the workers.  Every route is in exactly one group (checked below): the admin pages
#: of this app and of django CMS by model, of other apps by app, the API, and the rest of
#: the site.
ROUTE_GROUPS: dict[str, frozenset[str]] = {
    "admin-calls-conversations-runs": frozenset({"toolcall", "conversation", "assistantrun"}),
    "admin-tokens-budgets-endpoints": frozenset(
        {"accesstoken", "budget", "budgetusage", "configuredendpoint"}
    ),
    "admin-events-plugins-hosts-groups": frozenset(
        {"egressevent", "operationsoverview", "plugininstance", "sitehost", "toolgroup"}
    ),
    "admin-cms-pages": frozenset({"cms.page", "cms.pagecontent", "cms.placeholder"}),
    "admin-cms-users-permissions": frozenset(
        {"cms.pageuser", "cms.pageusergroup", "cms.globalpagepermission", "cms.usersettings"}
    ),
    "admin-oauth2_provider": frozenset({"oauth2_provider"}),
    "admin-auth": frozenset({"auth"}),
    "admin-sites-authtoken": frozenset({"sites", "authtoken"}),
    "api": frozenset(),
    "site": frozenset(),
}


def _group(route: str) -> str:
    """The group of ``route`` (a name outside ROUTE_GROUPS fails the cover test)."""
    parts = route.split("/")
    if route.startswith("api/"):
        return "api"
    if parts[0] != "admin" or route in ADMIN_SITE_ROUTES or len(parts) < 3:
        return "site"
    key = {"django_webfetch": parts[2], "cms": f"cms.{parts[2]}"}.get(parts[1], parts[1])
    for name, members in ROUTE_GROUPS.items():
        if key in members:
            return name
    return f"no group for {route!r}"


def _routes() -> list[tuple[tuple[Any, ...], Any, str]]:
    """Every route of the URLconf: its parts, its pattern and its text."""
    return [
        (parts, pattern, "".join(str(p) for p in parts)) for parts, pattern in _walk(get_resolver())
    ]


def test_the_route_groups_cover_every_route_and_each_route_has_an_entry():
    """The walk found the URLconf, every route has an entry in the table and is in one of
    the groups the test below walks, and the groups build the paths of a full walk."""
    routes = _routes()
    assert len(routes) > 50
    groups = {route: _group(route) for _parts, _pattern, route in routes}
    assert set(groups.values()) == set(ROUTE_GROUPS), sorted(set(groups.values()))
    candidates = [str(uuid.uuid4()) for _ in range(4)] + ["1"]
    paths = 0
    for parts, pattern, route in routes:
        _entry(route)
        paths += len(_paths_of(parts, pattern, candidates))
    assert paths * len(READERS) > 300


@pytest.mark.long
@pytest.mark.parametrize("group", sorted(ROUTE_GROUPS))
def test_every_route_shows_a_result_to_whom_the_table_says(world, group):
    # test_read_access leaves the paths built from these values to this walk.
    candidates = [*world["ids"], *DOOR_VALUES]
    clients = _clients(world)
    routes = [item for item in _routes() if _group(item[2]) == group]
    assert routes, group
    mismatches = []
    fetched = 0
    for parts, pattern, route in routes:
        expected = _entry(route)
        paths = _paths_of(parts, pattern, candidates)
        if not paths and route.endswith(("^", "$")):
            paths = [f"/api/{world['ids'][0]}/"] if route.startswith("api") else []
        for path in paths:
            seen = set()
            for name, client in clients.items():
                bodies = [_body(client.get(path))]
                if path.startswith("/api/"):
                    bodies.append(_body(client.post(path, {}, format="json")))
                fetched += 1
                if any(SECRET in body for body in bodies):
                    seen.add(name)
            if seen - expected:
                mismatches.append(("leak", path, sorted(seen - expected)))
            elif _holds_row(route, path, world) and seen != expected:
                mismatches.append(("not shown", path, sorted(expected - seen)))
    assert fetched >= len(routes) * len(READERS) // 2, (group, fetched)
    assert mismatches == []


def _holds_row(route: str, path: str, world: dict[str, Any]) -> bool:
    """Does ``path`` name the row its route serves (a call id on a call route...)?  Only
    then must the expected readers actually see the result (a run id on a call route is a
    404 for everyone)."""
    approved, direct, _fetched = (str(c.pk) for c in world["calls"])
    _a, _d, conversation, run = world["ids"]
    if "/calls/" in route or "toolcall" in route:
        return path.endswith("/api/calls/") or approved in path or direct in path
    if "conversation" in route:
        return conversation in path
    if "/runs/" in route or "assistantrun" in route:
        return run in path
    return False


def test_every_admin_registration_has_an_entry():
    for model in admin.site._registry:
        label = model._meta.app_label
        if label == "django_webfetch":
            assert model._meta.model_name in ADMIN_MODELS, model
        else:
            assert label in FOREIGN_APPS, model
    assert set(ADMIN_MODELS) == {
        m._meta.model_name for m in admin.site._registry if m._meta.app_label == "django_webfetch"
    }


# -- MCP ------------------------------------------------------------------------------------


def test_every_mcp_handler_and_server_tool_has_an_entry(world):
    from django_webfetch.mcp.calls import SERVER_TOOLS, offered_tools
    from django_webfetch.mcp.server import build_server

    assert set(build_server(None)._request_handlers) == set(MCP_HANDLERS)
    assert set(SERVER_TOOLS) == MCP_SERVER_TOOLS
    offered = {spec.name for spec in offered_tools(world["superuser"])}
    assert offered >= MCP_SERVER_TOOLS  # the superuser is offered fetch_external_url too


def test_mcp_gives_a_result_to_its_requester_and_superusers_only(world):
    from django_webfetch.mcp import calls, pages, tasks

    approved, direct, fetched = world["calls"]
    for name in READERS:
        if name == "anonymous":
            # No token, no principal: every handler refuses before any service runs.
            assert AccessToken.objects.authenticate(None) is None
            assert AccessToken.objects.authenticate("wfpat_" + "x" * 43) is None
            continue
        user = world[name]
        token, _secret = AccessToken.objects.issue(user, "door test", by=user)
        answers = [
            calls.start_call(token, "webfetch_call_status", {"call_id": str(call.pk)})
            for call in (approved, direct, fetched)
        ]
        answers.append(
            calls.start_call(token, "fetch", {"url": fetched.arguments["url"], "start_index": 2})
        )
        texts = [a.text + str(a.data) for a in answers]
        with_secret = [SECRET in text for text in texts]
        if name in RESULT_READERS:
            # Their own (or every) call's result, and the stored page's next window.
            assert with_secret[:3] == [True, True, True], (name, texts)
        else:
            assert not any(with_secret), (name, texts)
        if name == "approver":
            # The record of a call that went to approval, without its result.
            assert answers[0].data["state"] == "succeeded"
            assert answers[0].data["result_withheld"] is True
            assert answers[1].data["error"] == "no_such_call"  # never went to approval
        for listed in pages.list_resources(token):
            assert SECRET not in str(listed)
        # Tasks (tasks/get): a call is a task to the token that requested it, to no other.
        assert [tasks.task_of(token, call.pk) for call in (approved, direct, fetched)] == [
            None,
            None,
            None,
        ]
    requester = world["requester"]
    requester_token, _secret = AccessToken.objects.issue(requester, "task", by=requester)
    own = calls.start_call(requester_token, "r29_door_secret_direct", {"text": "task"})
    task_id = own.call_id if isinstance(own, calls.Pending) else own.data["call_id"]
    settled(ToolCall.objects.get(pk=task_id))
    own_task = tasks.task_of(requester_token, task_id)
    assert own_task is not None and SECRET in own_task.answer.text
    for name in READERS:
        if name in ("anonymous", "requester"):
            continue
        token, _secret = AccessToken.objects.issue(world[name], "door test 2", by=world[name])
        assert tasks.task_of(token, task_id) is None, name
        assert tasks.withdraw(token, task_id) is False, name


# -- mails ----------------------------------------------------------------------------------


MAIL_FUNCTIONS = {"send_mail", "send_mass_mail", "EmailMessage", "mail_admins", "mail_managers"}


def _senders() -> set[str]:
    package = Path(django_webfetch.__file__).parent
    found = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            name = getattr(node, "id", None) or getattr(node, "attr", None)
            if name in MAIL_FUNCTIONS:
                found.add(path.relative_to(package).as_posix())
    return found


def test_no_mail_carries_a_result(world):
    from django_webfetch.cms import notify

    assert _senders() == MAIL_SENDERS
    package = Path(django_webfetch.__file__).parent
    templates = {p.name for p in package.rglob("templates/**/*mail*")}
    assert templates == MAIL_TEMPLATES
    approved, direct, fetched = world["calls"]
    mail.outbox.clear()
    sent = notify.notify_waiting(approved) + notify.notify_step([approved, direct, fetched])
    assert sent >= 2 and len(mail.outbox) == sent
    for message in mail.outbox:
        assert SECRET not in message.subject + message.body
