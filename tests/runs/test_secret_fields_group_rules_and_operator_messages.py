"""Issue 9: review findings on the Django side (items 1, 4, 6-10, 13-15).

Every test failed before its fix.  Network behaviour runs against the lab's real DNS and
servers with the unweakened guard.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.core.exceptions import FieldError
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.checks import check_admin_secrets, check_api_mount, check_sites
from django_webfetch.models import CallState, ConfiguredEndpoint, EgressEvent, ToolCall, ToolGroup
from django_webfetch.models.fields import secret_fields, touches_secret
from django_webfetch.net.__main__ import main as net_main
from django_webfetch.tools import ToolApprovalRule, ToolInvocation
from tests.settle import settled_call

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-Bearer-abc"


@pytest.fixture(autouse=True)
def api_urls(settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.REST_FRAMEWORK = {
        "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"]
    }


def api(user: Any) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


# -- item 1: no secret oracle ------------------------------------------------------------------

LOOKUPS = [
    "",
    "__exact",
    "__iexact",
    "__regex",
    "__iregex",
    "__startswith",
    "__istartswith",
    "__contains",
    "__icontains",
    "__endswith",
    "__gt",
    "__gte",
    "__lt",
    "__lte",
    "__in",
    "__isnull",
    "__range",
    "__length__gt",
    "__lower__startswith",
    "__REGEX",
]


def _secret_paths(model: Any, depth: int = 3, prefix: str = "", seen: tuple = ()) -> list[str]:
    """Every lookup path from ``model`` that reaches a field marked secret."""
    paths = [f"{prefix}{f.name}" for f in secret_fields(model)]
    if depth:
        for field in model._meta.get_fields():
            related = getattr(field, "related_model", None)
            if related is None or related in seen or not field.is_relation:
                continue
            name = getattr(field, "name", None)
            if name:
                paths += _secret_paths(related, depth - 1, f"{prefix}{name}__", (*seen, model))
    return paths


def test_the_secret_marker_is_explicit_and_found_on_every_secret_field():
    found = {
        f"{model._meta.label}.{field.name}"
        for model in apps.get_models()
        for field in secret_fields(model)
    }
    assert found == {
        "django_webfetch.ConfiguredEndpoint.auth_header_value",
        "django_webfetch.PluginInstance.secret_config",
    }
    for model in apps.get_app_config("django_webfetch").get_models():
        for field in model._meta.get_fields():
            if (
                "secret" in field.name
                or "auth_header_value" in field.name
                or field.name.endswith(("_token", "_password"))
            ):
                assert field in secret_fields(model), field


@pytest.fixture
def secret_endpoint(group_factory):
    group = group_factory("rag", scope="configured_endpoint")
    return ConfiguredEndpoint.objects.create(
        group=group,
        name="search",
        base_url="https://search.example.org/api/",
        auth_header_value=SECRET,
    )


@pytest.fixture
def viewer(user_factory):
    user = user_factory(staff=True, username="viewer")
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="django_webfetch", codename__startswith="view_"
        ),
        *Permission.objects.filter(codename="change_configuredendpoint"),
    )
    return user


@pytest.mark.parametrize("who", ["viewer", "superuser"])
def test_no_admin_lookup_reaches_a_secret(client, secret_endpoint, who, request):
    client.force_login(request.getfixturevalue(who))
    tried = 0
    for model in admin.site._registry:
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for path in _secret_paths(model):
            for lookup in LOOKUPS:
                for value in (SECRET[:1], "zzz", f"^{SECRET[:3]}", "0,1", SECRET):
                    response = client.get(url, {f"{path}{lookup}": value})
                    tried += 1
                    # The admin's own refusal, whatever the value: no oracle.
                    assert response.status_code == 400, (url, path, lookup, value)
    assert tried >= 300


def test_admin_search_and_ordering_never_touch_the_secret(client, superuser, secret_endpoint):
    client.force_login(superuser)
    url = "/admin/django_webfetch/configuredendpoint/"
    assert client.get(url, {"q": SECRET[:4]}).context["cl"].result_count == 0
    assert client.get(url, {"q": "search"}).context["cl"].result_count == 1
    for order in ("0", "-1", "1.2.3.4.5.6.7.8", "-9"):
        response = client.get(url, {"o": order})
        assert response.status_code in (200, 302)
        assert SECRET not in response.content.decode()
    change = client.get(f"{url}{secret_endpoint.pk}/change/").content.decode()
    assert SECRET not in change


@pytest.mark.parametrize("path", _secret_paths(ToolGroup) + _secret_paths(EgressEvent))
def test_the_orm_refuses_lookups_on_a_secret_through_relations(db, path):
    model = ToolGroup if path.startswith("endpoints") else EgressEvent
    for lookup in ("", "__startswith", "__regex", "__gt", "__isnull", "__length"):
        with pytest.raises(FieldError):
            list(model.objects.filter(**{f"{path}{lookup}": "s"}))


def test_a_secret_cannot_be_filtered_even_by_our_own_code(secret_endpoint):
    with pytest.raises(FieldError):
        ConfiguredEndpoint.objects.filter(auth_header_value__startswith="s").exists()
    with pytest.raises(FieldError):
        ConfiguredEndpoint.objects.exclude(auth_header_value="").exists()
    # Reading and writing the row still works.
    secret_endpoint.refresh_from_db()
    assert secret_endpoint.auth_header_value == SECRET


def test_api_parameters_never_reach_a_secret(run_tools, secret_endpoint, editor, approver):
    runs.request_call("runs_echo", {"text": "x"}, user=editor)
    client = api(approver)

    def listing(extra: dict[str, str] | None = None) -> Any:
        # The poll hint grows with the time the call has waited: not the listing's content.
        body = client.get("/api/calls/", extra or {}).json()
        for row in body["results"]:
            assert row.pop("retry_after") is not None
        return body

    baseline = listing()
    assert baseline["count"] == 1
    for name in _secret_paths(ToolCall) + ["auth_header_value", "endpoints__auth_header_value"]:
        for lookup in ("", "__regex", "__startswith"):
            for extra in ({f"{name}{lookup}": "^s"}, {"ordering": name}, {"search": SECRET}):
                assert listing(extra) == baseline
                assert SECRET not in client.get("/api/tools/", extra).content.decode()


def test_e009_refuses_an_admin_that_filters_searches_or_orders_on_a_secret(db):
    site = admin.AdminSite(name="issue9_bad")

    class BadEndpoints(admin.ModelAdmin):
        list_filter = ("auth_header_value",)
        search_fields = ("^auth_header_value",)
        ordering = ("-auth_header_value",)

    class BadGroups(admin.ModelAdmin):
        search_fields = ("endpoints__auth_header_value",)
        list_display = ("slug", "secret_column")

        @admin.display(ordering="endpoints__auth_header_value")
        def secret_column(self, obj):
            return ""

    site.register(ConfiguredEndpoint, BadEndpoints)
    site.register(ToolGroup, BadGroups)
    try:
        errors = [e for e in check_admin_secrets() if e.id == "django_webfetch.E009"]
    finally:
        from django.contrib.admin.sites import all_sites

        all_sites.discard(site)
    assert len(errors) == 5
    assert check_admin_secrets() == []  # the shipped admins are clean
    assert touches_secret(EgressEvent, "group__endpoints__auth_header_value__regex")
    assert not touches_secret(ConfiguredEndpoint, "auth_header_name")


# -- item 4: approval decided by the group -------------------------------------------------


@pytest.fixture
def thirdparty(settings, tool_registry):
    from tests.thirdparty.tools import PageTitle

    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "tests.thirdparty"]):
        tool_registry.reset()
        PageTitle.executed = []
        yield tool_registry
    tool_registry.reset()


def test_a_third_party_tool_in_a_network_group_needs_approval(
    thirdparty, lab_settings, group_factory, host_entry_factory, editor
):
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    group_factory("web", enabled=True)
    tool = thirdparty.get("thirdparty_page_title")
    assert tool in thirdparty.tools_for_user(editor)
    invocation = ToolInvocation(tool.name, {"url": "http://docs.lab.example/"})
    assert tool.requires_approval(invocation) is False  # what its code says
    assert ToolApprovalRule.requires_approval(tool, invocation) is True  # what decides
    call = runs.request_call(tool.name, {"url": "http://docs.lab.example/"}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL
    from tests.thirdparty.tools import PageTitle

    assert PageTitle.executed == []
    # The skip flag alone, or an allowlist alone, is not enough.
    group_factory("web", skip_approval_with_allowlist=True)
    assert ToolApprovalRule.requires_approval(tool, invocation) is True
    group_factory("web", skip_approval_with_allowlist=False)
    host_entry_factory(value="docs.lab.example")
    assert ToolApprovalRule.requires_approval(tool, invocation) is True
    group_factory("web", skip_approval_with_allowlist=True)
    assert ToolApprovalRule.requires_approval(tool, invocation) is False


def test_the_group_decides_whatever_the_tool_scope_says(tool_registry, group_factory, editor):
    from django_webfetch.net.policy import Scope
    from django_webfetch.tools import Tool, ToolResult

    class Sneaky(Tool):
        name = "sneaky"
        group = "rag"
        scope = Scope.NONE  # claims no network, sits in a configured_endpoint group
        description = "x"

        def execute(self, arguments, context):
            return ToolResult(content="")

    tool_registry.register(Sneaky)
    group_factory("rag", enabled=True, scope="configured_endpoint")
    invocation = ToolInvocation("sneaky", {})
    assert ToolApprovalRule.requires_approval(Sneaky(), invocation) is True
    # No group row at all: a network tool needs approval (fail closed).
    ToolGroup.objects.filter(slug="rag").delete()
    assert ToolApprovalRule.requires_approval(Sneaky(), invocation) is False
    Sneaky.scope = Scope.EXTERNAL_FILTERED
    assert ToolApprovalRule.requires_approval(Sneaky(), invocation) is True


def test_a_tool_rule_can_only_add_approval(run_tools, group_factory, editor):
    group_factory("code", enabled=True, scope="none")
    echo = run_tools.get("runs_echo")
    assert ToolApprovalRule.requires_approval(echo, ToolInvocation("runs_echo", {})) is True
    write = run_tools.get("runs_write")
    assert ToolApprovalRule.requires_approval(write, ToolInvocation("runs_write", {})) is True


# -- item 6: pre-flight before a human is asked --------------------------------------------

REFUSED_AT_REQUEST = [
    ("http://169.254.169.254/latest/meta-data/", "address_class:metadata"),
    ("http://[::ffff:169.254.169.254]/", "address_class:ipv4_mapped"),
    ("http://0xa9fea9fe/", "legacy_numeric_host"),
    ("http://2852039166/", "legacy_numeric_host"),
    ("http://169.254.169.254.nip.example/", "address_class:metadata"),
    ("http://private.lab.example/", "address_class:private"),
    ("http://gone.lab.example/", "unresolvable"),
    ("http://docs.lab.example:8080/", "port"),
    ("http://[fd00::10]/", "address_class:ula"),
    ("http://user@docs.lab.example/", "userinfo"),
]


@pytest.mark.parametrize(("url", "reason"), REFUSED_AT_REQUEST)
def test_a_url_the_guard_refuses_fails_at_request_time(
    lab_settings, group_factory, editor, url, reason
):
    group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    lab_settings.dns.set("private.lab.example", a=[lab_settings.PRIVATE[0]])
    lab_settings.dns.set("169.254.169.254.nip.example", a=["169.254.169.254"])
    call = runs.request_call("fetch_external_url", {"url": url}, user=editor)
    assert call.state == CallState.FAILED  # never waits for an approver
    assert call.reason == reason
    assert call.result["meta"]["reason"] == reason and call.result["meta"]["preflight"]
    event = EgressEvent.objects.get(call_id=str(call.pk))
    assert (event.decision, event.reason, event.detail) == ("denied", reason, "pre-flight")
    assert lab_settings.connected_addresses() == set()


@pytest.mark.parametrize("dns", ["blackholed", "nothing_listens"])
@pytest.mark.long  # tens of seconds: started first (tests/conftest.py)
def test_a_url_whose_dns_cannot_be_reached_fails_at_request_time(
    lab_settings, settings, group_factory, editor, approver, mailoutbox, dns
):
    """Issue 31 item 5 (ADR 0038): no approver is asked about a destination whose DNS server
    could not be reached; the call fails at once with ``dns_error``, recorded."""
    group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    if dns == "blackholed":
        lab_settings.dns.drop("docs.lab.example")  # the server never answers
    else:
        # A public-looking lab address with a web server and no DNS server on port 53.
        settings.WEBFETCH_DNS_NAMESERVERS = [lab_settings.PUBLIC_V4[0]]
    call = runs.request_call("fetch_external_url", {"url": "http://docs.lab.example/"}, user=editor)
    assert call.state == CallState.FAILED  # never waits for an approver
    assert call.reason == "dns_error"
    assert call.result["meta"]["reason"] == "dns_error" and call.result["meta"]["preflight"]
    assert call.result["content"].startswith("The destination could not be checked: no DNS")
    assert "nobody was asked to approve it" in call.result["content"]
    event = EgressEvent.objects.get(call_id=str(call.pk))
    assert (event.decision, event.reason, event.detail) == ("denied", "dns_error", "pre-flight")
    assert mailoutbox == []
    assert not ToolCall.objects.filter(state=CallState.AWAITING_APPROVAL).exists()
    assert lab_settings.accepts(lab_settings.PUBLIC_V4[0]) == []
    # DNS back: the same URL waits for an approver with a checked verdict.
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    settings.WEBFETCH_DNS_NAMESERVERS = lab_settings.nameservers
    again = runs.request_call(
        "fetch_external_url", {"url": "http://docs.lab.example/"}, user=editor
    )
    assert again.state == CallState.AWAITING_APPROVAL
    assert again.approval_preview["preflight"]["verdict"] == "allowed"


def test_the_card_and_the_api_show_the_verdict_and_execution_checks_again(
    lab_settings, group_factory, editor, approver
):
    group_factory("web", enabled=True)
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[1]])
    call = runs.request_call(
        "fetch_external_url", {"url": "http://news.lab.example/page"}, user=editor
    )
    assert call.state == CallState.AWAITING_APPROVAL
    verdict = call.approval_preview["preflight"]
    assert verdict["verdict"] == "allowed"
    assert verdict["addresses"] == [lab_settings.PUBLIC_V4[1]]
    assert verdict["checked_at"]
    shown = api(approver).get(f"/api/calls/{call.pk}/").json()
    assert shown["approval_preview"]["preflight"] == verdict
    page = None
    client = api(approver)
    page = client.get(f"/admin/django_webfetch/toolcall/{call.pk}/change/").content.decode()
    assert lab_settings.PUBLIC_V4[1] in page
    # The pre-flight in words, not a raw Python dict (issue 31).
    assert "allowed when requested" in page
    assert "&#x27;verdict&#x27;" not in page and "'verdict'" not in page
    assert lab_settings.connected_addresses() == set()
    # DNS changes before the approval: execution runs the whole guard again.
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PRIVATE[0]])
    done = settled_call(runs.approve(call, by=approver))
    assert done.state == CallState.FAILED
    assert done.result["meta"]["reason"] == "address_class:private"
    assert lab_settings.connected_addresses() == set()


# -- item 7: failure reasons in our words, on the event, in the API and the admin ----------


def test_a_connection_failure_is_named_everywhere(
    lab_settings, group_factory, host_entry_factory, editor, superuser, client
):
    group_factory("web", enabled=True, skip_approval_with_allowlist=True)
    host_entry_factory(value="11.0.0.20:7009")  # nothing listens there
    call = runs.request_call("fetch_external_url", {"url": "http://11.0.0.20:7009/"}, user=editor)
    assert call.state == CallState.APPROVED  # no approval needed: it runs in the background
    call = settled_call(call)
    assert call.state == CallState.FAILED
    assert call.result["meta"]["failure"] == "connect_refused"
    assert "nothing listens on that port" in call.result["content"]
    assert "Errno" not in call.result["content"]
    event = EgressEvent.objects.get(call_id=str(call.pk), decision="failed")
    assert event.failure == "connect_refused"
    assert event.failure_text.startswith("The server refused the connection")
    shown = api(superuser).get(f"/api/calls/{call.pk}/").json()
    assert shown["result"]["meta"]["failure"] == "connect_refused"
    client.force_login(superuser)
    listing = client.get("/admin/django_webfetch/egressevent/").content.decode()
    assert "connect_refused" in listing
    detail = client.get(f"/admin/django_webfetch/egressevent/{event.pk}/change/").content.decode()
    assert "nothing listens on that port" in detail


# -- item 8: why a tool is not offered ---------------------------------------------------


def test_tool_not_offered_says_why(thirdparty, group_factory, editor, superuser):
    group_factory("web", enabled=False)
    cases = [
        ("fetch_external_url", "group_disabled"),
        ("thirdparty_admin_only", "admin_only"),
        ("no_such_tool_x", "no_such_tool"),
    ]
    for name, why in cases:
        with pytest.raises(runs.ToolNotOfferedError) as info:
            runs.request_call(name, {}, user=editor)
        assert info.value.why == why
        response = api(editor).post("/api/calls/", {"tool": name, "arguments": {}}, format="json")
        body = response.json()
        assert (response.status_code, body["code"], body["why"]) == (403, "tool_not_offered", why)
        assert body["detail"] == str(info.value)
        stored = ToolCall.objects.filter(tool=name).first()
        assert stored.result["meta"]["why"] == why
    group_factory("web", enabled=True, scope="own_site")
    with pytest.raises(runs.ToolNotOfferedError) as info:
        runs.request_call("fetch_external_url", {}, user=editor)
    assert info.value.why == "group_scope"


def test_explain_with_no_such_group_is_an_error(db):
    with pytest.raises(CommandError) as info:
        call_command("webfetch", "explain", "http://11.0.0.10/", "--group", "nosuch")
    assert info.value.returncode == 2 and "no such group" in str(info.value)
    with pytest.raises(CommandError) as info:
        call_command("webfetch", "fetch", "http://11.0.0.10/", "--group", "nosuch")
    assert info.value.returncode == 2


# -- item 9: a complete README snippet, and checks for what a new site trips over ---------


def _readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    return text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_readme_snippet_is_complete_and_matches_the_installation_page():
    snippet = _readme_section("Add it to a Django site")
    installation = (ROOT / "docs" / "installation.rst").read_text()
    for needed in ('"django.contrib.sites"', '"rest_framework"', '"django_webfetch"', "SITE_ID"):
        assert needed in snippet, needed
        assert needed in installation, needed
    assert 'path("api/", include("django_webfetch.api.urls"))' in snippet
    assert "pip install" in snippet and "migrate" in snippet


def test_w007_sites_missing(settings):
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "django.contrib.sites"]
    assert [m.id for m in check_sites()] == ["django_webfetch.W007"]


def test_e010_site_id_missing(settings):
    del settings.SITE_ID
    assert [m.id for m in check_sites()] == ["django_webfetch.E010"]
    settings.SITE_ID = 1
    assert check_sites() == []


def test_e011_api_mounted_without_rest_framework(settings):
    assert check_api_mount() == []
    settings.INSTALLED_APPS = [
        a for a in settings.INSTALLED_APPS if not a.startswith("rest_framework")
    ]
    assert [m.id for m in check_api_mount()] == ["django_webfetch.E011"]
    settings.ROOT_URLCONF = "tests.runs.urls_no_api"  # not mounted: nothing to say
    assert check_api_mount() == []


# -- item 10: one mount path, and the mount point answers --------------------------------


def test_one_api_mount_path_everywhere():
    mounts = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.rst"))]:
        mounts |= set(
            re.findall(r'path\("([^"]*)", include\("django_webfetch\.api\.urls"', path.read_text())
        )
    assert mounts == {"api/"}


def test_the_mount_point_lists_tools_calls_and_schema(editor, client):
    body = api(editor).get("/api/").json()
    assert body == {
        "tools": "http://testserver/api/tools/",
        "calls": "http://testserver/api/calls/",
        "conversations": "http://testserver/api/conversations/",
        "schema": "http://testserver/api/schema/",
    }
    assert APIClient().get("/api/").status_code in (401, 403)


# -- item 13: one exit-code convention ---------------------------------------------------


def test_manage_py_exit_codes(lab_settings, group_factory, host_entry_factory):
    group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    call_command("webfetch", "explain", "http://docs.lab.example/")  # 0: no exception
    call_command("webfetch", "fetch", "http://docs.lab.example/plain")
    for command in ("explain", "fetch"):
        with pytest.raises(CommandError) as info:
            call_command("webfetch", command, "http://127.0.0.1/")
        assert info.value.returncode == 1, command
    host_entry_factory(value="11.0.0.20:7009")
    with pytest.raises(CommandError) as info:
        call_command("webfetch", "fetch", "http://11.0.0.20:7009/")
    assert info.value.returncode == 2
    assert "connect_refused" in str(info.value) and "Errno" not in str(info.value)
    lab_settings.dns.servfail("broken.lab.example")
    with pytest.raises(CommandError) as info:
        call_command("webfetch", "explain", "http://broken.lab.example/")
    assert info.value.returncode == 2


@pytest.mark.lab
def test_python_m_net_exit_codes(lab, capsys):
    ns = ["--nameserver", lab.DNS_V4, "--ca-file", lab.ca_file]
    lab.dns.set("docs.lab.example", a=[lab.PUBLIC_V4[0]])
    assert net_main(["explain", "http://docs.lab.example/", *ns]) == 0
    assert net_main(["fetch", "http://docs.lab.example/plain", *ns]) == 0
    assert re.search(r"in \d+ ms|in \d+\.\d s", capsys.readouterr().err)
    assert net_main(["explain", "http://10.0.0.1/", *ns]) == 1
    assert net_main(["fetch", "http://10.0.0.1/", *ns]) == 1
    assert net_main(["fetch", "http://11.0.0.20:7009/", "--allow", "11.0.0.20:7009", *ns]) == 2
    assert "connect_refused" in capsys.readouterr().err
    lab.dns.servfail("broken.lab.example")
    assert net_main(["explain", "http://broken.lab.example/", *ns]) == 2
    assert net_main(["explain", "http://x.example/", "--nameserver", "not-an-ip"]) == 2
    with pytest.raises(SystemExit) as info:
        net_main(["frobnicate", "http://x.example/"])
    assert info.value.code == 2


# -- item 14: cosmetics ------------------------------------------------------------------


def test_durations_are_rounded_with_units():
    from django_webfetch.admin import format_duration

    assert format_duration(0.0123456) == "12 ms"
    assert format_duration(0.9994) == "999 ms"
    assert format_duration(1.26) == "1.3 s"
    assert format_duration(None) == "-"


def test_event_list_shows_rounded_durations(superuser, client):
    EgressEvent.objects.create(decision="fetched", url_host="a.example", duration=0.0123456)
    client.force_login(superuser)
    html = client.get("/admin/django_webfetch/egressevent/").content.decode()
    assert "12 ms" in html and "0.0123456" not in html


def test_admin_messages_do_not_capitalise_tool_names(
    run_tools, group_factory, editor, approver, client
):
    call = runs.request_call("runs_echo", {"text": "x"}, user=editor)
    client.force_login(approver)
    response = client.post(
        f"/admin/django_webfetch/toolcall/{call.pk}/decide/approve/",
        {"comment": "", "confirm": "yes"},
        follow=True,
    )
    html = response.content.decode()
    assert "Runs_echo" not in html
    assert "Call runs_echo" in html


def test_the_browsable_api_shows_no_rest_markup(editor):
    client = api(editor)
    for url in ("/api/", "/api/tools/", "/api/calls/"):
        html = client.get(url, HTTP_ACCEPT="text/html").content.decode()
        assert "``" not in html, url
        assert ":doc:`" not in html and ":class:`" not in html


# -- item 15: retention for finished calls -----------------------------------------------


def _finished(editor, days_ago: float, **result: Any) -> ToolCall:
    call = runs.request_call("runs_echo", {"text": "page text and ?q=private"}, user=editor)
    ToolCall.objects.filter(pk=call.pk).update(
        state=CallState.SUCCEEDED,
        result={"content": "third-party page text", "error": None, "meta": {"q": "x"}, **result},
        decision_comment="looks fine",
        finished_at=timezone.now() - timedelta(days=days_ago),
    )
    return ToolCall.objects.get(pk=call.pk)


def test_finished_calls_lose_their_content_after_the_retention(run_tools, editor, settings):
    old = _finished(editor, 31)
    failed = _finished(editor, 40, error="http_status")
    recent = _finished(editor, 29)
    waiting = runs.request_call("runs_echo", {"text": "still open"}, user=editor)
    ToolCall.objects.filter(pk=waiting.pk).update(created=timezone.now() - timedelta(days=90))
    assert runs.prune_calls() == 2
    old.refresh_from_db()
    assert old.arguments == {} and old.approval_preview == {} and old.decision_comment == ""
    assert old.result == {"content": "", "error": None, "meta": {}}
    # The audit metadata stays.
    assert (old.tool, old.user, old.state) == ("runs_echo", editor, CallState.SUCCEEDED)
    assert old.finished_at and old.content_pruned_at
    failed.refresh_from_db()
    assert failed.result["error"] == "http_status"
    recent.refresh_from_db()
    assert recent.result["content"] == "third-party page text"
    assert ToolCall.objects.get(pk=waiting.pk).arguments == {"text": "still open"}
    assert runs.prune_calls() == 0  # idempotent
    settings.WEBFETCH_CALL_RETENTION_DAYS = 1
    assert runs.sweep().pruned == 1


def test_the_prune_command_drops_call_content(run_tools, editor, capsys):
    _finished(editor, 31)
    call_command("webfetch", "prune_events", "--dry-run")
    assert "1 tool call(s)" in capsys.readouterr().out
    call_command("webfetch", "prune_events", "--call-days", "30")
    assert "Dropped the content of 1 tool call(s)" in capsys.readouterr().out
    with pytest.raises(CommandError):
        call_command("webfetch", "prune_events", "--call-days", "-1")
    assert json.dumps(ToolCall.objects.get().result).count("third-party") == 0


@pytest.mark.parametrize(
    "base", ["https://s.example/a%2fb/", "https://s.example/a;v=1/", "https://s.example/%2e%2e/x/"]
)
def test_an_endpoint_base_the_guard_cannot_read_is_refused_at_save(group_factory, base):
    from django.core.exceptions import ValidationError

    group = group_factory("rag", scope="configured_endpoint")
    with pytest.raises(ValidationError):
        ConfiguredEndpoint.objects.create(group=group, name="x", base_url=base)
    ConfiguredEndpoint.objects.create(group=group, name="ok", base_url="https://s.example/a/")


def test_search_site_is_pre_flighted_against_its_endpoint(
    lab_settings, group_factory, endpoint_factory, editor
):
    group_factory("rag", enabled=True, scope="configured_endpoint")
    # No endpoint: nothing to check before the approval (execution refuses no_endpoint).
    call = runs.request_call("search_site", {"query": "x"}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL
    assert "preflight" not in call.approval_preview
    lab_settings.dns.set("search.lab.example", a=[lab_settings.PUBLIC_V4[3]])
    endpoint_factory(base_url="http://search.lab.example:9200/search")
    call = runs.request_call("search_site", {"query": "opening hours"}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL
    assert call.approval_preview["preflight"]["addresses"] == [lab_settings.PUBLIC_V4[3]]
    lab_settings.dns.set("search.lab.example", a=[lab_settings.PRIVATE[0]])
    call = runs.request_call("search_site", {"query": "x"}, user=editor)
    assert (call.state, call.reason) == (CallState.FAILED, "address_class:private")
