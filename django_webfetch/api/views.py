"""API views: tool specs, tool calls, approval decisions.

Errors are DRF errors with a stable ``code`` in the body (``{"detail": ..., "code": ...}``).
A tool's refusal is not an API error: the call ends and its ``result`` carries the code.
Authentication is whatever ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`` names, read
per request (session auth with CSRF, token auth, ...).
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.signals import got_request_exception
from django.db import DatabaseError, DataError, IntegrityError, connection
from django.http import Http404, HttpResponsePermanentRedirect, JsonResponse
from django.urls import NoReverseMatch, Resolver404, resolve
from rest_framework import exceptions, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.settings import api_settings
from rest_framework.views import APIView, exception_handler

from django_webfetch import runs
from django_webfetch.budgets import holds, rates
from django_webfetch.models import CallState, ToolCall
from django_webfetch.runs.bounds import InputRejected, check_text, safe_label
from django_webfetch.tools import specs, tools_for_user

from ._schema import AutoSchema, OpenApiParameter, OpenApiResponse, extend_schema
from .parsers import BoundedFormParser, BoundedJSONParser, BoundedMultiPartParser, RequestTooLarge
from .permissions import CanApprove, CanReadCall, IsActiveUser
from .serializers import (
    DecisionSerializer,
    ErrorSerializer,
    StateFilterSerializer,
    ToolCallCreateSerializer,
    ToolCallSerializer,
    ToolSpecSerializer,
)
from .throttles import ScopedUserThrottle

__all__ = [
    "ApiRootView",
    "CallApproveView",
    "CallCancelView",
    "CallDenyView",
    "CallDetailView",
    "CallListView",
    "JSONErrorsMixin",
    "NotFoundView",
    "ToolListView",
    "api_exception_handler",
    "check_request_text",
    "too_many_open_response",
    "release_pooled_connection",
]

logger = logging.getLogger("django_webfetch.api")

#: Seconds a client is told to wait (``Retry-After``) when the database is unavailable.
DATABASE_RETRY_AFTER = 5

SPEC_FORMATS = ("json_schema", "openai", "anthropic")

#: HTTP status of each service error.
_RUN_ERROR_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (runs.InvalidTransition, status.HTTP_409_CONFLICT),
    (runs.ToolNotOfferedError, status.HTTP_403_FORBIDDEN),
    (runs.ApprovalPermissionDenied, status.HTTP_403_FORBIDDEN),
    (runs.CancelPermissionDenied, status.HTTP_403_FORBIDDEN),
)


class RunAPIError(exceptions.APIException):
    """A service error as a DRF error (status from ``_RUN_ERROR_STATUS``)."""

    def __init__(self, exc: runs.RunError) -> None:
        self.status_code = next(
            (code for kind, code in _RUN_ERROR_STATUS if isinstance(exc, kind)),
            status.HTTP_400_BAD_REQUEST,
        )
        #: Why a tool is not offered (``group_disabled``, ``admin_only``, ``no_such_tool``).
        self.why: str = getattr(exc, "why", "")
        super().__init__(detail=str(exc), code=exc.code)


def _codes(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {k: _codes(v) for k, v in detail.items()}
    if isinstance(detail, list):
        return [_codes(v) for v in detail]
    return {"message": str(detail), "code": getattr(detail, "code", "invalid")}


class InputRefused(exceptions.APIException):
    """Input that must not be stored (``runs.bounds``): its code says why."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "Invalid input."
    default_code = "invalid"


class DatabaseUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The database is unavailable; try again shortly."
    default_code = "database_unavailable"


def _audit(context: dict[str, Any], code: str, exc: Exception) -> None:
    """The audit line of a refused request (the refused input itself is not logged)."""
    request = context.get("request")
    # The user as authenticated so far, never ``request.user``: that would authenticate
    # again, inside the handler, and raise what made the request fail (a NUL in a token is
    # a ``DataError`` on PostgreSQL) as an HTML 500.
    user = getattr(request, "_user", None) if request is not None else None
    logger.warning(
        "refused %s %s: %s (%s) user=%s",
        getattr(request, "method", "?"),
        getattr(request, "path", "?"),
        code,
        exc,
        getattr(user, "pk", None),
    )


