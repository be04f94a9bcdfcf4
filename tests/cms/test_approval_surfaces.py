"""An approval shows what is approved (issue 19, item 2).

Every argument of every registered tool (the built-ins, the django CMS content tools, the
error-analysis tools, the example plugin's tools and a plugin-style write) reaches every
approval surface, complete and escaped: the django CMS card, the approval e-mail, the
admin's call page and its approve/deny confirmation.  Arguments are generated (HTML, quotes,
line breaks, long strings up to the 16 KiB cap); the pre-flight verdict stays on the card.
"""

from __future__ import annotations

import html
import json
import os
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from django.core import mail
from django.utils import timezone
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from django_webfetch.models import CallState, ToolCall
from django_webfetch.net.policy import Scope
from django_webfetch.runs.bounds import MAX_ARGUMENTS_BYTES
from django_webfetch.tools import Effect, Tool, ToolInvocation, ToolResult
from django_webfetch.tools.display import visible_name

PLUGIN_SITE = os.path.join(os.path.dirname(__file__), "..", "plugins", "site")
CHANGE = "/admin/django_webfetch/toolcall/{}/change/"
DECIDE = "/admin/django_webfetch/toolcall/{}/decide/approve/"


class PluginStyleWrite(Tool):
    """A write whose card (its own ``approval_preview``) shows nothing of what it writes."""

    name = "surfaces_write"
    group = "surfaces-test"
    scope = Scope.NONE
    effect = Effect.WRITE
    enabled_by_default = True
    description = "Write a record (approval surface tests)."
    parameters: ClassVar[dict[str, Any]] = {"type": "object"}

    def approval_preview(self, call: Any) -> dict[str, Any]:
        return {"tool": self.name, "group": self.group}

    def execute(self, arguments: Any, context: Any) -> ToolResult:  # pragma: no cover
        return ToolResult(content="written")


@pytest.fixture
def every_tool(monkeypatch, tool_registry):
    """The registry with the example plugin installed and the write registered."""
    monkeypatch.syspath_prepend(PLUGIN_SITE)
    from django_webfetch.plugins import registry as plugin_registry

    plugin_registry.reset()
    tool_registry.reset()
    tool_registry.register(PluginStyleWrite)
    tools = tool_registry.all()
    names = {tool.name for tool in tools}
    # The ones the review names, so a registry that lost a source fails here.
    assert {"fetch_external_url", "search_site", "surfaces_write", "example_post"} <= names
    yield tools
    plugin_registry.reset()


@pytest.fixture
def readers(approver, editor):
    approver.email = "approver@example.org"
    approver.save()
    from django.test import Client

    client = Client()
    client.force_login(approver)
    return client


def _waiting(tool: Tool, arguments: dict[str, Any], user: Any) -> ToolCall:
    """A call of ``tool`` waiting for approval, its card made by the tool as the run
    service makes it (a preview the tool cannot build is recorded as unavailable)."""
    preview: dict[str, Any] = {"tool": tool.name, "group": tool.group, "user": user.username}
    try:
        preview.update(
            json.loads(
                json.dumps(
                    tool.approval_preview(ToolInvocation(tool.name, arguments, user)), default=str
                )
            )
        )
    except Exception:
        preview["error"] = "preview_unavailable"
    preview["preflight"] = {"verdict": "allowed", "reason": "", "addresses": ["192.0.2.80"]}
    return ToolCall.objects.create(
        tool=tool.name,
        group=tool.group,
        arguments=arguments,
        user=user,
        state=CallState.AWAITING_APPROVAL,
        requires_approval=True,
        approval_preview=preview,
        expires_at=timezone.now() + timedelta(hours=1),
    )


def _surfaces(client: Any, call: ToolCall) -> dict[str, str]:
    from django_webfetch.cms.notify import notify_waiting

    mail.outbox.clear()
    assert notify_waiting(call) == 1
    pages = {
        "cms card": client.get("/assistant/approvals/"),
        "admin page": client.get(CHANGE.format(call.pk)),
        "admin confirmation": client.get(DECIDE.format(call.pk)),
    }
    out = {}
    for name, response in pages.items():
        assert response.status_code == 200, (name, response.status_code)
        out[name] = response.content.decode()
    out["e-mail"] = mail.outbox[0].body
    return out


def _assert_shown(surfaces: dict[str, str], arguments: dict[str, Any]) -> None:
    for key, value in arguments.items():
        text = json.dumps(value, ensure_ascii=False)
        for name, body in surfaces.items():
            if name == "e-mail":
                # One line per argument: a value cannot forge a line of the mail (a name
                # that is not an ASCII identifier is marked "[unusual name]").
                assert f"  {visible_name(key)} = {text}" in body.splitlines(), (name, key)
            else:
                assert html.escape(text) in body, (name, key, len(text))
                assert html.escape(key) in body, (name, key)
                # Never raw where escaping changes it.  A short text made only of quotes
                # and ordinary characters (``"/"``) is not distinctive: the page has it in
                # its own attributes (``href="/"``); markup characters always count.
                distinctive = any(c in text for c in "<>&") or len(text) > 12
                if html.escape(text) != text and distinctive:
                    assert text not in body, ("unescaped", name, key)
        assert "192.0.2.80" in surfaces["cms card"] and "192.0.2.80" in surfaces["e-mail"]


