"""Assistant runs and conversations in the admin: read-only records.

Editors use the API (or the django CMS page); approvers approve the runs' tool calls on the
tool call pages.  These pages let an operator see what a run did and why it ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet

from django_webfetch import runs
from django_webfetch.models import AssistantRun, Conversation, Message, RunEvent

from . import RecordsOnly

if TYPE_CHECKING:
    _RunAdmin = admin.ModelAdmin[AssistantRun]
    _ConversationAdmin = admin.ModelAdmin[Conversation]
    _MessageInline = admin.TabularInline[Message, Any]
    _EventInline = admin.TabularInline[RunEvent, Any]
else:
    _RunAdmin = _ConversationAdmin = admin.ModelAdmin
    _MessageInline = _EventInline = admin.TabularInline


class _OwnOnly:
    """A conversation holds its tool calls' results: only who reads those results reads it
    (``runs.can_read_result``: the requester, who owns the conversation, and superusers),
    whatever model view permission a staff user holds."""

    owner_field = "owner"

    def get_queryset(self, request: Any) -> QuerySet[Any]:
        queryset: QuerySet[Any] = super().get_queryset(request)  # type: ignore[misc]
        if runs.reads_every_result(request.user):
            return queryset
        return queryset.filter(**{self.owner_field: request.user.pk})


class _ReadOnlyInline:
    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


class MessageInline(_ReadOnlyInline, _MessageInline):
    model = Message
    fk_name = "conversation"
    fields = (
        "seq",
        "role",
        "step",
        "content",
        "incomplete",
        "tool_call",
        "provider_label",
        "reported_model",
        "created",
    )
    readonly_fields = fields
    extra = 0


class RunEventInline(_ReadOnlyInline, _EventInline):
    model = RunEvent
    fields = ("seq", "kind", "data", "created")
    readonly_fields = fields
    extra = 0


@admin.register(Conversation)
class ConversationAdmin(_OwnOnly, RecordsOnly, _ConversationAdmin):
    list_display = ("__str__", "owner", "created", "updated")
    search_fields = ("title", "owner__username")
    inlines = (MessageInline,)


@admin.register(AssistantRun)
class AssistantRunAdmin(_OwnOnly, RecordsOnly, _RunAdmin):
    owner_field = "conversation__owner"

    list_display = (
        "pk",
        "conversation",
        "user",
        "state",
        "step_count",
        "provider_label",
        "error_code",
        "created",
    )
    list_filter = ("state", "provider", "error_code")
    fields = (
        "conversation",
        "user",
        "state",
        "step_count",
        "provider",
        "model_name",
        "reported_model",
        "provider_label",
        "incomplete",
        "error_code",
        "error_message",
        "provider_error",
        "attempts",
        "lease_expires_at",
        "worker",
        "created",
        "updated",
        "finished_at",
    )
    readonly_fields = fields
    inlines = (RunEventInline,)
