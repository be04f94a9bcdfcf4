"""Conversations, their messages, and assistant runs (one editor turn each).

A run's ``state`` changes only through ``django_webfetch.assistant.services`` (one
function, under a row lock, with a compare-and-set on ``version``)::

    running ──► waiting_for_approval ──► running ──► completed
       │                 │                  │
       │                 └──► cancelled     ├──► failed
       └──► failed / cancelled / completed  └──► cancelled
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

__all__ = [
    "RUN_FINISHED_STATES",
    "RUN_TRANSITIONS",
    "AssistantRun",
    "Conversation",
    "Message",
    "MessageRole",
    "RunEvent",
    "RunState",
]


class RunState(models.TextChoices):
    RUNNING = "running", _("running")
    WAITING_FOR_APPROVAL = "waiting_for_approval", _("waiting for approval")
    COMPLETED = "completed", _("completed")
    FAILED = "failed", _("failed")
    CANCELLED = "cancelled", _("cancelled")


#: Every allowed transition (``running -> running`` renews the run's lease and data).
RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    RunState.RUNNING: frozenset(
        {
            RunState.RUNNING,
            RunState.WAITING_FOR_APPROVAL,
            RunState.COMPLETED,
            RunState.FAILED,
            RunState.CANCELLED,
        }
    ),
    RunState.WAITING_FOR_APPROVAL: frozenset(
        {RunState.RUNNING, RunState.FAILED, RunState.CANCELLED}
    ),
    RunState.COMPLETED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}

RUN_FINISHED_STATES: frozenset[str] = frozenset(
    s for s, targets in RUN_TRANSITIONS.items() if not targets
)


class Conversation(models.Model):
    """An editor's conversation with the assistant."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="webfetch_conversations",
        verbose_name=_("owner"),
    )
    title = models.CharField(_("title"), max_length=200, blank=True)
    created = models.DateTimeField(_("created"), auto_now_add=True)
    updated = models.DateTimeField(_("updated"), auto_now=True)
    #: When the owner last had the conversation open (the toolbar's "answers" badge counts
    #: runs that finished after a pause and after this).
    seen_at = models.DateTimeField(_("seen at"), null=True, blank=True)
    #: When retention last cleared the conversation's content (messages, title, the runs'
    #: histories and events; ``django_webfetch.retention``): it is cleared again once it
    #: has been used since and is idle past WEBFETCH_CALL_RETENTION_DAYS.
    content_pruned_at = models.DateTimeField(_("content pruned at"), null=True, blank=True)

    class Meta:
        ordering = ["-updated"]
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        indexes = [models.Index(fields=["owner", "updated"], name="webfetch_conv_owner")]

    def __str__(self) -> str:
        return self.title or str(self.pk)


class MessageRole(models.TextChoices):
    USER = "user", _("user")
    ASSISTANT = "assistant", _("assistant")
    TOOL = "tool", _("tool")