def _as_api_exception(exc: Exception, context: dict[str, Any]) -> Exception:
    """Map a service, Django or database error onto an ``APIException`` (or leave it)."""
    if isinstance(exc, runs.RunError):
        return RunAPIError(exc)
    if isinstance(exc, InputRejected):
        _audit(context, exc.code, exc)
        return InputRefused(str(exc), code=exc.code)
    if isinstance(exc, exceptions.ParseError | RequestTooLarge):
        _audit(context, str(getattr(exc.detail, "code", exc.default_code)), exc)
        return exc
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    if isinstance(exc, DjangoPermissionDenied):
        return exceptions.PermissionDenied()
    if isinstance(exc, RecursionError):
        # A recursive walker (a JSON string inside a form field, a serializer) met input
        # nested too deep; the bounded parsers catch it in JSON bodies before that.
        _audit(context, "nesting_too_deep", exc)
        return InputRefused("The input is nested too deep.", code="nesting_too_deep")
    if isinstance(exc, RequestDataTooBig):
        _audit(context, "request_too_large", exc)
        return RequestTooLarge()
    if isinstance(exc, SuspiciousOperation):
        _audit(context, "bad_request", exc)
        return exceptions.ParseError("Bad request.", code="bad_request")
    if isinstance(exc, DataError):
        # A value the database refuses (bounds.check_storable should have caught it).
        _audit(context, "unstorable_input", exc)
        return exceptions.ParseError("The input cannot be stored.", code="unstorable_input")
    if isinstance(exc, DatabaseError) and not isinstance(exc, IntegrityError):
        # OperationalError / InterfaceError: the database restarted or is unreachable.  The
        # request's transaction (if any) was rolled back, so nothing is half-written.
        logger.warning("database unavailable: %s", exc)
        return DatabaseUnavailable()
    return exc


def too_many_open_response(exc: holds.TooManyOpen) -> JsonResponse:
    """The refusal of a hold (``budgets.holds``): ``429`` with ``Retry-After``, the API's
    error shape; the client polls instead."""
    response = JsonResponse(exc.as_dict(), status=status.HTTP_429_TOO_MANY_REQUESTS)
    response["Retry-After"] = str(exc.retry_after)
    response["Cache-Control"] = "no-store"
    return response


