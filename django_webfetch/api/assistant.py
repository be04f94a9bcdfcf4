"""The assistant API: conversations, messages, runs and their events.

An editor sees only their own conversations and runs (approvers included: approving goes
through the call endpoints, which show the call, not the conversation).  Progress is read
by polling ``GET runs/{id}/events/?since=<seq>``: plain request/response, so it works the
same under WSGI and ASGI, holds no server thread or connection between polls, and resumes
exactly where the client left off (events are numbered per run).  ``?wait=S`` makes it a
long-poll (WSGI); under ASGI ``runs/{id}/stream/`` sends the same events as Server-Sent
Events (``api/stream.py``).
"""

from __future__ import annotations

import time
from typing import Any, cast

from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from django_webfetch.assistant import services
from django_webfetch.assistant.models import AssistantRun, Conversation, Message, MessageRole
from django_webfetch.conf import conf
from django_webfetch.models import ToolCall

from ._schema import OpenApiParameter, OpenApiResponse, extend_schema

try:
    from drf_spectacular.utils import extend_schema_field
except ImportError:  # pragma: no cover - drf-spectacular is optional

    def extend_schema_field(*args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
        return lambda target: target


from .serializers import ErrorSerializer
from .shutdown import stopping
from .views import BaseView, Pagination, api_exception_handler, release_pooled_connection

__all__ = [
    "ConversationDetailView",
    "ConversationListView",
    "ConversationMessagesView",
    "RunCancelView",
    "RunDetailView",
    "RunEventsView",
]

MAX_MESSAGE_CHARS = 20_000

_ASSISTANT_ERROR_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (services.InvalidRunTransition, status.HTTP_409_CONFLICT),
    (services.RunInProgress, status.HTTP_409_CONFLICT),
    (services.AssistantNotInstalled, status.HTTP_503_SERVICE_UNAVAILABLE),
)


class AssistantAPIError(exceptions.APIException):
    def __init__(self, exc: services.AssistantError) -> None:
        self.status_code = next(
            (code for kind, code in _ASSISTANT_ERROR_STATUS if isinstance(exc, kind)),
            status.HTTP_400_BAD_REQUEST,
        )
        super().__init__(detail=str(exc), code=exc.code)


def assistant_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, services.AssistantError):
        exc = AssistantAPIError(exc)
    return api_exception_handler(exc, context)


# -- serializers ----------------------------------------------------------------------------


class MessageSerializer(serializers.ModelSerializer[Message]):
    tool_call = serializers.UUIDField(source="tool_call_id", allow_null=True, read_only=True)
    run = serializers.UUIDField(source="run_id", allow_null=True, read_only=True)

    class Meta:
        model = Message
        fields = [
            "id",
            "seq",
            "role",
            "content",
            "run",
            "step",
            "tool_calls",
            "tool_call",
            "tool_call_ref",
            "usage",
            "provider_label",
            "reported_model",
            "incomplete",
            "created",
        ]
        read_only_fields = fields


class ConversationSerializer(serializers.ModelSerializer[Conversation]):
    class Meta:
        model = Conversation
        fields = ["id", "title", "created", "updated", "seen_at"]
        read_only_fields = ["id", "created", "updated", "seen_at"]


class ConversationUpdateSerializer(serializers.Serializer[Any]):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    seen = serializers.BooleanField(
        required=False, help_text="true: the owner has the conversation open (clears its badge)."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("Send a title or seen.", code="empty")
        return attrs


class ConversationCreateSerializer(serializers.Serializer[Any]):
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)


class ConversationDetailSerializer(ConversationSerializer):
    messages = serializers.SerializerMethodField()
    latest_run = serializers.SerializerMethodField()

    class Meta(ConversationSerializer.Meta):
        fields = [*ConversationSerializer.Meta.fields, "messages", "latest_run"]

    @extend_schema_field(MessageSerializer(many=True))
    def get_messages(self, obj: Conversation) -> list[dict[str, Any]]:
        return MessageSerializer(obj.messages.order_by("seq"), many=True).data  # type: ignore[return-value]

    def get_latest_run(self, obj: Conversation) -> str | None:
        run = obj.runs.order_by("-created").values_list("pk", flat=True).first()
        return str(run) if run else None


