from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.contrib.auth.models import AnonymousUser
from jsonschema import Draft202012Validator

from django_webfetch.models import EgressEvent
from django_webfetch.net import Scope
from django_webfetch.tools import (
    Effect,
    Tool,
    ToolApprovalRule,
    ToolContext,
    ToolInvocation,
    ToolResult,
    run_tool,
    specs,
    tools_for_user,
)
from django_webfetch.tools.registry import ToolRegistry

pytestmark = pytest.mark.django_db


class EchoTool(Tool):
    name = "echo"
    group = "sandbox"  # not "code": tools there must be admin-only (review11)
    description = "Echo the text back."
    parameters = {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 100}},
        "required": ["text"],
        "additionalProperties": False,
    }

    def execute(self, arguments, context):
        return ToolResult(content=arguments["text"], meta={"user": context.user.pk})


class AdminEcho(EchoTool):
    name = "admin_echo"
    requires_admin = True


class WriteTool(EchoTool):
    name = "write_page"
    effect = Effect.WRITE

    def requires_approval(self, call, context=None):
        return False  # a configurable rule trying to lift approval


class BrokenTool(EchoTool):
    name = "broken"

    def execute(self, arguments, context):
        raise RuntimeError("boom <server text>")


class WrongReturn(EchoTool):
    name = "wrong_return"

    def execute(self, arguments, context):
        return "not a ToolResult"


class BadRule(EchoTool):
    name = "bad_rule"

    def requires_approval(self, call, context=None):
        raise RuntimeError("rule failed")


class DefaultTool(EchoTool):
    name = "default_tool"
    group = "not-a-group"
    enabled_by_default = True


@pytest.fixture
def registry(tool_registry):
    for cls in (EchoTool, AdminEcho, WriteTool, BrokenTool, WrongReturn, BadRule, DefaultTool):
        tool_registry.register(cls)
    return tool_registry


def names(tools):
    return sorted(t.name for t in tools)


# -- registry -------------------------------------------------------------------------------


def test_builtins_are_registered(tool_registry):
    # list_pages and read_page come from the installed django_webfetch.cms app.
    assert names(tool_registry.all()) == [
        "fetch_external_url",
        "get_last_exception",
        "list_pages",
        "probe_url",
        "read_page",
        "read_source",
        "search_code",
        "search_site",
    ]
    assert tool_registry.problems == []
    fetch = tool_registry.get("fetch_external_url")
    assert (fetch.group, fetch.scope, fetch.effect) == ("web", Scope.EXTERNAL_FILTERED, Effect.READ)
    assert fetch.enabled_by_default is False and fetch.requires_admin is False
    search = tool_registry.get("search_site")
    assert (search.group, search.scope) == ("rag", Scope.CONFIGURED_ENDPOINT)
    assert search.enabled_by_default is False


@pytest.mark.parametrize("fmt", ["json_schema", "openai", "anthropic"])
def test_specs_are_valid_json_schema(tool_registry, fmt):
    for spec in tool_registry.specs(tool_registry.all(), fmt):
        if fmt == "openai":
            assert spec["type"] == "function"
            body = spec["function"]
            schema = body["parameters"]
        elif fmt == "anthropic":
            body = spec
            schema = spec["input_schema"]
        else:
            body = spec
            schema = spec["parameters"]
        assert body["name"] and body["description"]
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object"
        json.dumps(spec)


def test_unknown_spec_format(tool_registry):
    with pytest.raises(ValueError):
        tool_registry.specs(tool_registry.all(), "gemini")


def test_specs_for_user(editor, group_factory, tool_registry):
    assert specs(editor, "openai") == []
    group_factory("web", enabled=True)
    assert [s["function"]["name"] for s in specs(editor, "openai")] == ["fetch_external_url"]


def test_editors_never_see_admin_only_or_disabled_tools(registry, editor, superuser, group_factory):
    assert names(tools_for_user(editor)) == ["default_tool"]
    group_factory("sandbox", enabled=True)
    assert names(tools_for_user(editor)) == [
        "bad_rule",
        "broken",
        "default_tool",
        "echo",
        "write_page",
        "wrong_return",
    ]
    assert "admin_echo" in names(tools_for_user(superuser))
    group_factory("web", enabled=True)
    assert "fetch_external_url" in names(tools_for_user(editor))
    group_factory("web", enabled=False)
    assert "fetch_external_url" not in names(tools_for_user(superuser))


