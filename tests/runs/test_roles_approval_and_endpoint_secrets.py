"""Adversarial review of the Django layer (issues 4 and 5): each finding is a test that
failed on the reviewed code and passes since its fix, plus a few attacks that are blocked."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.admin import helpers
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import (
    CallState,
    EgressEvent,
    HostListEntry,
    ToolCall,
)
from django_webfetch.tools import ToolContext, run_tool
from tests.settle import settled_call

pytestmark = pytest.mark.django_db

CALLS = "/admin/django_webfetch/toolcall/"
ENDPOINTS = "/admin/django_webfetch/configuredendpoint/"
APPROVED = ToolContext(approved=True, call_id="review")
SECRET = "Bearer review-secret-0xC0FFEE"


@pytest.fixture(autouse=True)
def review_urls(settings, run_tools):
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": [
            "rest_framework.authentication.SessionAuthentication",
        ],
    }


def grant(user, *codenames):
    from django.contrib.auth import get_user_model

    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="django_webfetch")
        )
    return get_user_model().objects.get(pk=user.pk)


def api(user=None, *, csrf=False):
    client = APIClient(enforce_csrf_checks=csrf)
    if user is not None:
        client.force_login(user)
    return client


# -- a JSON search service (and a second one standing in for an attacker) -------------------


class _Search(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).seen.append(
            {"host": self.headers.get("Host"), "headers": dict(self.headers.items())}
        )
        body = json.dumps({"hits": [{"title": "t", "url": "https://x.example/", "snippet": "s"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())


@pytest.fixture
def search_servers(lab_settings):
    servers = []

    def start(address):
        server = ThreadingHTTPServer((address, 9200), _Search)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)

    _Search.seen = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def web(lab_settings, group_factory):
    group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    return lab_settings


# == findings (fail on the reviewed code) ====================================================


def test_view_only_staff_never_sees_the_endpoint_secret(
    client, user_factory, group_factory, endpoint_factory
):
    group_factory("rag", enabled=True)
    endpoint = endpoint_factory(auth_header_value=SECRET)
    viewer = grant(user_factory(staff=True, username="viewer"), "view_configuredendpoint")
    client.force_login(viewer)
    response = client.get(f"{ENDPOINTS}{endpoint.pk}/change/")
    assert response.status_code == 200
    assert SECRET not in response.content.decode()


def test_moving_an_endpoint_does_not_carry_its_secret_to_the_new_host(
    lab_settings,
    search_servers,
    client,
    superuser,
    group_factory,
    host_entry_factory,
    endpoint_factory,
    editor,
):
    group_factory("rag", enabled=True, skip_approval_with_allowlist=True)
    host_entry_factory(group="rag", value="*.lab.example")
    lab_settings.dns.set("search.lab.example", a=[lab_settings.PUBLIC_V4[3]])
    lab_settings.dns.set("collector.lab.example", a=[lab_settings.PUBLIC_V4[4]])
    search_servers(lab_settings.PUBLIC_V4[3])
    search_servers(lab_settings.PUBLIC_V4[4])
    endpoint = endpoint_factory(
        base_url="http://search.lab.example:9200/search", auth_header_value=SECRET
    )
    client.force_login(superuser)
    response = client.post(
        f"{ENDPOINTS}{endpoint.pk}/change/",
        {
            "group": endpoint.group_id,
            "name": endpoint.name,
            "base_url": "http://collector.lab.example:9200/search",
            "auth_header_name": "Authorization",
            "auth_header_value": "",
            "enabled": "on",
        },
    )
    # Refused: moving the endpoint needs the secret entered again (or cleared).
    assert response.status_code == 200
    assert "enter the auth header value again" in response.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.base_url == "http://search.lab.example:9200/search"
    # Moving it and clearing the secret works, and nothing secret goes to the new host.
    response = client.post(
        f"{ENDPOINTS}{endpoint.pk}/change/",
        {
            "group": endpoint.group_id,
            "name": endpoint.name,
            "base_url": "http://collector.lab.example:9200/search",
            "auth_header_name": "Authorization",
            "auth_header_value": "",
            "clear_auth_header": "on",
            "enabled": "on",
        },
    )
    assert response.status_code == 302
    result = run_tool("search_site", {"query": "x"}, user=editor)
    assert result.ok, result
    [seen] = _Search.seen
    assert seen["host"] == "collector.lab.example:9200"
    assert SECRET not in str(seen["headers"])


def test_wildcard_allowed_hosts_subdomains_are_own_site(web, settings, editor):
    settings.ALLOWED_HOSTS = ["testserver", ".site.example"]
    web.dns.set("www.site.example", a=[web.PUBLIC_V4[1]])
    result = run_tool(
        "fetch_external_url",
        {"url": "http://www.site.example/plain"},
        user=editor,
        context=APPROVED,
    )
    assert result.meta.get("reason") == "own_site"
    assert web.requests == []


def test_sites_domain_written_as_url_still_counts_as_own_site(web, editor):
    from django.contrib.sites.models import Site

    Site.objects.update_or_create(
        pk=1, defaults={"domain": "https://www.site.example", "name": "site"}
    )
    web.dns.set("www.site.example", a=[web.PUBLIC_V4[1]])
    result = run_tool(
        "fetch_external_url",
        {"url": "http://www.site.example/plain"},
        user=editor,
        context=APPROVED,
    )
    assert result.meta.get("reason") == "own_site"
    assert web.requests == []


def _long_url(tail: str) -> str:
    prefix = "https://docs.lab.example/p?d="
    return prefix + "a" * (2048 - len(prefix) - len(tail)) + tail  # the schema's maxLength


def test_the_approval_page_shows_the_whole_query_string(
    client, group_factory, editor, approver, lab_settings
):
    group_factory("web", enabled=True)
    # The pre-flight resolves the host when the call is requested: give it a public answer.
    lab_settings.dns.set("docs.lab.example", a=["11.0.0.10"])
    tail = "EXFIL-TAIL-c2VjcmV0"
    call = runs.request_call("fetch_external_url", {"url": _long_url(tail)}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL
    client.force_login(approver)
    bulk = client.post(
        CALLS, {"action": "approve_selected", helpers.ACTION_CHECKBOX_NAME: [str(call.pk)]}
    )
    single = client.get(f"{CALLS}{call.pk}/decide/approve/")
    assert bulk.status_code == single.status_code == 200
    assert tail in bulk.content.decode()
    assert tail in single.content.decode()


def test_a_refused_tool_request_stays_on_record(editor):
    response = api(editor).post(
        "/api/calls/",
        {"tool": "fetch_external_url", "arguments": {"url": "https://x.example/"}},
        format="json",
    )
    assert response.status_code == 403
    assert response.json()["code"] == "tool_not_offered"
    assert ToolCall.objects.exists() or EgressEvent.objects.exists()


def test_the_openapi_schema_is_not_public():
    assert APIClient().get("/api/schema/").status_code in (401, 403)


# == attacks that are blocked =================================================================


def test_editor_cannot_touch_another_editors_call(editor, user_factory):
    other = user_factory(staff=True, username="other")
    call = runs.request_call("runs_echo", {"text": "theirs"}, user=other)
    client = api(editor)
    assert client.get(f"/api/calls/{call.pk}/").status_code == 404
    assert client.post(f"/api/calls/{call.pk}/cancel/", {}, format="json").status_code == 404
    for verb in ("approve", "deny"):
        response = client.post(f"/api/calls/{call.pk}/{verb}/", {}, format="json")
        assert response.status_code == 403
    listed = client.get("/api/calls/").json()["results"]
    assert listed == []
    assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL


def test_self_approval_is_refused_in_the_api_and_the_admin_bulk_action(client, approver):
    call = runs.request_call("runs_echo", {"text": "mine"}, user=approver)
    response = api(approver).post(f"/api/calls/{call.pk}/approve/", {}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "self_approval"
    client.force_login(approver)
    client.post(
        CALLS,
        {
            "action": "approve_selected",
            "confirm": "yes",
            "comment": "",
            helpers.ACTION_CHECKBOX_NAME: [str(call.pk)],
        },
    )
    assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL


def test_session_posts_need_the_csrf_token(editor, approver):
    call = runs.request_call("runs_echo", {"text": "x"}, user=editor)
    response = api(approver, csrf=True).post(f"/api/calls/{call.pk}/approve/", {}, format="json")
    assert response.status_code == 403
    response = api(editor, csrf=True).post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "y"}}, format="json"
    )
    assert response.status_code == 403
    assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL
    assert ToolCall.objects.count() == 1


def test_staff_without_the_permission_cannot_run_the_bulk_approve(client, editor, user_factory):
    call = runs.request_call("runs_echo", {"text": "x"}, user=editor)
    viewer = grant(user_factory(staff=True, username="viewer"), "view_toolcall")
    client.force_login(viewer)
    client.post(
        CALLS,
        {
            "action": "approve_selected",
            "confirm": "yes",
            "comment": "",
            helpers.ACTION_CHECKBOX_NAME: [str(call.pk)],
        },
    )
    assert client.post(f"{CALLS}{call.pk}/decide/approve/", {"confirm": "yes"}).status_code == 403
    assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL


@pytest.mark.parametrize("tool", ["runs_admin_only", "fetch_external_url", "search_site"])
def test_editor_cannot_create_calls_of_tools_not_offered(editor, tool):
    # fetch_external_url and search_site: their built-in groups are disabled by default.
    response = api(editor).post("/api/calls/", {"tool": tool, "arguments": {}}, format="json")
    assert response.status_code == 403 and response.json()["code"] == "tool_not_offered"


def test_a_write_cannot_be_lifted_from_approval(editor):
    call = runs.request_call("runs_write", {"text": "w"}, user=editor)  # its rule says no
    assert call.state == CallState.AWAITING_APPROVAL and call.requires_approval


def test_skip_approval_without_an_allowlist_still_waits(
    lab_settings, group_factory, host_entry_factory, editor
):
    group_factory("web", enabled=True, skip_approval_with_allowlist=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    host_entry_factory(value="other.lab.example", list="deny")  # a denylist is not enough
    call = runs.request_call(
        "fetch_external_url", {"url": "https://docs.lab.example/"}, user=editor
    )
    assert call.state == CallState.AWAITING_APPROVAL


def test_skip_approval_with_an_invalid_allowlist_fetches_nothing(
    web, group_factory, host_entry_factory, editor
):
    group_factory("web", skip_approval_with_allowlist=True)
    entry = host_entry_factory(value="docs.lab.example")
    HostListEntry.objects.filter(pk=entry.pk).update(value="docs.lab.example/*")  # bad row
    call = settled_call(
        runs.request_call(
            "fetch_external_url", {"url": web.url("docs.lab.example", "/plain")}, user=editor
        )
    )
    assert call.state == CallState.FAILED
    assert call.result["meta"] == {"reason": "invalid_list"}
    assert web.requests == []
    assert EgressEvent.objects.filter(
        decision="denied", reason="invalid_list", call_id=str(call.pk)
    ).exists()


def test_a_call_of_a_group_disabled_after_the_request_gets_no_egress(
    web, group_factory, editor, approver
):
    call = runs.request_call(
        "fetch_external_url", {"url": web.url("docs.lab.example", "/plain")}, user=editor
    )
    group_factory("web", enabled=False)
    call = settled_call(runs.approve(call, by=approver))
    assert call.state == CallState.FAILED and call.reason == "tool_unavailable"
    assert web.requests == []


def test_no_resurrection_of_finished_calls(editor, approver, approver_factory):
    other = approver_factory(username="approver2")
    denied = runs.deny(runs.request_call("runs_echo", {"text": "d"}, user=editor), by=approver)
    done = runs.approve(runs.request_call("runs_echo", {"text": "s"}, user=editor), by=approver)
    done = settled_call(done)
    assert done.state == CallState.SUCCEEDED
    for call in (denied, done):
        response = api(other).post(f"/api/calls/{call.pk}/approve/", {}, format="json")
        assert response.status_code == 409
    assert runs.execute(done.pk).action == "noop"
    assert ToolCall.objects.get(pk=done.pk).attempts == 1


def test_an_expired_request_cannot_be_approved_before_the_sweep(editor, approver):
    from datetime import timedelta

    from django.utils import timezone

    call = runs.request_call("runs_echo", {"text": "late"}, user=editor)
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = api(approver).post(f"/api/calls/{call.pk}/approve/", {}, format="json")
    # The request starts the background runner, whose first sweep may expire the call
    # before the approval reads it (a loaded machine): then the approval meets an expired
    # call (invalid_transition).  Either way the expired request is not approved.
    assert response.status_code == 409
    assert response.json()["code"] in ("expired", "invalid_transition")
    assert ToolCall.objects.get(pk=call.pk).state == CallState.EXPIRED


def test_the_endpoint_secret_stays_out_of_the_api_and_the_audit(
    lab_settings,
    search_servers,
    group_factory,
    host_entry_factory,
    endpoint_factory,
    editor,
    approver,
):
    group_factory("rag", enabled=True, skip_approval_with_allowlist=True)
    host_entry_factory(group="rag", value="search.lab.example")
    lab_settings.dns.set("search.lab.example", a=[lab_settings.PUBLIC_V4[3]])
    search_servers(lab_settings.PUBLIC_V4[3])
    endpoint_factory(base_url="http://search.lab.example:9200/search", auth_header_value=SECRET)
    call = settled_call(runs.request_call("search_site", {"query": "x"}, user=editor))
    assert call.state == CallState.SUCCEEDED
    assert _Search.seen[0]["headers"]["Authorization"] == SECRET
    body = api(approver).get(f"/api/calls/{call.pk}/").content.decode()
    assert "review-secret" not in body
    assert not EgressEvent.objects.filter(detail__contains="review-secret").exists()
