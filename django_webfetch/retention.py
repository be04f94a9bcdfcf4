"""What is kept and for how long: one retention policy over every stored copy of page text,
URLs and arguments (DESIGN.md §10; issue 29 finding 6).

``RULES`` names every field of the app's models that can hold page text, a URL or a tool's
arguments, with the rule that drops it; ``NO_CONTENT`` names every other text or JSON field
and why it holds none.  A test walks every model and fails on a field in neither, and proves
for each field of ``RULES`` that an old marker is gone from the whole database after
:func:`prune` (``tests/retention/test_retention.py``).

:func:`prune` is the one door: the periodic sweep (``runs.sweep``, which the background
runner and Celery beat run) calls it in bounded batches, ``manage.py webfetch prune_events``
calls it to the end.  The rules::

    calls          ToolCall content cleared            N days after the call finished
    stored_texts   StoredText deleted                  when it expires, or its call's content goes
    conversations  Conversation, Message, AssistantRun, N days after the conversation's last
                   RunEvent content cleared             activity (no run in flight)
    egress_events  EgressEvent deleted                 M days after it was written
    token_events   TokenEvent deleted                  M days after it was written

N is ``WEBFETCH_CALL_RETENTION_DAYS`` (30), M ``WEBFETCH_EVENT_RETENTION_DAYS`` (90).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from django_webfetch.conf import conf
from django_webfetch.models import (
    AssistantRun,
    Conversation,
    EgressEvent,
    Message,
    RunEvent,
    RunState,
    StoredText,
    TokenEvent,
    ToolCall,
)
from django_webfetch.models.calls import FINISHED_STATES
from django_webfetch.text.patterns import compile_pattern

__all__ = [
    "NO_CONTENT",
    "RULES",
    "SWEEP_BATCH",
    "RetentionError",
    "RetentionReport",
    "Rule",
    "content_fields",
    "prune",
    "prune_calls",
]

#: Rows (conversations for their rule) one rule handles per sweep: the sweep's work is
#: bounded whatever piled up; the command goes on to the end.
SWEEP_BATCH = 500

#: A call's ``reason`` and its result's ``error`` stay after pruning only in the shape of a
#: stable code (``http_status``, ``budget_exceeded:cost_per_day``): lower-case words joined
#: by ``_`` and ``:``, at most 64 characters.  A tool (a plugin) may put any text there; in
#: this shape it cannot hold a URL, a host name or a sentence of a page.
#: A code-shaped reason or error (at most ``_CODE_CHARS``), on RE2: linear in its input.
_CODE_RE = compile_pattern(r"\A[a-z][a-z0-9_]*(?::[a-z0-9_]+)*\z")
_CODE_CHARS = 64

_OPEN_RUN_STATES = (RunState.RUNNING, RunState.WAITING_FOR_APPROVAL)


class RetentionError(ValueError):
    """A retention age that is not a whole number of days >= 0."""

    code = "invalid_retention"


@dataclass(frozen=True)
class _Ages:
    now: datetime
    content: datetime
    events: datetime


@dataclass(frozen=True)
class Rule:
    """One age rule over the fields it drops (``app_label.Model.field``)."""

    name: str
    #: What happens and when, for people (the docs and the command say the same).
    summary: str
    fields: tuple[str, ...]
    apply: Callable[[_Ages, int | None, bool], int] = field(repr=False, compare=False)


@dataclass(frozen=True)
class RetentionReport:
    """Rows each rule deleted or cleared (or would, in a dry run)."""

    counts: dict[str, int]
    content_days: int
    event_days: int

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __getitem__(self, name: str) -> int:
        return self.counts[name]


def _pks(queryset: Any, limit: int | None) -> list[Any]:
    pks = queryset.order_by().values_list("pk", flat=True)
    return list(pks if limit is None else pks[:limit])


def _count(queryset: Any, limit: int | None) -> int:
    return len(_pks(queryset, limit)) if limit is not None else int(queryset.count())


def _code(value: Any) -> str | None:
    if not isinstance(value, str) or not 0 < len(value) <= _CODE_CHARS:
        return None
    return value if _CODE_RE.match(value) else None


def _due_calls(ages: _Ages) -> Any:
    """Calls finished before the cutoff with their content (``finished_at`` is written by
    the transition into a final state only, and a final state has no way out): the partial
    index ``webfetch_call_unpruned`` answers it without reading pruned calls."""
    return ToolCall.objects.filter(finished_at__lt=ages.content, content_pruned_at__isnull=True)


def _prune_calls(ages: _Ages, limit: int | None, dry_run: bool) -> int:
    """Third-party page text, query strings, the approval card and the caller's free text
    go; the row stays as audit metadata: tool, group, user, state, who decided and when,
    the timestamps, and the reason and the result's error when they are code-shaped."""
    due = _due_calls(ages)
    if dry_run:
        return _count(due.filter(state__in=FINISHED_STATES), limit)
    pruned = 0
    while True:
        rows = list(due.order_by().values_list("pk", "state", "result", "reason")[: limit or 500])
        # One statement per (reason, error) pair kept, in one transaction: a batch costs a
        # few statements, not one per call.
        groups: dict[tuple[str, str | None], list[Any]] = {}
        for pk, state, result, reason in rows:
            if state not in FINISHED_STATES:  # pragma: no cover - the state machine's rule
                continue
            error = result.get("error") if isinstance(result, dict) else None
            groups.setdefault((_code(reason) or "", _code(error)), []).append(pk)
        done = 0
        with transaction.atomic():
            for (reason, error), pks in groups.items():
                done += ToolCall.objects.filter(
                    pk__in=pks, state__in=FINISHED_STATES, content_pruned_at__isnull=True
                ).update(
                    arguments={},
                    approval_preview={},
                    decision_comment="",
                    conversation="",
                    reason=reason,
                    result={"content": "", "error": error, "meta": {}},
                    content_pruned_at=ages.now,
                )
        pruned += done
        if limit is not None or not done:
            return pruned


