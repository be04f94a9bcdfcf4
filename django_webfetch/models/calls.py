"""Tool calls as durable records (DESIGN.md §7).

A ``ToolCall`` row is written when the assistant asks for a tool and is never deleted by
the state machine: a refused, failed, denied or expired call stays on record.  Its state
changes only through ``django_webfetch.runs`` (one function, under a row lock)::

    pending ──► awaiting_approval ──► approved ──► running ──► succeeded
       │              │  │  │            │  ▲         │
       │              │  │  └► expired   │  └─retry──┤ (worker lost, once)
       │              │  └───► denied    │           └──► failed
       │              └──────► cancelled ◄┘
       ├──► approved (no approval needed)
       ├──► failed (invalid arguments)
       └──► cancelled
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from django_webfetch.values import ToolResult

__all__ = ["FINISHED_STATES", "TRANSITIONS", "CallState", "RunOrigin", "ToolCall"]


class CallState(models.TextChoices):
    PENDING = "pending", _("pending")
    AWAITING_APPROVAL = "awaiting_approval", _("awaiting approval")
    APPROVED = "approved", _("approved (queued)")
    RUNNING = "running", _("running")
    SUCCEEDED = "succeeded", _("succeeded")
    FAILED = "failed", _("failed")
    DENIED = "denied", _("denied")
    EXPIRED = "expired", _("expired")
    CANCELLED = "cancelled", _("cancelled")


#: Every allowed transition.  ``runs.transition`` is the only writer of ``state``.
TRANSITIONS: dict[str, frozenset[str]] = {
    CallState.PENDING: frozenset(
        {CallState.AWAITING_APPROVAL, CallState.APPROVED, CallState.FAILED, CallState.CANCELLED}
    ),
    CallState.AWAITING_APPROVAL: frozenset(
        {CallState.APPROVED, CallState.DENIED, CallState.EXPIRED, CallState.CANCELLED}
    ),
    CallState.APPROVED: frozenset({CallState.RUNNING, CallState.CANCELLED}),
    # running -> approved: the worker was lost and the call is retried (once).
    CallState.RUNNING: frozenset({CallState.SUCCEEDED, CallState.FAILED, CallState.APPROVED}),
    CallState.SUCCEEDED: frozenset(),
    CallState.FAILED: frozenset(),
    CallState.DENIED: frozenset(),
    CallState.EXPIRED: frozenset(),
    CallState.CANCELLED: frozenset(),
}

FINISHED_STATES: frozenset[str] = frozenset(s for s, targets in TRANSITIONS.items() if not targets)


@dataclass(frozen=True)
class RunOrigin:
    """Which assistant run asked for a call, at which step, as its which call: written on
    the call by the run itself (``runs.request_call(origin=...)``), never from client
    text.  ``run_id`` is the ``AssistantRun``'s primary key."""

    run_id: Any
    step: int
    index: int

    def fields(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "run_step": self.step, "run_index": self.index}


class ToolCall(models.Model):
    """One tool call requested by the assistant on behalf of a user."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tool = models.CharField(_("tool"), max_length=100)
    group = models.CharField(_("tool group"), max_length=64, blank=True)
    arguments = models.JSONField(_("arguments"), default=dict, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="webfetch_tool_calls",
        verbose_name=_("requested by"),
    )
    #: Free text of the caller (an API client's notes, ``mcp:token-<id>``...): shown, never
    #: parsed into a reference (a run's calls are linked by ``run``).
    conversation = models.CharField(_("conversation"), max_length=200, blank=True)
    #: The assistant run that asked for the call, its step and its place in the step
    #: (:class:`RunOrigin`): written by the run only; ``None`` for any other caller.
    run = models.ForeignKey(
        "django_webfetch.AssistantRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tool_calls",
        editable=False,
        verbose_name=_("assistant run"),
    )
    run_step = models.PositiveSmallIntegerField(
        _("step of the run"), null=True, blank=True, editable=False
    )
    run_index = models.PositiveSmallIntegerField(
        _("call of the step"), null=True, blank=True, editable=False
    )
    state = models.CharField(
        _("state"), max_length=20, choices=CallState.choices, default=CallState.PENDING
    )
    #: Stable code of why the call ended as it did (``invalid_arguments``, ``worker_lost``,
    #: the tool's error code...); empty on success and while the call is open.
    reason = models.CharField(_("reason"), max_length=64, blank=True)

    requires_approval = models.BooleanField(_("requires approval"), default=False)
    #: What the approval card shows, captured when the call was requested.
    approval_preview = models.JSONField(_("approval preview"), default=dict, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("decided by"),
    )
    decided_at = models.DateTimeField(_("decided at"), null=True, blank=True)
    decision_comment = models.TextField(_("decision comment"), blank=True)
    expires_at = models.DateTimeField(_("approval expires at"), null=True, blank=True)

    #: ``ToolResult.to_dict()`` once the call finished (also for denied/expired calls).
    result = models.JSONField(_("result"), null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    #: A running attempt owns the call until then (its process's heartbeat renews it every
    #: few seconds); past it the worker counts as lost.
    lease_expires_at = models.DateTimeField(_("lease expires at"), null=True, blank=True)
    #: Past this the running attempt is stuck, not slow: lost even if its process lives.
    step_deadline = models.DateTimeField(_("step deadline"), null=True, blank=True)
    worker = models.CharField(_("worker"), max_length=200, blank=True)

    created = models.DateTimeField(_("created"), auto_now_add=True)
    updated = models.DateTimeField(_("updated"), auto_now=True)
    queued_at = models.DateTimeField(_("queued at"), null=True, blank=True)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    #: Set when retention dropped the call's content (arguments, preview, result text);
    #: the row stays as audit metadata (WEBFETCH_CALL_RETENTION_DAYS).
    content_pruned_at = models.DateTimeField(_("content pruned at"), null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = _("tool call")
        verbose_name_plural = _("tool calls")
        permissions = [("approve_toolcall", _("Can approve or deny tool calls"))]
        indexes = [
            models.Index(fields=["state", "expires_at"], name="webfetch_call_state_exp"),
            models.Index(fields=["state", "lease_expires_at"], name="webfetch_call_state_lease"),
            models.Index(fields=["user", "created"], name="webfetch_call_user"),
            models.Index(fields=["conversation"], name="webfetch_call_conversation"),
            # The retention sweep's question ("finished before the cutoff, content still
            # here"), answered without reading the calls already pruned.
            models.Index(
                fields=["finished_at"],
                name="webfetch_call_unpruned",
                condition=models.Q(content_pruned_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.state} ({self.pk})"

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    def tool_result(self) -> Any:
        """The stored result as a ``ToolResult`` (``None`` while the call is open)."""
        if self.result is None:
            return None
        return ToolResult.from_dict(self.result)