def _check(tool: Tool, arguments: dict[str, Any], client: Any, requester: Any) -> None:
    """One waiting call of ``tool`` with ``arguments``, seen on every surface."""
    assert len(json.dumps(arguments, ensure_ascii=False).encode()) <= MAX_ARGUMENTS_BYTES
    call = _waiting(tool, arguments, requester)
    try:
        _assert_shown(_surfaces(client, call), arguments)
    finally:
        call.delete()


_ALPHABET = st.sampled_from(list("aZ09 <>&\"'/=\\\n\t;:é中😀") + ["</pre>", "<script>", "&amp;"])
_SHORT = st.lists(_ALPHABET, max_size=60).map("".join)
_LONG = st.tuples(st.lists(_ALPHABET, min_size=1, max_size=6).map("".join), st.integers(1, 15_000))
_VALUES = st.one_of(
    _SHORT,
    _LONG.map(lambda t: (t[0] * 15_000)[: t[1]]),
    st.integers(-(2**53), 2**53),
    st.booleans(),
    st.none(),
    st.lists(_SHORT, max_size=3),
    st.dictionaries(st.sampled_from(["a", "<b>", "c&d"]), _SHORT, max_size=2),
)
_ARGUMENTS = st.dictionaries(
    st.sampled_from(["url", "query", "limit", "record", "<img src=x>", "a&b", "text"]),
    _VALUES,
    min_size=1,
    max_size=3,
).filter(lambda a: len(json.dumps(a, ensure_ascii=False).encode()) <= MAX_ARGUMENTS_BYTES)

_AT_THE_CAP = {"record": "<script>alert(1)</script>" + "W" * (MAX_ARGUMENTS_BYTES - 50)}


@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(index=st.integers(0, 10_000), arguments=_ARGUMENTS)
@example(index=0, arguments=_AT_THE_CAP)
def test_every_surface_shows_every_argument_complete_and_escaped(
    every_tool, readers, editor, index, arguments
):
    _check(every_tool[index % len(every_tool)], arguments, readers, editor)


@pytest.mark.long
def test_each_tool_shows_a_write_and_a_query_at_the_cap(every_tool, readers, editor):
    """Every registered tool once, with values as long as the cap allows."""
    for tool in every_tool:
        arguments = {
            "query": 'customer 4711 <b>Jane</b> & "Doe"\n' + "q" * 7000,
            "record": {"note": "<script>x()</script>", "body": "w" * 7000},
        }
        _check(tool, arguments, readers, editor)


def test_control_and_format_characters_are_shown_escaped(every_tool, readers, editor):
    """A right-to-left override, an escape sequence or a line separator cannot hide or
    reorder part of a value, nor start a new line in the e-mail."""
    arguments = {"text": "pay \u202eevil\u202c \x1b[2J\u2028Approved: yes"}
    call = _waiting(every_tool[0], arguments, editor)
    surfaces = _surfaces(readers, call)
    for name, body in surfaces.items():
        assert "\u202e" not in body and "\x1b" not in body and "\u2028" not in body, name
        assert "\\u202eevil\\u202c \\u001b[2J\\u2028Approved: yes" in body, name
    assert not any(line.startswith("Approved") for line in surfaces["e-mail"].splitlines())


def test_a_plugin_calls_card_names_the_plugin_where_it_may_reach_and_trust(
    every_tool, readers, editor
):
    """README trial 9: the card of a plugin's call showed only the tool and its arguments.
    It names the plugin and instance, the destinations approving lets it reach, and
    whether its code runs in the site's process; what the plugin chose is escaped."""
    from django_webfetch.models import PluginInstance, ToolGroup
    from django_webfetch.plugins import services

    (tool,) = [t for t in every_tool if t.name == "example_fetch"]
    instance = services.install("example", alias="crm")
    # An alias the admin's validation refuses, written past it (a raw database edit).
    PluginInstance.objects.filter(pk=instance.pk).update(alias="crm<b>\u202e")
    ToolGroup.objects.filter(slug=instance.default_group()).update(enabled=True)
    hosts, off = services.effective_now(instance)
    assert hosts and not off
    call = _waiting(tool, {"url": "https://granted.lab.example/"}, editor)

    card = readers.get("/assistant/approvals/").content.decode()
    assert "<code>example</code>, instance <code>crm&lt;b&gt;\\u202e</code>" in card
    assert "crm<b>" not in card and "\u202e" not in card
    assert "May reach" in card
    for host in hosts:
        assert f"<code>{host}</code>" in card
    assert "trusted (runs in the site" not in card
    assert "not trusted (never runs in the site's process)" in card

    PluginInstance.objects.filter(pk=instance.pk).update(alias="crm", egress_hosts=[])
    instance = PluginInstance.objects.get(pk=instance.pk)
    instance.trusted = True
    instance.save()
    assert instance.trust_holds()
    card = readers.get("/assistant/approvals/").content.decode()
    assert "instance <code>crm</code>: <strong" in card
    assert "trusted (runs in the site's process)" in card
    assert "not trusted" not in card
    assert 'May reach</dt><dd class="webfetch-plugin-destinations">no destination' in card

    # A built-in tool's card has no plugin lines.
    call.delete()
    (builtin,) = [t for t in every_tool if t.name == "fetch_external_url"]
    _waiting(builtin, {"url": "https://granted.lab.example/"}, editor)
    card = readers.get("/assistant/approvals/").content.decode()
    assert "May reach" not in card and "webfetch-plugin" not in card
