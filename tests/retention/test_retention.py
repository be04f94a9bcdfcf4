"""Issue 29 finding 6: one retention policy over every stored copy of page text, URLs and
arguments (``django_webfetch.retention``).

The walk enumerates every model of the app and every text or JSON field on it: each is
either dropped by a rule of the policy or listed as holding no content, with a reason.  For
each dropped field an old row carries a marker, a fresh row another; after the policy ran
(the prune command and the periodic sweep, through the same door) the old marker is gone
from a dump of the whole database and the fresh one is still there.
"""

from __future__ import annotations

import io
import secrets
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import models
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_webfetch import retention, runs
from django_webfetch.assistant.recover import sweep_all
from django_webfetch.exceptions import WebFetchConfigurationError
from django_webfetch.models import (
    AssistantRun,
    CallState,
    Conversation,
    EgressEvent,
    Message,
    RunEvent,
    RunState,
    StoredText,
    TokenEvent,
    ToolCall,
)
from django_webfetch.runs.dispatch import SWEEP, run_here

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def _app_models() -> list[Any]:
    """Every concrete model of django_webfetch and of its sub-apps."""
    found = []
    for config in apps.get_app_configs():
        if config.name == "django_webfetch" or config.name.startswith("django_webfetch."):
            found.extend(m for m in config.get_models() if not m._meta.proxy and m._meta.managed)
    return found


def _text_fields(model: Any) -> list[Any]:
    return [
        f
        for f in model._meta.concrete_fields
        if isinstance(f, (models.CharField, models.TextField, models.JSONField))
    ]


def _unclassified(model_list: list[Any]) -> list[str]:
    known = set(retention.content_fields()) | set(retention.NO_CONTENT)
    return [
        f"{model._meta.label}.{f.name}"
        for model in model_list
        for f in _text_fields(model)
        if f"{model._meta.label}.{f.name}" not in known
    ]


def test_every_text_or_json_field_is_pruned_or_holds_no_content():
    model_list = _app_models()
    assert {m._meta.label for m in model_list} >= {
        "django_webfetch.ToolCall",
        "django_webfetch.StoredText",
        "django_webfetch.EgressEvent",
        "django_webfetch.Message",
    }
    assert _unclassified(model_list) == []
    # Nothing listed that no model has (a renamed field must be classified again).
    existing = {f"{m._meta.label}.{f.name}" for m in model_list for f in _text_fields(m)}
    assert set(retention.content_fields()) <= existing
    assert set(retention.NO_CONTENT) <= existing
    assert not set(retention.content_fields()) & set(retention.NO_CONTENT)
    assert all(reason.strip() for reason in retention.NO_CONTENT.values())


def test_a_new_unclassified_field_fails_the_walk():
    from django.test.utils import isolate_apps

    with isolate_apps("django_webfetch"):

        class Scratch(models.Model):
            notes = models.TextField()
            kept = models.JSONField(default=dict)
            count = models.IntegerField(default=0)

            class Meta:
                app_label = "django_webfetch"

        assert _unclassified([Scratch]) == [
            "django_webfetch.Scratch.notes",
            "django_webfetch.Scratch.kept",
        ]


# -- rows, old (due under their rule) and fresh -------------------------------------------


def _call(user: Any, *, old: bool, **fields: Any) -> ToolCall:
    finished = timezone.now() - (31 * DAY if old else DAY)
    return ToolCall.objects.create(
        tool="fetch_external_url",
        group="web",
        user=user,
        state=CallState.SUCCEEDED,
        finished_at=finished,
        arguments={"url": "https://docs.example/?q=1"},
        result={"content": "page text", "error": None, "meta": {}},
        **fields,
    )


def _stored_text(user: Any, *, old: bool) -> StoredText:
    now = timezone.now()
    return StoredText.objects.create(
        call=_call(user, old=False),
        tool="fetch_external_url",
        conversation="caller:x",
        user=user,
        url="https://docs.example/a",
        text="page text",
        expires_at=now - timedelta(seconds=1) if old else now + timedelta(hours=1),
    )