def test_mis_declared_group_offers_no_network_tool(registry, editor, group_factory):
    group_factory("web", enabled=True, scope="own_site")
    group_factory("rag", enabled=True, scope="external_filtered")
    assert "fetch_external_url" not in names(tools_for_user(editor))
    assert "search_site" not in names(tools_for_user(editor))


def test_anonymous_and_inactive_users_get_no_tools(registry, user_factory, group_factory):
    group_factory("sandbox", enabled=True)
    assert tools_for_user(None) == []
    assert tools_for_user(AnonymousUser()) == []
    assert tools_for_user(user_factory(active=False)) == []


def test_tool_validation(tool_registry):
    class NetworkByDefault(EchoTool):
        name = "net_default"
        scope = Scope.EXTERNAL_FILTERED
        enabled_by_default = True

    class BadName(EchoTool):
        name = "bad name!"

    class BadSchema(EchoTool):
        name = "bad_schema"
        parameters = {"type": "object", "properties": {"x": {"type": "nonsense"}}}

    class NotObject(EchoTool):
        name = "not_object"
        parameters = {"type": "string"}

    for cls in (NetworkByDefault, BadName, BadSchema, NotObject):
        with pytest.raises(ValueError):
            tool_registry.register(cls)
    with pytest.raises(ValueError, match="taken"):
        tool_registry.register(EchoTool)
        tool_registry.register(EchoTool)


def test_plugins_and_apps_are_discovered(monkeypatch, tool_registry):
    class FakeEntryPoint:
        def __init__(self, name, value):
            self.name = name
            self.value = value

        def load(self):
            if isinstance(self.value, Exception):
                raise self.value
            return self.value

    class Shadow(EchoTool):
        name = "fetch_external_url"

    eps = [
        FakeEntryPoint("acme", [EchoTool]),
        FakeEntryPoint("factory", lambda: [AdminEcho()]),
        FakeEntryPoint("shadow", Shadow),
        FakeEntryPoint("broken", ImportError("nope")),
    ]
    monkeypatch.setattr(
        "django_webfetch.tools.registry.entry_points",
        lambda group: eps if group == "django_webfetch.tools" else [],
    )
    app = apps.get_app_config("django_webfetch")
    monkeypatch.setattr(app, "webfetch_tools", ["tests.django.test_tools.BadRule"], raising=False)
    tool_registry.reset()
    assert names(tool_registry.all()) == [
        "admin_echo",
        "bad_rule",
        "echo",
        "fetch_external_url",
        "get_last_exception",
        "list_pages",
        "probe_url",
        "read_page",
        "read_source",
        "search_code",
        "search_site",
    ]
    # The built-in cannot be shadowed; the failures are reported (check E008).
    assert type(tool_registry.get("fetch_external_url")).__name__ == "FetchExternalUrl"
    assert len(tool_registry.problems) == 2


def test_separate_registry_without_discovery():
    reg = ToolRegistry(builtins=(), discover=False)
    assert reg.all() == []


# -- approval rules -------------------------------------------------------------------------


def test_write_effect_always_needs_approval(registry):
    write = registry.get("write_page")
    call = ToolInvocation(tool="write_page", arguments={"text": "x"})
    assert write.requires_approval(call) is False
    assert ToolApprovalRule.requires_approval(write, call) is True
    assert ToolApprovalRule.requires_approval(write, call, ToolContext(approved=True)) is True


def test_failing_rule_needs_approval(registry):
    call = ToolInvocation(tool="bad_rule", arguments={"text": "x"})
    assert ToolApprovalRule.requires_approval(registry.get("bad_rule"), call) is True
    assert ToolApprovalRule.requires_approval(registry.get("echo"), call) is False


def test_run_tool_enforces_approval(registry, editor, group_factory):
    group_factory("sandbox", enabled=True)
    result = run_tool("write_page", {"text": "x"}, user=editor)
    assert result.error == "approval_required"
    assert result.meta["preview"]["tool"] == "write_page"
    result = run_tool("write_page", {"text": "x"}, user=editor, context=ToolContext(approved=True))
    assert result.ok and result.content == "x"


# -- run_tool -------------------------------------------------------------------------------