class AssistantRun(models.Model):
    """One editor turn: the steps the assistant took to answer one message."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="runs", verbose_name=_("conversation")
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        on_delete=models.SET_NULL,
        related_name="webfetch_assistant_runs",
        verbose_name=_("user"),
    )
    state = models.CharField(
        _("state"), max_length=24, choices=RunState.choices, default=RunState.RUNNING
    )
    #: Bumped by every write: the compare-and-set guard of ``services.transition``.
    version = models.PositiveIntegerField(_("version"), default=0)
    step_count = models.PositiveSmallIntegerField(_("steps"), default=0)
    #: A registered provider kind (``providers.provider_kinds()``) or ``offline``.
    provider = models.CharField(_("provider"), max_length=32, blank=True)
    model_name = models.CharField(_("model"), max_length=200, blank=True)
    #: What the UI shows next to every reply ("Offline rule-based planner (no LLM)"...).
    provider_label = models.CharField(_("provider label"), max_length=200, blank=True)
    #: Stable code of why the run failed or was cancelled; empty otherwise.
    error_code = models.CharField(_("error code"), max_length=64, blank=True)
    #: A message the editor can read (our words, never provider or page text).
    error_message = models.CharField(_("error message"), max_length=500, blank=True)
    #: Operators only (the admin, the log; never the editor, never the model): the
    #: provider's own explanation of the last failed request, redacted and cut.
    provider_error = models.TextField(_("provider's error text"), blank=True)
    #: The model name the provider reported on its last answer (beside ``model_name``).
    reported_model = models.CharField(_("reported model"), max_length=200, blank=True)
    #: The provider cut the last answer at its token limit (``finish_reason: length``).
    incomplete = models.BooleanField(_("answer incomplete"), default=False)

    #: The Pydantic AI message history of the conversation up to this run's end (JSON).
    history = models.JSONField(_("model history"), default=list, blank=True)
    #: How many entries of ``history`` came from the turns before this run.
    base_length = models.PositiveIntegerField(_("history before this run"), default=0)

    #: Attempts of the current step's provider call, or of a lost worker's step.
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    #: A worker advancing the run owns it until then (its process's heartbeat renews it
    #: every few seconds); past it the worker counts as lost.
    lease_expires_at = models.DateTimeField(_("lease expires at"), null=True, blank=True)
    #: Past this the current step made no progress for longer than a step may take: the
    #: worker counts as lost even if its process lives.
    step_deadline = models.DateTimeField(_("step deadline"), null=True, blank=True)
    worker = models.CharField(_("worker"), max_length=200, blank=True)
    #: The number of the last event written (``RunEvent.seq``).
    last_event = models.PositiveIntegerField(_("last event"), default=0)
    #: When the run was last queued (a Celery message); the sweep queues stale ones again.
    queued_at = models.DateTimeField(_("queued at"), null=True, blank=True)

    created = models.DateTimeField(_("created"), auto_now_add=True)
    updated = models.DateTimeField(_("updated"), auto_now=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = _("assistant run")
        verbose_name_plural = _("assistant runs")
        indexes = [
            models.Index(fields=["state", "lease_expires_at"], name="webfetch_run_state_lease"),
            models.Index(fields=["conversation", "created"], name="webfetch_run_conv"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.state})"

    @property
    def finished(self) -> bool:
        return self.state in RUN_FINISHED_STATES

    @property
    def offline(self) -> bool:
        return self.provider == "offline"

    @property
    def call_ref_prefix(self) -> str:
        """The prefix of ``ToolCall.conversation`` of every call this run requested."""
        return f"assistant:{self.pk.hex}:"


class Message(models.Model):
    """One message of a conversation, in order (``seq``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="messages",
        verbose_name=_("conversation"),
    )
    run = models.ForeignKey(
        AssistantRun,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="messages",
        verbose_name=_("run"),
    )
    seq = models.PositiveIntegerField(_("position"))
    #: The run's step that wrote it (0 for the editor's message).
    step = models.PositiveSmallIntegerField(_("step"), default=0)
    role = models.CharField(_("role"), max_length=16, choices=MessageRole.choices)
    content = models.TextField(_("content"), blank=True)
    #: For an assistant message: the tool calls it asked for
    #: (``[{"id": <provider id>, "tool": ..., "arguments": ..., "call": <ToolCall id>}]``).
    tool_calls = models.JSONField(_("tool calls"), default=list, blank=True)
    #: For a tool message: the ``ToolCall`` it answers.
    tool_call = models.ForeignKey(
        "django_webfetch.ToolCall",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("tool call"),
    )
    #: The provider's id of the tool call a tool message answers.
    tool_call_ref = models.CharField(_("tool call reference"), max_length=200, blank=True)
    #: Token usage of the provider request that produced an assistant message.
    usage = models.JSONField(_("token usage"), default=dict, blank=True)
    #: The provider label an assistant message was written with (``offline`` replies say so).
    provider_label = models.CharField(_("provider label"), max_length=200, blank=True)
    #: The model name the provider reported for this answer.
    reported_model = models.CharField(_("reported model"), max_length=200, blank=True)
    #: The provider cut this answer at its token limit (``finish_reason: length``).
    incomplete = models.BooleanField(_("incomplete"), default=False)
    created = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["conversation", "seq"]
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="webfetch_message_seq")
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.seq}"


class RunEvent(models.Model):
    """A step or state change of a run, numbered per run (``seq`` 1, 2, ...)."""

    run = models.ForeignKey(
        AssistantRun, on_delete=models.CASCADE, related_name="events", verbose_name=_("run")
    )
    seq = models.PositiveIntegerField(_("sequence number"))
    kind = models.CharField(_("kind"), max_length=32)
    data = models.JSONField(_("data"), default=dict, blank=True)
    created = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        verbose_name = _("run event")
        verbose_name_plural = _("run events")
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="webfetch_runevent_seq")]

    def __str__(self) -> str:
        return f"{self.kind} #{self.seq}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "data": self.data,
            "created": self.created.isoformat(),
        }