class MessageCreateSerializer(serializers.Serializer[Any]):
    content = serializers.CharField(max_length=MAX_MESSAGE_CHARS, trim_whitespace=False)

    def validate_content(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("Write a message.", code="blank")
        return value


class StepToolCallSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    ref = serializers.CharField(help_text="The provider's id of the tool call.")
    tool = serializers.CharField()
    state = serializers.CharField()
    reason = serializers.CharField()
    requires_approval = serializers.BooleanField()
    comment = serializers.CharField(help_text="The approver's comment on the decision.")


class StepSerializer(serializers.Serializer[Any]):
    step = serializers.IntegerField()
    message = serializers.UUIDField(allow_null=True)
    text = serializers.CharField()
    tool_calls = StepToolCallSerializer(many=True)


class RunSerializer(serializers.ModelSerializer[AssistantRun]):
    conversation = serializers.UUIDField(source="conversation_id", read_only=True)
    model = serializers.CharField(source="model_name", read_only=True)
    offline = serializers.BooleanField(read_only=True)
    max_steps = serializers.SerializerMethodField()
    steps = serializers.SerializerMethodField()
    final_message = serializers.SerializerMethodField()
    events_url = serializers.SerializerMethodField()
    stream_url = serializers.SerializerMethodField()

    class Meta:
        model = AssistantRun
        fields = [
            "id",
            "conversation",
            "state",
            "step_count",
            "max_steps",
            "provider",
            "model",
            "reported_model",
            "provider_label",
            "offline",
            "incomplete",
            "error_code",
            "error_message",
            "steps",
            "final_message",
            "last_event",
            "events_url",
            "stream_url",
            "created",
            "updated",
            "finished_at",
        ]
        read_only_fields = fields

    def get_max_steps(self, obj: AssistantRun) -> int:
        return conf.WEBFETCH_ASSISTANT_MAX_STEPS

    @extend_schema_field(StepSerializer(many=True))
    def get_steps(self, obj: AssistantRun) -> list[dict[str, Any]]:
        messages = list(obj.messages.filter(role=MessageRole.ASSISTANT).order_by("seq"))
        calls: dict[int, list[ToolCall]] = {}
        for call in services.run_calls(obj):
            position = services.call_position(call)
            if position is not None:
                calls.setdefault(position[0], []).append(call)
        refs = {
            c["ref"]: c.get("id", "")
            for m in messages
            for c in (m.tool_calls or [])
            if isinstance(c, dict) and "ref" in c
        }
        steps = []
        for message in messages:
            step_calls = sorted(
                calls.get(message.step, []), key=lambda c: (services.call_position(c) or (0, 0))[1]
            )
            steps.append(
                {
                    "step": message.step,
                    "message": str(message.pk),
                    "text": message.content,
                    "tool_calls": [
                        {
                            "id": str(c.pk),
                            "ref": refs.get(
                                services.call_ref(obj, *(services.call_position(c) or (0, 0))), ""
                            ),
                            "tool": c.tool,
                            "state": c.state,
                            "reason": c.reason,
                            "requires_approval": c.requires_approval,
                            "comment": c.decision_comment,
                        }
                        for c in step_calls
                    ],
                }
            )
        return steps

    @extend_schema_field(MessageSerializer(allow_null=True))
    def get_final_message(self, obj: AssistantRun) -> dict[str, Any] | None:
        if obj.state != "completed":
            return None
        message = obj.messages.filter(role=MessageRole.ASSISTANT).order_by("-seq").first()
        return MessageSerializer(message).data if message else None

    def get_events_url(self, obj: AssistantRun) -> str:
        return reverse(
            "django_webfetch:run-events", kwargs={"pk": obj.pk}, request=self.context.get("request")
        )

    def get_stream_url(self, obj: AssistantRun) -> str:
        """The run's events as Server-Sent Events (``api/stream.py``)."""
        return reverse(
            "django_webfetch:run-stream", kwargs={"pk": obj.pk}, request=self.context.get("request")
        )


# A field named "data" would shadow ``Serializer.data``: the class is built from a dict (it
# only describes the events in the OpenAPI schema).
RunEventSerializer = type(
    "RunEventSerializer",
    (serializers.Serializer,),
    {
        "seq": serializers.IntegerField(),
        "kind": serializers.CharField(),
        "data": serializers.DictField(),
        "created": serializers.DateTimeField(),
    },
)


class RunEventsSerializer(serializers.Serializer[Any]):
    run = serializers.UUIDField()
    state = serializers.CharField()
    last_event = serializers.IntegerField()
    events = RunEventSerializer(many=True)


#: The longest ``wait`` of a long-poll, in seconds.
MAX_WAIT_SECONDS = 25.0
#: Seconds between two reads of a long-poll that waits.
WAIT_INTERVAL = 0.1


class SinceSerializer(serializers.Serializer[Any]):
    since = serializers.IntegerField(min_value=0, required=False, default=0)
    wait = serializers.FloatField(
        min_value=0,
        max_value=MAX_WAIT_SECONDS,
        required=False,
        default=0,
        help_text="Long-poll: wait up to this many seconds (at most 25) for an event after "
        "``since``; answers at once when there is one.",
    )


# -- views ----------------------------------------------------------------------------------

_ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid input."),
    404: OpenApiResponse(ErrorSerializer, description="Not found (or not yours)."),
    409: OpenApiResponse(ErrorSerializer, description="The run's state does not allow it."),
}