def test_run_tool_success_uses_the_given_user(registry, editor, superuser, group_factory):
    group_factory("sandbox", enabled=True)
    result = run_tool(
        "echo", {"text": "hi"}, user=editor, context=ToolContext(user=superuser, call_id="c1")
    )
    assert result == ToolResult(content="hi", meta={"user": editor.pk})


@pytest.mark.parametrize(
    "arguments",
    [{}, {"text": 3}, {"text": "x", "extra": 1}, {"text": "x" * 101}, ["text"], None],
)
def test_run_tool_invalid_arguments(registry, editor, group_factory, arguments):
    group_factory("sandbox", enabled=True)
    result = run_tool("echo", arguments, user=editor)
    assert result.error == "invalid_arguments"


def test_run_tool_unknown_and_unavailable(registry, editor, group_factory):
    assert run_tool("nope", {}, user=editor).error == "unknown_tool"
    assert run_tool("echo", {"text": "x"}, user=editor).error == "tool_unavailable"
    group_factory("sandbox", enabled=True)
    assert run_tool("admin_echo", {"text": "x"}, user=editor).error == "tool_unavailable"
    assert run_tool("echo", {"text": "x"}, user=None).error == "tool_unavailable"


def test_no_exception_escapes(registry, editor, group_factory, caplog):
    group_factory("sandbox", enabled=True)
    result = run_tool("broken", {"text": "x"}, user=editor)
    assert result.error == "internal_error"
    assert "boom" not in result.content
    assert run_tool("wrong_return", {"text": "x"}, user=editor).error == "internal_error"


def test_tool_result_round_trip():
    result = ToolResult(content="text", error="egress_denied", meta={"reason": "scope", "n": 1})
    data = json.loads(json.dumps(result.to_dict()))
    assert ToolResult.from_dict(data) == result
    assert ToolResult.from_dict({"content": "x"}) == ToolResult(content="x")
    with pytest.raises(TypeError):
        ToolResult(meta={"bad": object()})
    with pytest.raises(TypeError):
        ToolResult(content=b"bytes")
    with pytest.raises(ValueError):
        ToolResult(meta={"nan": float("nan")})


# -- the built-in network tools, without the lab --------------------------------------------


def fetch_call(url, user=None):
    return ToolInvocation(tool="fetch_external_url", arguments={"url": url}, user=user)


def test_fetch_external_url_approval(tool_registry, group_factory, host_entry_factory):
    tool = tool_registry.get("fetch_external_url")
    call = fetch_call("https://docs.example.org/a")
    assert ToolApprovalRule.requires_approval(tool, call) is True
    group_factory("web", enabled=True, skip_approval_with_allowlist=True)
    assert ToolApprovalRule.requires_approval(tool, call) is True  # no allowlist
    host_entry_factory(value="docs.example.org", list="deny")
    assert ToolApprovalRule.requires_approval(tool, call) is True  # a denylist is not an allowlist
    host_entry_factory(value="docs.example.org", list="allow")
    assert ToolApprovalRule.requires_approval(tool, call) is False
    group_factory("web", skip_approval_with_allowlist=False)
    assert ToolApprovalRule.requires_approval(tool, call) is True


def test_fetch_external_url_preview(tool_registry, editor):
    tool = tool_registry.get("fetch_external_url")
    url = "https://docs.example.org:8443/a/b?q=caf%C3%A9+au+lait&token=abc&empty="
    preview = tool.approval_preview(fetch_call(url, editor))
    assert preview["host"] == "docs.example.org"
    assert preview["port"] == 8443
    assert preview["query_raw"] == "q=caf%C3%A9+au+lait&token=abc&empty="
    assert preview["query_decoded"] == [["q", "café au lait"], ["token", "abc"], ["empty", ""]]
    assert preview["group"] == "web" and preview["user"] == "editor"
    assert preview["url"] == url
    assert tool.approval_preview(fetch_call("http://[::1"))["error"] == "invalid_url"


