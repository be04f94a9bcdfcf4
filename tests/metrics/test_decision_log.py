"""The canonical decision log line: one JSON object per egress decision on the
``django_webfetch.egress`` logger, valid against its schema, with the requested host only
(never the path or the query), written from the recorder alone."""

from __future__ import annotations

import json
import logging

import jsonschema
import pytest

from django_webfetch import runs
from django_webfetch.egress.logline import schema
from django_webfetch.models import EgressEvent, HostListEntry, ToolGroup
from django_webfetch.tools import ToolContext, run_tool
from tests.settle import runner_idle, settled_call

pytestmark = pytest.mark.django_db


def lines(caplog) -> list[dict]:
    return [
        json.loads(r.getMessage())
        for r in caplog.records
        if r.name == "django_webfetch.egress" and r.getMessage().startswith("{")
    ]


def test_one_valid_line_per_decision(web, editor, caplog):
    caplog.set_level(logging.INFO, logger="django_webfetch.egress")
    context = ToolContext(approved=True, call_id="log-call")
    url = web.url("docs.lab.example", "/page?token=s3cret&q=x")
    assert run_tool("fetch_external_url", {"url": url}, user=editor, context=context).ok
    run_tool(
        "fetch_external_url",
        {"url": web.url("intranet.lab.example", "/admin?k=v")},
        user=editor,
        context=context,
    )
    found = lines(caplog)
    events = list(EgressEvent.objects.order_by("pk"))
    assert [line["event_id"] for line in found] == [e.pk for e in events]
    validator = jsonschema.Draft202012Validator(
        schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    for line in found:
        validator.validate(line)
    allowed, fetched, denied = found
    assert (allowed["decision"], allowed["outcome"], allowed["rule"]) == (
        "allowed",
        "allowed",
        "scope:external_filtered",
    )
    assert allowed["addresses"] == [web.PUBLIC_V4[0]]
    assert (fetched["decision"], fetched["status"], fetched["outcome"]) == (
        "fetched",
        200,
        "allowed",
    )
    assert fetched["bytes"] > 0 and fetched["duration"] > 0
    assert (denied["outcome"], denied["rule"], denied["reason"]) == (
        "denied",
        "address_class",
        "address_class:private",
    )
    assert denied["addresses"] == [web.PRIVATE[0]]
    for line in found:
        assert (line["host"], line["group"], line["tool"], line["call_id"]) == (
            line["host"],
            "web",
            "fetch_external_url",
            "log-call",
        )
        assert line["host"] in ("docs.lab.example", "intranet.lab.example")
    raw = "\n".join(r.getMessage() for r in caplog.records)
    for secret in ("s3cret", "token=", "/page", "/admin", "k=v"):
        assert secret not in raw


def test_a_call_of_a_run_names_its_run(web, editor, caplog):
    from django_webfetch.models import AssistantRun, Conversation, RunOrigin

    caplog.set_level(logging.INFO, logger="django_webfetch.egress")
    group = ToolGroup.objects.get(slug="web")
    group.skip_approval_with_allowlist = True
    group.save()
    HostListEntry.objects.create(group=group, list="allow", value="docs.lab.example")
    run = AssistantRun.objects.create(
        conversation=Conversation.objects.create(owner=editor), user=editor
    )
    call = runs.request_call(
        "fetch_external_url",
        {"url": web.url("docs.lab.example", "/page")},
        user=editor,
        conversation=f"assistant:{run.pk.hex}:1:0",
        origin=RunOrigin(run.pk, 1, 0),
    )
    # No approval needed (allow-listed): it runs on the background runner, which logs.
    assert settled_call(call).state == "succeeded"
    runner_idle()  # what the task does after its last write (its log lines) is done too
    found = lines(caplog)
    assert found and {line["call_id"] for line in found} == {str(call.pk)}
    assert {line["run_id"] for line in found} == {str(run.pk)}
    # A client's text that looks like a reference names no run (issue 29, finding 3).
    caplog.clear()
    forged = runs.request_call(
        "fetch_external_url",
        {"url": web.url("docs.lab.example", "/page")},
        user=editor,
        conversation=f"assistant:{run.pk.hex}:1:1",
    )
    settled_call(forged)
    runner_idle()
    found = lines(caplog)
    assert found and {line["call_id"] for line in found} == {str(forged.pk)}
    assert {line["run_id"] for line in found} == {""}


def test_nothing_a_server_chose_appears_unquoted(web, editor, caplog):
    """A host is filtered to a small character set before it is stored; the line is JSON,
    so even that is quoted and escaped."""
    from django_webfetch.egress import EgressRecorder

    caplog.set_level(logging.INFO, logger="django_webfetch.egress")
    EgressRecorder(tool="t", group="web", call_id="c").record(
        decision="denied",
        reason="Evil\nReason",
        url_host='evil"\n\x1b[31m.example',
        addresses=["x"],
    )
    [record] = [r for r in caplog.records if r.name == "django_webfetch.egress"]
    message = record.getMessage()
    assert "\n" not in message and "\x1b" not in message
    line = json.loads(message)
    jsonschema.validate(line, schema())
    assert line["host"] == "evil???[31m.example"
    assert line["reason"] == "evil_reason"
    assert line["addresses"] == []