def _prune_stored_texts(ages: _Ages, limit: int | None, dry_run: bool) -> int:
    due = StoredText.objects.filter(
        Q(expires_at__lte=ages.now)
        | Q(created__lt=ages.content)
        | Q(call__content_pruned_at__isnull=False)
    )
    if dry_run:
        return _count(due, limit)
    deleted = 0
    while True:
        pks = _pks(due, limit if limit is not None else 1000)
        if not pks:
            return deleted
        deleted += StoredText.objects.filter(pk__in=pks).delete()[0]
        if limit is not None:
            return deleted


def _idle_conversations(ages: _Ages) -> Any:
    """Conversations with no activity since the cutoff and content written since they
    were last pruned (or never pruned): a cheap question over the conversation rows."""
    return Conversation.objects.filter(updated__lt=ages.content).filter(
        Q(content_pruned_at__isnull=True) | Q(content_pruned_at__lt=F("updated"))
    )


def _without_runs_in_use(conversations: Any, ages: _Ages) -> Any:
    """Those of ``conversations`` with no run in flight and none active since the cutoff."""
    return conversations.exclude(runs__updated__gte=ages.content).exclude(
        runs__state__in=_OPEN_RUN_STATES
    )


def _prune_conversations(ages: _Ages, limit: int | None, dry_run: bool) -> int:
    """The editor's messages, the model's answers and the tool calls they carry, the
    model history (tool results: page text), the provider's error text, the events of the
    stream (text deltas, call arguments) and the title (the first message) go; the rows
    stay: who, when, which provider and model, state, error codes, token usage."""
    due = _idle_conversations(ages)
    if dry_run:
        return _count(_without_runs_in_use(due, ages), limit)
    pruned = 0
    while True:
        # The runs are asked about a batch of candidates only (a conversation with a run
        # in flight for the whole retention time waits for it, and so does its batch).
        pks = _pks(due, limit or 200)
        if not pks:
            return pruned
        with transaction.atomic():
            # Locked and checked again: a message posted meanwhile keeps its conversation
            # (posting locks the conversation's row too).
            ids = list(
                _without_runs_in_use(_idle_conversations(ages).filter(pk__in=pks), ages)
                .select_for_update()
                .values_list("pk", flat=True)
            )
            Message.objects.filter(conversation_id__in=ids).update(content="", tool_calls=[])
            AssistantRun.objects.filter(conversation_id__in=ids).update(
                history=[], provider_error=""
            )
            RunEvent.objects.filter(run__conversation_id__in=ids).update(data={})
            pruned += Conversation.objects.filter(pk__in=ids).update(
                title="", content_pruned_at=ages.now
            )
        if limit is not None or not ids:
            return pruned


def _delete_old(model: Any, ages: _Ages, limit: int | None, dry_run: bool) -> int:
    """Delete the rows of ``model`` written before the events' age, in batches."""
    due = model.objects.filter(created__lt=ages.events)
    if dry_run:
        return _count(due, limit)
    deleted = 0
    while True:
        pks = _pks(due, limit if limit is not None else 1000)
        if not pks:
            return deleted
        deleted += int(model.objects.filter(pk__in=pks).delete()[0])
        if limit is not None:
            return deleted