@pytest.mark.parametrize(
    ("url", "host", "path", "refused_by"),
    [
        # The card shows what the guard will decide on, not what a lenient parser reads.
        ("https://DOCS.example.org/a/../admin?x=1", "docs.example.org", "/admin", None),
        ("https://docs.example.org/%2e%2e/admin", None, None, "invalid_url"),
        ("https://good.example\\@evil.example/", None, None, "invalid_url"),
        ("https://user@docs.example.org/", None, None, "userinfo"),
        ("https://0x7f.1/", None, None, "legacy_numeric_host"),
    ],
)
def test_fetch_external_url_preview_matches_the_guard(
    tool_registry, editor, url, host, path, refused_by
):
    preview = tool_registry.get("fetch_external_url").approval_preview(fetch_call(url, editor))
    assert preview["url"] == url
    assert preview.get("host") == host
    assert preview.get("path") == path
    assert preview.get("refused_by") == refused_by


def test_fetch_external_url_waits_for_approval(tool_registry, editor, group_factory):
    group_factory("web", enabled=True)
    result = run_tool("fetch_external_url", {"url": "https://docs.example.org/?q=1"}, user=editor)
    assert result.error == "approval_required"
    assert result.meta["preview"]["query_raw"] == "q=1"
    assert not EgressEvent.objects.exists()


def test_fetch_external_url_refusal_is_audited(tool_registry, editor, group_factory, monkeypatch):
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    group_factory("web", enabled=True)
    result = run_tool(
        "fetch_external_url",
        {"url": "http://10.1.2.3/admin"},
        user=editor,
        context=ToolContext(approved=True, call_id="call-7"),
    )
    assert result.error == "address_not_allowed"
    assert result.meta == {"reason": "address_class:private"}
    assert "10.1.2.3" not in result.content
    event = EgressEvent.objects.get()
    assert (
        event.decision,
        event.reason,
        event.url_host,
        event.tool,
        event.call_id,
        event.user,
    ) == ("denied", "address_class:private", "10.1.2.3", "fetch_external_url", "call-7", editor)


def test_fetch_external_url_policy_unavailable(tool_registry, editor, group_factory, settings):
    group_factory("web", enabled=True)
    settings.WEBFETCH_TIMEOUT = "forever"
    result = run_tool(
        "fetch_external_url",
        {"url": "https://docs.example.org/"},
        user=editor,
        context=ToolContext(approved=True),
    )
    assert result.error == "egress_denied"
    assert result.meta == {"reason": "policy_unavailable"}
    event = EgressEvent.objects.get()
    assert (event.decision, event.reason, event.url_host) == (
        "denied",
        "policy_unavailable",
        "docs.example.org",
    )


def test_search_site_without_endpoint(tool_registry, editor, group_factory, host_entry_factory):
    group_factory("rag", enabled=True, skip_approval_with_allowlist=True)
    host_entry_factory(group="rag", value="search.example.org")
    tool = tool_registry.get("search_site")
    invocation = ToolInvocation("search_site", {"query": "x"})
    assert ToolApprovalRule.requires_approval(tool, invocation) is False
    result = run_tool("search_site", {"query": "opening hours"}, user=editor)
    assert result.error == "egress_denied"
    assert result.meta == {"reason": "no_endpoint"}
    assert EgressEvent.objects.get().reason == "no_endpoint"


def test_search_site_arguments(tool_registry, editor, group_factory):
    group_factory("rag", enabled=True)
    for arguments in (
        {"query": ""},
        {"query": "x", "limit": 0},
        {"query": "x", "limit": 21},
        {"q": "x"},
    ):
        assert run_tool("search_site", arguments, user=editor).error == "invalid_arguments"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            b'[{"title": "A", "url": "u", "snippet": "s"}]',
            [{"title": "A", "url": "u", "snippet": "s"}],
        ),
        (
            b'{"results": [{"title": " multi\\n line ", "url": 3}, "junk"]}',
            [{"title": "multi line", "url": "", "snippet": ""}],
        ),
        (b'{"hits": []}', []),
        (b'{"lab": true}', None),
        (b"not json", None),
        (b"\xff\xfe", None),
        (b"[" * 100_000 + b"]" * 100_000, None),
    ],
)
def test_search_hits_parsing(body, expected):
    from django_webfetch.tools.search_site import parse_hits

    assert parse_hits(body, 5) == expected


def test_search_hits_are_capped():
    from django_webfetch.tools.search_site import parse_hits

    hits = [{"title": "t" * 1000, "url": "u", "snippet": "s" * 5000}] * 50
    parsed = parse_hits(json.dumps(hits).encode(), 50)
    assert len(parsed) == 20
    assert len(parsed[0]["title"]) == 300 and len(parsed[0]["snippet"]) == 1000