def _egress_event(user: Any, *, old: bool) -> EgressEvent:
    return EgressEvent.objects.create(
        decision="fetched",
        user=user,
        url_host="docs.example",
        created=timezone.now() - (91 * DAY if old else DAY),
    )


def _token_event(user: Any, *, old: bool) -> TokenEvent:
    row = TokenEvent.objects.create(
        action=TokenEvent.Action.CLIENT_REFUSED,
        user=user,
        client_id="https://clients.example/client.json",
        reason="address_class:private",
        by="server",
    )
    when = timezone.now() - (91 * DAY if old else DAY)
    TokenEvent.objects.filter(pk=row.pk).update(created=when)  # auto_now_add
    return row


def _conversation(user: Any, *, old: bool) -> dict[str, Any]:
    conversation = Conversation.objects.create(owner=user, title="Read docs.example")
    run = AssistantRun.objects.create(
        conversation=conversation,
        user=user,
        state=RunState.COMPLETED,
        history=[{"parts": [{"content": "page text"}]}],
    )
    message = Message.objects.create(
        conversation=conversation, run=run, seq=1, role="user", content="read the page"
    )
    event = RunEvent.objects.create(run=run, seq=1, kind="text", data={"text": "page text"})
    when = timezone.now() - (31 * DAY if old else DAY)
    Conversation.objects.filter(pk=conversation.pk).update(updated=when)
    AssistantRun.objects.filter(pk=run.pk).update(updated=when, finished_at=when)
    return {
        "django_webfetch.Conversation": conversation,
        "django_webfetch.AssistantRun": run,
        "django_webfetch.Message": message,
        "django_webfetch.RunEvent": event,
    }


def _row(label: str, user: Any, *, old: bool) -> Any:
    if label == "django_webfetch.ToolCall":
        return _call(user, old=old, conversation="notes")
    if label == "django_webfetch.StoredText":
        return _stored_text(user, old=old)
    if label == "django_webfetch.EgressEvent":
        return _egress_event(user, old=old)
    if label == "django_webfetch.TokenEvent":
        return _token_event(user, old=old)
    return _conversation(user, old=old)[label]


def _marked(row: Any, name: str, marker: str) -> None:
    field = row._meta.get_field(name)
    if isinstance(field, models.JSONField):
        value: Any = {
            "content": marker,
            "error": marker,
            "meta": {"url": f"https://docs.example/?q={marker}"},
            "list": [marker],
        }
    else:
        value = marker
    type(row).objects.filter(pk=row.pk).update(**{name: value})


def _dump() -> str:
    """Every row of every table of the database, as text."""
    from django.db import connection

    parts = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            parts.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(parts)


def _marker() -> str:
    """Ten characters (the narrowest field's width), shaped like content, not like a stable
    code (upper case and a hyphen): a call keeps a code-shaped reason and error."""
    return f"MK-{secrets.token_hex(4)[:7]}"


@pytest.mark.parametrize("field_label", sorted(retention.content_fields()))
@pytest.mark.parametrize("door", ["command", "sweep"])
def test_a_retention_walk_over_every_content_holding_field(field_label, door, editor):
    label, name = field_label.rsplit(".", 1)
    old, fresh = _marker(), _marker()
    _marked(_row(label, editor, old=True), name, old)
    _marked(_row(label, editor, old=False), name, fresh)
    dump = _dump()
    assert old in dump and fresh in dump
    if door == "command":
        call_command("webfetch", "prune_events", stdout=io.StringIO())
    else:
        run_here(SWEEP)  # what the background runner and Celery beat run
    dump = _dump()
    assert old not in dump, f"{field_label} outlived the retention policy"
    assert fresh in dump, f"{field_label} was dropped before its time"


# -- the rules ------------------------------------------------------------------------------