def _prune_egress_events(ages: _Ages, limit: int | None, dry_run: bool) -> int:
    return _delete_old(EgressEvent, ages, limit, dry_run)


def _prune_token_events(ages: _Ages, limit: int | None, dry_run: bool) -> int:
    return _delete_old(TokenEvent, ages, limit, dry_run)


def _fields(model: Any, *names: str) -> tuple[str, ...]:
    return tuple(f"{model._meta.label}.{name}" for name in names)


#: Every content-holding field, by the rule that drops it (in the order ``prune`` applies
#: them: a call's content goes before the texts kept for it).
RULES: tuple[Rule, ...] = (
    Rule(
        "calls",
        "A tool call's arguments, approval card, decision comment, result text and the "
        "caller's free-text conversation are cleared WEBFETCH_CALL_RETENTION_DAYS after it "
        "finished, and its reason and error code unless they are code-shaped; the row stays "
        "as audit metadata.",
        _fields(
            ToolCall,
            "arguments",
            "approval_preview",
            "decision_comment",
            "result",
            "conversation",
            "reason",
        ),
        _prune_calls,
    ),
    Rule(
        "stored_texts",
        "A page's whole text kept for reading it in parts is deleted when it expires "
        "(WEBFETCH_STORED_TEXT_TTL), when its call's content is cleared, and at the latest "
        "WEBFETCH_CALL_RETENTION_DAYS after it was written.",
        _fields(
            StoredText,
            "tool",
            "conversation",
            "url",
            "final_url",
            "mode",
            "status_line",
            "text",
            "links",
        ),
        _prune_stored_texts,
    ),
    Rule(
        "conversations",
        "An assistant conversation's messages, title, model history, provider error text "
        "and run events are cleared WEBFETCH_CALL_RETENTION_DAYS after its last activity "
        "(no run in flight); the rows stay as audit metadata.",
        _fields(Conversation, "title")
        + _fields(Message, "content", "tool_calls")
        + _fields(AssistantRun, "history", "provider_error")
        + _fields(RunEvent, "data"),
        _prune_conversations,
    ),
    Rule(
        "egress_events",
        "Egress events (hosts, addresses, details of the guard's decisions) are deleted "
        "WEBFETCH_EVENT_RETENTION_DAYS after they were written.",
        _fields(
            EgressEvent,
            "tool",
            "group_slug",
            "plugin_ref",
            "call_id",
            "url_host",
            "decision",
            "reason",
            "addresses",
            "detail",
            "failure",
        ),
        _prune_egress_events,
    ),
    Rule(
        "token_events",
        "Token events (the audit of tokens and OAuth grants, with the client's URL) are "
        "deleted WEBFETCH_EVENT_RETENTION_DAYS after they were written.",
        _fields(TokenEvent, "client_id", "reason", "by"),
        _prune_token_events,
    ),
)

