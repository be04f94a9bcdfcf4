"""Serializers of the API."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from django_webfetch.models.calls import FINISHED_STATES

__all__ = [
    "DecisionSerializer",
    "ErrorSerializer",
    "StateFilterSerializer",
    "ToolCallCreateSerializer",
    "ToolCallSerializer",
    "ToolResultSerializer",
    "ToolSpecSerializer",
]


class ToolResultSerializer(serializers.Serializer[Any]):
    """A ``ToolResult``: ``content`` for the model, ``error`` a stable code or null."""

    content = serializers.CharField()
    error = serializers.CharField(allow_null=True)
    meta = serializers.DictField()


class ToolSpecSerializer(serializers.Serializer[Any]):
    """One tool spec; its exact shape follows ``?format=`` (json_schema, openai,
    anthropic)."""

    name = serializers.CharField(required=False)
    description = serializers.CharField(required=False)
    parameters = serializers.DictField(required=False)


class ErrorSerializer(serializers.Serializer[Any]):
    """``{"detail", "code"}``, plus ``errors`` (per field) for invalid input."""

    detail = serializers.CharField()
    code = serializers.CharField()

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # A field called "errors" cannot be declared: it would hide Serializer.errors.
        fields = super().get_fields()
        fields["errors"] = serializers.DictField(required=False)
        return fields


def _username(user: Any) -> str | None:
    return None if user is None else str(user.get_username())


class ToolCallSerializer(serializers.ModelSerializer[ToolCall]):
    user = serializers.SerializerMethodField()
    decided_by = serializers.SerializerMethodField()
    result = serializers.SerializerMethodField()
    result_withheld = serializers.SerializerMethodField()
    finished = serializers.SerializerMethodField()
    retry_after = serializers.SerializerMethodField()

    class Meta:
        model = ToolCall
        fields = [
            "id",
            "tool",
            "group",
            "arguments",
            "conversation",
            "state",
            "finished",
            "retry_after",
            "reason",
            "user",
            "requires_approval",
            "approval_preview",
            "expires_at",
            "decided_by",
            "decided_at",
            "decision_comment",
            "attempts",
            "created",
            "updated",
            "queued_at",
            "started_at",
            "finished_at",
            "result",
            "result_withheld",
        ]
        read_only_fields = fields

    def get_user(self, obj: ToolCall) -> str | None:
        return _username(obj.user)

    def get_decided_by(self, obj: ToolCall) -> str | None:
        return _username(obj.decided_by)

    def get_finished(self, obj: ToolCall) -> bool:
        return obj.state in FINISHED_STATES

    def get_retry_after(self, obj: ToolCall) -> float | None:
        """While the call is open: the seconds after which another poll is worth it (a
        quarter of the time it spent in its state, 0.25 to 5; ``runs.poll_after``); ``null``
        once it finished."""
        return runs.poll_after(obj)

    def _reader(self) -> Any:
        request = self.context.get("request")
        return getattr(request, "user", None)

    def get_result(self, obj: ToolCall) -> dict[str, Any] | None:
        """The ``ToolResult`` once the call finished (a refusal is a result with an error
        code); ``null`` while it is open, and for a reader who may not read it (an approver
        reading another user's call: ``runs.results``, the one reader of a result)."""
        if obj.state not in FINISHED_STATES:
            return None
        return runs.result_dict(self._reader(), obj)

    def get_result_withheld(self, obj: ToolCall) -> bool:
        """``true``: the call has a result that this reader may not read."""
        return runs.withheld(self._reader(), obj)


class ToolCallCreateSerializer(serializers.Serializer[Any]):
    tool = serializers.CharField(max_length=100)
    arguments = serializers.JSONField(required=False, default=dict)
    conversation = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default=""
    )


class DecisionSerializer(serializers.Serializer[Any]):
    comment = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class StateFilterSerializer(serializers.Serializer[Any]):
    state = serializers.ChoiceField(choices=CallState.choices, required=False)