class AssistantView(BaseView):
    def get_exception_handler(self) -> Any:
        return assistant_exception_handler

    def get_conversation(self, request: Request, pk: Any) -> Conversation:
        conversation = services.visible_conversations(request.user).filter(pk=pk).first()
        if conversation is None:
            raise exceptions.NotFound(code="not_found")
        return cast(Conversation, conversation)

    def get_run(self, request: Request, pk: Any) -> AssistantRun:
        run = services.visible_runs(request.user).filter(pk=pk).first()
        if run is None:
            raise exceptions.NotFound(code="not_found")
        return cast(AssistantRun, run)


def _run_response(run: AssistantRun, request: Request, code: int = status.HTTP_200_OK) -> Response:
    data = RunSerializer(run, context={"request": request}).data
    headers = {}
    if code == status.HTTP_202_ACCEPTED:
        headers["Location"] = reverse(
            "django_webfetch:run-detail", kwargs={"pk": run.pk}, request=request
        )
    return Response(data, status=code, headers=headers)


class ConversationListView(AssistantView):
    """``GET``: the editor's own conversations.  ``POST``: start one."""

    pagination_class = Pagination
    throttle_scope = "messages"

    @extend_schema(
        operation_id="conversations_list",
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses={200: ConversationSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        conversations = services.visible_conversations(request.user).order_by("-updated", "pk")
        paginator = self.pagination_class()
        page: list[Conversation] | None = paginator.paginate_queryset(
            conversations, request, view=self
        )
        return paginator.get_paginated_response(ConversationSerializer(page, many=True).data)

    @extend_schema(
        operation_id="conversations_create",
        request=ConversationCreateSerializer,
        responses={201: ConversationDetailSerializer, 400: _ERRORS[400]},
    )
    def post(self, request: Request) -> Response:
        serializer = ConversationCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conversation = services.create_conversation(
            request.user, serializer.validated_data.get("title", "")
        )
        location = reverse(
            "django_webfetch:conversation-detail", kwargs={"pk": conversation.pk}, request=request
        )
        return Response(
            ConversationDetailSerializer(conversation).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": location},
        )


class ConversationDetailView(AssistantView):
    @extend_schema(
        operation_id="conversations_retrieve",
        responses={200: ConversationDetailSerializer, 404: _ERRORS[404]},
    )
    def get(self, request: Request, pk: Any) -> Response:
        return Response(ConversationDetailSerializer(self.get_conversation(request, pk)).data)

    @extend_schema(
        operation_id="conversations_partial_update",
        request=ConversationUpdateSerializer,
        responses={200: ConversationSerializer, 400: _ERRORS[400], 404: _ERRORS[404]},
    )
    def patch(self, request: Request, pk: Any) -> Response:
        """Rename the conversation (``title``) or mark it seen (``seen: true``); its owner
        only (nobody else finds it)."""
        conversation = self.get_conversation(request, pk)
        serializer = ConversationUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if "title" in serializer.validated_data:
            services.rename_conversation(conversation, serializer.validated_data["title"])
        if serializer.validated_data.get("seen"):
            services.mark_seen(conversation)
        return Response(ConversationSerializer(conversation).data)

    @extend_schema(
        operation_id="conversations_destroy",
        responses={204: None, 404: _ERRORS[404], 409: _ERRORS[409]},
    )
    def delete(self, request: Request, pk: Any) -> Response:
        conversation = self.get_conversation(request, pk)
        for run in conversation.runs.exclude(state__in=["completed", "failed", "cancelled"]):
            services.cancel_run(run, by=request.user)
        conversation.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationMessagesView(AssistantView):
    """Post the editor's message: starts a run (202 with the run; poll it or its events)."""

    throttle_scope = "messages"

    @extend_schema(
        operation_id="conversations_messages_create",
        request=MessageCreateSerializer,
        responses={
            202: OpenApiResponse(RunSerializer, description="The run that answers."),
            400: _ERRORS[400],
            404: _ERRORS[404],
            409: _ERRORS[409],
        },
    )
    def post(self, request: Request, pk: Any) -> Response:
        conversation = self.get_conversation(request, pk)
        serializer = MessageCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = services.post_message(
            conversation, serializer.validated_data["content"], user=request.user
        )
        return _run_response(AssistantRun.objects.get(pk=run.pk), request, status.HTTP_202_ACCEPTED)


class RunDetailView(AssistantView):
    @extend_schema(operation_id="runs_retrieve", responses={200: RunSerializer, 404: _ERRORS[404]})
    def get(self, request: Request, pk: Any) -> Response:
        return _run_response(services.refresh(self.get_run(request, pk)), request)


class RunCancelView(AssistantView):
    throttle_scope = "messages"

    @extend_schema(
        operation_id="runs_cancel",
        request=None,
        responses={200: RunSerializer, 404: _ERRORS[404], 409: _ERRORS[409]},
    )
    def post(self, request: Request, pk: Any) -> Response:
        run = services.cancel_run(self.get_run(request, pk), by=request.user)
        return _run_response(AssistantRun.objects.get(pk=run.pk), request)


class RunEventsView(AssistantView):
    """The run's events after ``since`` (0: from the start), oldest first, at most 200.
    With ``wait`` (seconds, at most 25) it long-polls: it answers as soon as there is an
    event after ``since`` (at once if there is one already), or the run has finished, or
    ``wait`` has passed (an empty list)."""

    @extend_schema(
        operation_id="runs_events",
        parameters=[SinceSerializer],
        responses={200: RunEventsSerializer, 400: _ERRORS[400], 404: _ERRORS[404]},
    )
    def get(self, request: Request, pk: Any) -> Response:
        run = services.refresh(self.get_run(request, pk))
        query = SinceSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        since = query.validated_data["since"]
        deadline = time.monotonic() + query.validated_data["wait"]
        events = services.events_since(run, since)
        while not events and not run.finished and time.monotonic() < deadline and not stopping():
            release_pooled_connection()
            time.sleep(min(WAIT_INTERVAL, max(deadline - time.monotonic(), 0.0)))
            run = AssistantRun.objects.get(pk=run.pk)
            events = services.events_since(run, since)
        return Response(
            {
                "run": str(run.pk),
                "state": run.state,
                "last_event": run.last_event,
                "events": [e.as_dict() for e in events],
            }
        )
