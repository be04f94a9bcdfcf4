"""Assistant runs and conversations in the admin: read-only records.

Editors use the API (or the django CMS page); approvers approve the runs' tool calls on the
tool call pages.  These pages let an operator see what a run did and why it ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin

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
class ConversationAdmin(RecordsOnly, _ConversationAdmin):
    list_display = ("__str__", "owner", "created", "updated")
    search_fields = ("title", "owner__username")
    inlines = (MessageInline,)


@admin.register(AssistantRun)
class AssistantRunAdmin(RecordsOnly, _RunAdmin):
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