def test_expired_stored_texts_are_deleted_by_the_sweep(editor, settings):
    expired = _stored_text(editor, old=True)
    live = _stored_text(editor, old=False)
    report = sweep_all()
    assert report["pruned"] >= 1
    assert not StoredText.objects.filter(pk=expired.pk).exists()
    assert StoredText.objects.filter(pk=live.pk).exists()
    # A text whose call lost its content goes with it, whatever its own time.
    call = _call(editor, old=True)
    kept = StoredText.objects.create(
        call=call,
        tool="t",
        conversation="c",
        url="u",
        text="page text",
        expires_at=timezone.now() + timedelta(days=365),
    )
    settings.WEBFETCH_STORED_TEXT_TTL = 10**9
    sweep_all()
    assert not StoredText.objects.filter(pk=kept.pk).exists()


def test_a_pruned_call_keeps_its_audit_metadata_and_a_code_shaped_error_only(editor):
    coded = _call(editor, old=True)
    ToolCall.objects.filter(pk=coded.pk).update(
        result={"content": "x", "error": "http_status", "meta": {"status": 404}}
    )
    free = _call(editor, old=True)
    ToolCall.objects.filter(pk=free.pk).update(
        result={"content": "x", "error": "see https://docs.example/?q=secret", "meta": {}}
    )
    assert retention.prune_calls() == 2
    coded.refresh_from_db()
    free.refresh_from_db()
    assert coded.result == {"content": "", "error": "http_status", "meta": {}}
    assert free.result == {"content": "", "error": None, "meta": {}}
    assert (coded.tool, coded.user, coded.state) == ("fetch_external_url", editor, "succeeded")
    assert coded.content_pruned_at is not None and coded.arguments == {}


def test_an_idle_conversation_loses_its_content_and_keeps_its_rows(editor):
    rows = _conversation(editor, old=True)
    conversation, run = rows["django_webfetch.Conversation"], rows["django_webfetch.AssistantRun"]
    AssistantRun.objects.filter(pk=run.pk).update(
        provider="openai", error_code="provider_rejected", provider_error="echo: secret"
    )
    assert retention.prune(rules=("conversations",))["conversations"] == 1
    conversation.refresh_from_db()
    run.refresh_from_db()
    message = Message.objects.get(conversation=conversation)
    assert conversation.title == "" and conversation.content_pruned_at is not None
    assert run.history == [] and run.provider_error == ""
    assert (run.provider, run.error_code, run.state) == ("openai", "provider_rejected", "completed")
    assert message.content == "" and message.tool_calls == [] and message.role == "user"
    assert RunEvent.objects.get(run=run).data == {}
    # Idempotent; and used again, then idle again, it is cleared again.
    assert retention.prune(rules=("conversations",))["conversations"] == 0
    Message.objects.create(conversation=conversation, seq=2, role="user", content="again")
    Conversation.objects.filter(pk=conversation.pk).update(updated=timezone.now())
    assert retention.prune(rules=("conversations",))["conversations"] == 0
    later = timezone.now() + 31 * DAY
    assert retention.prune(later, rules=("conversations",))["conversations"] == 1
    assert not Message.objects.filter(conversation=conversation).exclude(content="").exists()


def test_a_conversation_with_a_run_in_flight_or_a_recent_run_is_kept(editor):
    for state, updated in [
        (RunState.WAITING_FOR_APPROVAL, timezone.now() - 40 * DAY),
        (RunState.COMPLETED, timezone.now() - DAY),
    ]:
        rows = _conversation(editor, old=True)
        AssistantRun.objects.filter(pk=rows["django_webfetch.AssistantRun"].pk).update(
            state=state, updated=updated
        )
    assert retention.prune(rules=("conversations",))["conversations"] == 0
    assert Message.objects.filter(content="read the page").count() == 2