def release_pooled_connection() -> None:
    """Between two reads of a wait (a long-poll, a stream): give this thread's connection
    back to the backend's pool (``OPTIONS["pool"]``), so that a waiting client holds no
    connection while it sleeps and a pool of a few connections serves many waiting
    clients.  Without a pool nothing changes (a new connection per read would cost more
    than the one kept)."""
    if getattr(connection, "pool", None) is not None and not connection.in_atomic_block:
        connection.close()


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with a stable ``code`` next to every ``detail``; every error of the
    API is JSON (an unexpected one too, as ``500`` ``server_error``)."""
    if isinstance(exc, holds.TooManyOpen):
        return Response(
            exc.as_dict(),
            status=status.HTTP_429_TOO_MANY_REQUESTS,
            headers={"Retry-After": str(exc.retry_after), "Cache-Control": "no-store"},
        )
    exc = _as_api_exception(exc, context)
    response = exception_handler(exc, context)
    if response is None:
        if settings.DEBUG:
            return None  # Django's technical 500 page
        request = context.get("request")
        logger.error("unexpected error in the API", exc_info=exc)
        got_request_exception.send(sender=None, request=getattr(request, "_request", request))
        return Response(
            {"detail": "Internal server error.", "code": "server_error"},
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    if isinstance(exc, DatabaseUnavailable):
        response["Retry-After"] = str(DATABASE_RETRY_AFTER)
    if isinstance(exc, exceptions.Throttled):
        # DRF set Retry-After (whole seconds); the body says the same for scripts.
        response["Retry-After"] = str(rates.whole_seconds(getattr(exc, "wait", None) or 1))
    if not isinstance(exc, exceptions.APIException):  # pragma: no cover - DRF's own handler
        return response
    if isinstance(exc, exceptions.ValidationError):
        response.data = {
            "detail": "Invalid input.",
            "code": "invalid",
            "errors": _codes(exc.detail),
        }
    else:
        detail = exc.detail
        code = getattr(detail, "code", None) or exc.default_code
        response.data = {"detail": str(detail), "code": str(code)}
        why = getattr(exc, "why", "")
        if why:
            response.data["why"] = why
        if isinstance(exc, exceptions.Throttled):
            response.data["retry_after"] = int(response["Retry-After"])
    return response


def check_request_text(request: Any, kwargs: dict[str, Any]) -> None:
    """Raise :class:`InputRejected` (``invalid_characters``) for a NUL or a lone surrogate
    in a request header, a query parameter (name or value) or a path argument."""
    for key, value in request.META.items():
        if isinstance(value, str) and (key.startswith("HTTP_") or key.startswith("CONTENT_")):
            check_text(value, where=f"header {safe_label(key)}")
    for key, values in request.query_params.lists():
        check_text(key, where="query parameter")
        for value in values:
            check_text(value, where=f"query parameter {safe_label(key)}")
    for key, value in kwargs.items():
        if isinstance(value, str):
            check_text(value, where=f"path {safe_label(key)}")


class JSONErrorsMixin:
    """Every error of a view is JSON with ``detail`` and ``code``, whatever renderer the
    client negotiated (``Accept: text/html`` or ``?format=api`` picks DRF's browsable API,
    the schema view renders YAML): the exception goes through
    :func:`api_exception_handler` and its response is always rendered by
    ``JSONRenderer``.  Every view of ``api/urls.py`` has it (a test walks the URLconf)."""

    def get_exception_handler(self) -> Any:
        return api_exception_handler

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        # Before authentication, content negotiation or any query: a NUL or a lone
        # surrogate in a header (a token, a cookie), a query parameter or a path segment
        # never reaches the database (PostgreSQL: DataError).
        check_request_text(request, kwargs)
        super().initial(request, *args, **kwargs)  # type: ignore[misc]

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(response, Response) and getattr(response, "exception", False):
            renderer = JSONRenderer()
            request.accepted_renderer = renderer
            request.accepted_media_type = renderer.media_type
        return super().finalize_response(  # type: ignore[misc]
            request, response, *args, **kwargs
        )


class BaseView(JSONErrorsMixin, APIView):
    schema = AutoSchema()
    permission_classes = [IsActiveUser]
    #: Per user and scope (``WEBFETCH_API_RATES``); a view without a scope is not limited.
    throttle_classes = [ScopedUserThrottle]
    throttle_scope: str | None = None
    # Bounded before parsing; refuse what the database cannot store (api/parsers.py).
    parser_classes = [BoundedJSONParser, BoundedFormParser, BoundedMultiPartParser]

    def get_authenticators(self) -> list[Any]:
        # Read per request: an integrator's REST_FRAMEWORK setting (or override_settings)
        # applies without re-importing this module.
        classes = cast("list[type[Any]]", api_settings.DEFAULT_AUTHENTICATION_CLASSES)
        return [auth() for auth in classes]

    def get_view_description(self, html: bool = False) -> str:
        """The docstring without reST markup: the browsable API shows it as it is."""
        text = _plain(super().get_view_description(html=False))
        if html:
            from django.utils.html import escape
            from django.utils.safestring import mark_safe

            return mark_safe(  # noqa: S308 - escaped above
                "".join(f"<p>{escape(p)}</p>" for p in text.split("\n\n") if p.strip())
            )
        return text

    def get_call(self, request: Request, pk: Any) -> ToolCall:
        """The call, if the user may see it (404 otherwise: no hint that it exists)."""
        call = ToolCall.objects.select_related("user", "decided_by").filter(pk=pk).first()
        if call is None or not runs.can_read(request.user, call):
            raise Http404
        self.check_object_permissions(request, call)
        return call


def _call_response(call: ToolCall, request: Request, *, created: bool = False) -> Response:
    data = ToolCallSerializer(call, context={"request": request}).data
    headers = {}
    if data["retry_after"] is not None:
        # Open: when to poll again, in the whole seconds HTTP allows (the body is finer).
        headers["Retry-After"] = runs.retry_after_header(data["retry_after"])
    if not created:
        return Response(data, headers=headers)
    queued = call.state in (CallState.APPROVED, CallState.RUNNING)
    headers["Location"] = reverse(
        "django_webfetch:call-detail", kwargs={"pk": call.pk}, request=request
    )
    return Response(
        data,
        status=status.HTTP_202_ACCEPTED if queued else status.HTTP_201_CREATED,
        headers=headers,
    )


_ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Invalid input."),
    403: OpenApiResponse(ErrorSerializer, description="Not permitted."),
    404: OpenApiResponse(ErrorSerializer, description="No such call (or not yours)."),
    409: OpenApiResponse(ErrorSerializer, description="The call's state does not allow it."),
}


_REST_ROLE = re.compile(r":[a-z]+:`([^`<]*?)(?:\s*<[^>]*>)?`")
_REST_LITERAL = re.compile(r"``([^`]+)``")


def _plain(text: str) -> str:
    """``literal`` -> literal, :role:`target` -> target (what the browsable API shows)."""
    return _REST_LITERAL.sub(r"\1", _REST_ROLE.sub(r"\1", text))


class ApiRootView(BaseView):
    """The API's root: where the tools, the calls, the conversations and the schema are
    (a run is reached from its conversation or its message's answer)."""

    @extend_schema(operation_id="api_root", responses={200: dict})
    def get(self, request: Request) -> Response:
        links = {
            "tools": reverse("django_webfetch:tool-list", request=request),
            "calls": reverse("django_webfetch:call-list", request=request),
            "conversations": reverse("django_webfetch:conversation-list", request=request),
        }
        with contextlib.suppress(NoReverseMatch):  # drf-spectacular is not installed
            links["schema"] = reverse("django_webfetch:schema", request=request)
        return Response(links)


class _FormatIsNotARenderer(DefaultContentNegotiation):
    """``?format=`` picks the tool spec shape here, not DRF's renderer."""

    class settings:  # noqa: N801 - stands in for api_settings
        URL_FORMAT_OVERRIDE = None


class ToolListView(BaseView):
    """The tools offered to the current user, as tool specs."""

    content_negotiation_class = _FormatIsNotARenderer

    @extend_schema(
        operation_id="tools_list",
        parameters=[
            OpenApiParameter(
                "format",
                str,
                OpenApiParameter.QUERY,
                enum=list(SPEC_FORMATS),
                description="json_schema (default), openai or anthropic",
            )
        ],
        responses={200: ToolSpecSerializer(many=True), 400: _ERRORS[400]},
    )
    def get(self, request: Request) -> Response:
        spec_format = request.query_params.get("format", "json_schema")
        if spec_format not in SPEC_FORMATS:
            raise exceptions.ValidationError(
                {
                    "format": [
                        exceptions.ErrorDetail(
                            f"Use one of {', '.join(SPEC_FORMATS)}.", code="invalid_choice"
                        )
                    ]
                }
            )
        return Response(specs(list(tools_for_user(request.user)), spec_format))


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500
    #: Past any real table; bounds the offset a client sends (``?offset=10**30`` overflows
    #: SQLite's integers and PostgreSQL's bigint).
    max_offset = 2**31 - 1

    def get_offset(self, request: Request) -> int:
        return min(int(super().get_offset(request)), self.max_offset)


class CallListView(BaseView):
    """``GET``: the calls the current user may read (``runs.visible_calls``: their own;
    approvers also every call that went to approval, without its result; superusers all).
    ``POST``: request a call."""

    throttle_scope = "calls"

    pagination_class = Pagination

    @extend_schema(
        operation_id="calls_list",
        parameters=[
            StateFilterSerializer,
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses={200: ToolCallSerializer(many=True), 400: _ERRORS[400]},
    )
    def get(self, request: Request) -> Response:
        filters = StateFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        calls = runs.visible_calls(request.user)
        # Expiry and worker loss are enforced on read, too.
        runs.expire_due(calls=calls)
        runs.recover_lost(calls=calls)
        calls = calls.select_related("user", "decided_by").order_by("-created", "pk")
        if filters.validated_data.get("state"):
            calls = calls.filter(state=filters.validated_data["state"])
        paginator = self.pagination_class()
        page: list[ToolCall] | None = paginator.paginate_queryset(calls, request, view=self)
        data = ToolCallSerializer(page, many=True, context={"request": request}).data
        return paginator.get_paginated_response(data)

    @extend_schema(
        operation_id="calls_create",
        request=ToolCallCreateSerializer,
        responses={
            201: OpenApiResponse(
                ToolCallSerializer, description="Finished, or waiting for an approval."
            ),
            202: OpenApiResponse(
                ToolCallSerializer, description="Queued: poll the call until it finished."
            ),
            400: _ERRORS[400],
            403: _ERRORS[403],
        },
    )
    def post(self, request: Request) -> Response:
        serializer = ToolCallCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        call = runs.request_call(
            data["tool"],
            data.get("arguments"),
            user=request.user,
            conversation=data.get("conversation", ""),
        )
        return _call_response(call, request, created=True)


class CallDetailView(BaseView):
    permission_classes = [CanReadCall]

    @extend_schema(
        operation_id="calls_retrieve", responses={200: ToolCallSerializer, 404: _ERRORS[404]}
    )
    def get(self, request: Request, pk: Any) -> Response:
        call = runs.refresh(self.get_call(request, pk))
        return _call_response(call, request)


class _DecisionView(BaseView):
    permission_classes = [CanReadCall]
    throttle_scope = "approvals"

    def decide(self, call: ToolCall, user: Any, comment: str) -> ToolCall:
        raise NotImplementedError

    def post(self, request: Request, pk: Any) -> Response:
        call = self.get_call(request, pk)
        serializer = DecisionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        call = self.decide(call, request.user, serializer.validated_data.get("comment", ""))
        response = _call_response(runs.refresh(call), request)
        if response.data["state"] in (CallState.APPROVED, CallState.RUNNING):
            # Approved: it runs off the request (Celery or the background runner).
            response.status_code = status.HTTP_202_ACCEPTED
        return response


_DECISION_SCHEMA = {
    "request": DecisionSerializer,
    "responses": {
        200: ToolCallSerializer,
        202: OpenApiResponse(
            ToolCallSerializer, description="Approved: the call runs in the background."
        ),
        400: _ERRORS[400],
        403: _ERRORS[403],
        404: _ERRORS[404],
        409: _ERRORS[409],
    },
}


class CallApproveView(_DecisionView):
    """Approve a call awaiting approval; it runs (in-process) or is queued."""

    permission_classes = [CanReadCall, CanApprove]

    def decide(self, call: ToolCall, user: Any, comment: str) -> ToolCall:
        return runs.approve(call, by=user, comment=comment)

    @extend_schema(operation_id="calls_approve", **_DECISION_SCHEMA)
    def post(self, request: Request, pk: Any) -> Response:
        return super().post(request, pk)


class CallDenyView(_DecisionView):
    permission_classes = [CanReadCall, CanApprove]

    def decide(self, call: ToolCall, user: Any, comment: str) -> ToolCall:
        return runs.deny(call, by=user, comment=comment)

    @extend_schema(operation_id="calls_deny", **_DECISION_SCHEMA)
    def post(self, request: Request, pk: Any) -> Response:
        return super().post(request, pk)


class CallCancelView(_DecisionView):
    """Cancel a call that has not started (its owner, or an approver)."""

    throttle_scope = "calls"

    def decide(self, call: ToolCall, user: Any, comment: str) -> ToolCall:
        return runs.cancel(call, by=user, comment=comment)

    @extend_schema(operation_id="calls_cancel", **_DECISION_SCHEMA)
    def post(self, request: Request, pk: Any) -> Response:
        return super().post(request, pk)


class NotFoundView(JSONErrorsMixin, APIView):
    """Every path under the API that no view matches: ``404`` JSON, whatever the method
    (the last pattern of ``api/urls.py``).  With ``APPEND_SLASH`` a ``GET``/``HEAD``
    of a known path without its trailing slash is redirected, as Django would."""

    permission_classes: list[Any] = []
    authentication_classes: list[Any] = []
    schema = None

    def _redirect_to_slash(self, request: Request) -> HttpResponsePermanentRedirect | None:
        path = request.path
        if (
            request.method not in ("GET", "HEAD")
            or path.endswith("/")
            or not getattr(settings, "APPEND_SLASH", True)
        ):
            return None
        try:
            match = resolve(path + "/")
        except Resolver404:
            return None
        if match.url_name == "not-found":
            return None
        query = request.META.get("QUERY_STRING", "")
        return HttpResponsePermanentRedirect(path + "/" + (f"?{query}" if query else ""))

    def _not_found(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        redirect = self._redirect_to_slash(request)
        if redirect is not None:
            return redirect
        raise exceptions.NotFound()

    get = post = put = patch = delete = head = options = _not_found