_CONFIG = "operator configuration, kept while it is configured"
#: Every other text or JSON field of the app's models, and why it holds no page text, URL
#: or arguments of a call.
NO_CONTENT: dict[str, str] = {
    "django_webfetch.ToolCall.tool": "a registered tool's name",
    "django_webfetch.ToolCall.group": "a tool group's slug",
    "django_webfetch.ToolCall.state": "a state of the call's state machine",
    "django_webfetch.ToolCall.worker": "the worker's host name and process id",
    "django_webfetch.AssistantRun.state": "a state of the run's state machine",
    "django_webfetch.AssistantRun.provider": "a registered provider kind",
    "django_webfetch.AssistantRun.model_name": "the configured model's name",
    "django_webfetch.AssistantRun.provider_label": "our label of the provider",
    "django_webfetch.AssistantRun.error_code": "a stable reason code",
    "django_webfetch.AssistantRun.error_message": "our words, never provider or page text",
    "django_webfetch.AssistantRun.reported_model": "the model name the provider reported",
    "django_webfetch.AssistantRun.worker": "the worker's host name and process id",
    "django_webfetch.Message.role": "user, assistant or tool",
    "django_webfetch.Message.tool_call_ref": "the provider's id of a tool call",
    "django_webfetch.Message.usage": "token counts",
    "django_webfetch.Message.provider_label": "our label of the provider",
    "django_webfetch.Message.reported_model": "the model name the provider reported",
    "django_webfetch.RunEvent.kind": "an event kind of ours",
    "django_webfetch.ToolGroup.slug": _CONFIG,
    "django_webfetch.ToolGroup.name": _CONFIG,
    "django_webfetch.ToolGroup.description": _CONFIG,
    "django_webfetch.ToolGroup.scope": _CONFIG,
    "django_webfetch.ToolGroup.data_class": _CONFIG,
    "django_webfetch.SiteHost.host": _CONFIG,
    "django_webfetch.SiteHost.scheme": _CONFIG,
    "django_webfetch.SiteHost.note": _CONFIG,
    "django_webfetch.HostListEntry.list": _CONFIG,
    "django_webfetch.HostListEntry.value": _CONFIG,
    "django_webfetch.HostListEntry.note": _CONFIG,
    "django_webfetch.ConfiguredEndpoint.name": _CONFIG,
    "django_webfetch.ConfiguredEndpoint.base_url": _CONFIG,
    "django_webfetch.ConfiguredEndpoint.auth_header_name": _CONFIG,
    "django_webfetch.ConfiguredEndpoint.auth_header_value": _CONFIG + " (write-only)",
    "django_webfetch.ConfiguredEndpoint.provider_kind": _CONFIG,
    "django_webfetch.ConfiguredEndpoint.model_name": _CONFIG,
    "django_webfetch.PluginInstance.plugin": _CONFIG,
    "django_webfetch.PluginInstance.alias": _CONFIG,
    "django_webfetch.PluginInstance.version": _CONFIG,
    "django_webfetch.PluginInstance.declared_egress": _CONFIG,
    "django_webfetch.PluginInstance.config": _CONFIG,
    "django_webfetch.PluginInstance.secret_config": _CONFIG + " (write-only)",
    "django_webfetch.PluginInstance.egress_hosts": _CONFIG,
    "django_webfetch.PluginInstance.egress_allow_private": _CONFIG,
    "django_webfetch.PluginInstance.note": _CONFIG,
    "django_webfetch.PluginInstance.trusted_distribution": _CONFIG,
    "django_webfetch.PluginInstance.trusted_version": _CONFIG,
    "django_webfetch.PluginInstance.trusted_record": _CONFIG,
    "django_webfetch.PluginInstance.trusted_dependencies": _CONFIG,
    "django_webfetch.AccessToken.name": "the token owner's label for it",
    "django_webfetch.AccessToken.token_hash": "a hash of the secret",
    "django_webfetch.AccessToken.hint": "the first characters of the secret",
    "django_webfetch.AccessToken.kind": "personal or oauth",
    "django_webfetch.TokenEvent.action": "issued, refreshed, revoked, declined or refused",
    "django_webfetch.AccessToken.client_id": (
        "the OAuth client's identifier (its metadata document's URL), which the user approved"
    ),
}


def content_fields() -> dict[str, str]:
    """``app_label.Model.field`` of every content-holding field, with its rule's name."""
    return {name: rule.name for rule in RULES for name in rule.fields}


def _days(value: Any, setting: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RetentionError(f"{setting} must be a whole number of days >= 0")
    return value


def _ages(now: datetime | None, content_days: int | None, event_days: int | None) -> _Ages:
    now = now or timezone.now()
    content = _days(
        conf.WEBFETCH_CALL_RETENTION_DAYS if content_days is None else content_days,
        "WEBFETCH_CALL_RETENTION_DAYS",
    )
    events = _days(
        conf.WEBFETCH_EVENT_RETENTION_DAYS if event_days is None else event_days,
        "WEBFETCH_EVENT_RETENTION_DAYS",
    )
    return _Ages(now, now - timedelta(days=content), now - timedelta(days=events))


def prune(
    now: datetime | None = None,
    *,
    content_days: int | None = None,
    event_days: int | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    rules: tuple[str, ...] | None = None,
) -> RetentionReport:
    """Apply every rule (or those named in ``rules``); return what each did.

    ``content_days`` defaults to ``WEBFETCH_CALL_RETENTION_DAYS``, ``event_days`` to
    ``WEBFETCH_EVENT_RETENTION_DAYS``; ``limit`` bounds the rows (conversations) each rule
    handles (the sweep's ``SWEEP_BATCH``), None goes on to the end.  A negative age raises
    :class:`RetentionError` (``invalid_retention``)."""
    ages = _ages(now, content_days, event_days)
    counts = {
        rule.name: rule.apply(ages, limit, dry_run)
        for rule in RULES
        if rules is None or rule.name in rules
    }
    return RetentionReport(
        counts,
        (ages.now - ages.content).days,
        (ages.now - ages.events).days,
    )


def prune_calls(
    now: datetime | None = None,
    *,
    days: int | None = None,
    dry_run: bool = False,
    limit: int | None = None,
) -> int:
    """The ``calls`` rule alone (``runs.prune_calls``); return how many calls."""
    return prune(now, content_days=days, dry_run=dry_run, limit=limit, rules=("calls",))["calls"]