def test_the_prune_command_reports_every_rule_and_refuses_negative_ages(editor, settings):
    _stored_text(editor, old=True)
    _conversation(editor, old=True)
    _egress_event(editor, old=True)
    _call(editor, old=True)
    out = io.StringIO()
    call_command("webfetch", "prune_events", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "1 egress event(s) older than 90 day(s)." in text
    assert "1 tool call(s) finished more than 30 day(s) ago." in text
    assert "1 stored page text(s) past their time." in text
    assert "1 conversation(s) idle for more than 30 day(s)." in text
    out = io.StringIO()
    call_command("webfetch", "prune_events", stdout=out)
    text = out.getvalue()
    assert "Deleted 1 egress event(s)" in text and "Deleted 1 stored page text(s)" in text
    assert "Dropped the content of 1 conversation(s)" in text
    for option in ("--days", "--call-days"):
        with pytest.raises(CommandError):
            call_command("webfetch", "prune_events", option, "-1")
    with pytest.raises(retention.RetentionError, match="whole number of days"):
        retention.prune(content_days=-1)
    settings.WEBFETCH_CALL_RETENTION_DAYS = -3
    with pytest.raises(WebFetchConfigurationError):
        call_command("webfetch", "prune_events")
    with pytest.raises(WebFetchConfigurationError):
        runs.sweep()


# -- the sweep's work is bounded, and the batches reach the same end ------------------------


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    call_ages=st.lists(st.integers(min_value=0, max_value=60), max_size=12),
    event_ages=st.lists(st.integers(min_value=0, max_value=120), max_size=12),
    text_ttls=st.lists(st.integers(min_value=-5, max_value=5), max_size=8),
    batch=st.integers(min_value=1, max_value=5),
)
def test_property_batches_are_bounded_and_prune_exactly_what_is_due(
    editor, call_ages, event_ages, text_ttls, batch
):
    ToolCall.objects.all().delete()
    EgressEvent.objects.all().delete()
    TokenEvent.objects.all().delete()
    now = timezone.now()
    calls = []
    for age in call_ages:
        calls.append(_call(editor, old=False))
        ToolCall.objects.filter(pk=calls[-1].pk).update(
            finished_at=now - timedelta(days=age, hours=1)
        )
    for age in event_ages:
        EgressEvent.objects.create(decision="denied", created=now - timedelta(days=age, hours=1))
        row = TokenEvent.objects.create(action=TokenEvent.Action.DECLINED)
        TokenEvent.objects.filter(pk=row.pk).update(created=now - timedelta(days=age, hours=1))
    anchor = _call(editor, old=False)
    for hours in text_ttls:
        StoredText.objects.create(
            call=anchor,
            tool="t",
            conversation="c",
            url="u",
            text="x",
            expires_at=now + timedelta(hours=hours, minutes=30),
        )
    due = {
        "calls": sum(age >= 30 for age in call_ages),
        "egress_events": sum(age >= 90 for age in event_ages),
        "token_events": sum(age >= 90 for age in event_ages),
        "stored_texts": sum(hours < 0 for hours in text_ttls),
    }
    assert retention.prune(now, dry_run=True).counts | {"conversations": 0} == due | {
        "conversations": 0
    }
    done = dict.fromkeys(due, 0)
    rounds = 0
    while True:
        report = retention.prune(now, limit=batch)
        # Each rule does at most ``batch`` rows' work per sweep.
        assert all(count <= batch for count in report.counts.values())
        if not report.total:
            break
        for name in due:
            done[name] += report[name]
        rounds += 1
    assert done == due
    assert rounds == max(-(-count // batch) for count in [*due.values(), 0])
    assert ToolCall.objects.filter(content_pruned_at__isnull=True).count() == (
        len(call_ages) - due["calls"] + 1
    )
    assert EgressEvent.objects.count() == len(event_ages) - due["egress_events"]
    assert TokenEvent.objects.count() == len(event_ages) - due["token_events"]
    assert StoredText.objects.count() == len(text_ttls) - due["stored_texts"]
