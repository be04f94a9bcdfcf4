"""``django_webfetch.api.middleware.JSONErrorsMiddleware``: every error of the API is JSON
with a stable ``code``, whichever layer failed.

The API's own views answer their errors in JSON (``views.api_exception_handler``), but an
exception raised *before* the view (in another app's middleware: django CMS's toolbar
reads the database on every request, sessions and authentication do too) never reaches
them: Django turns it into its HTML error page (``handler500``, or the technical page
under ``DEBUG``).  Placed first in ``MIDDLEWARE``, this middleware sees that response on
the way out and, for a request whose path resolves to a view of ``django_webfetch.api``
or ``django_webfetch.mcp``, answers in JSON instead:

- ``503`` ``database_unavailable`` (with ``Retry-After``) when the database failed the
  request (a restart, a failover, ``max_connections`` reached, the pool's wait ran out):
  the ``OperationalError``/``InterfaceError`` that Django handled, or, where Django handed
  none over, a connection of the request left unusable; in every mode, as the API's own
  handler does;
- ``500`` ``server_error`` for any other server error (not under ``DEBUG``: the
  developer's traceback page is kept, as the API's own handler keeps it);
- ``400`` ``bad_request``, ``403`` ``permission_denied``, ``404`` ``not_found``,
  ``405`` ``method_not_allowed``, ``413`` ``request_too_large`` for Django's HTML answers
  to those.

A JSON response (the API's own errors), a success and any path outside the API pass
unchanged; the path is resolved only for an error that is not JSON already.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from django.core.signals import got_request_exception
from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.urls import Resolver404, get_resolver

from .views import DATABASE_RETRY_AFTER

__all__ = ["API_MODULES", "JSONErrorsMiddleware", "is_api_path", "json_error", "remember_exception"]

logger = logging.getLogger("django_webfetch.api")

#: The packages whose views answer JSON: a path resolving to one of their views is the API.
API_MODULES = ("django_webfetch.api.", "django_webfetch.mcp.")

_CODES = {
    400: ("Bad request.", "bad_request"),
    403: ("Permission denied.", "permission_denied"),
    404: ("Not found.", "not_found"),
    405: ("Method not allowed.", "method_not_allowed"),
    413: ("The request is too large.", "request_too_large"),
}


def is_api_path(request: HttpRequest) -> bool:
    """Whether ``request``'s path resolves to a view of the API or the MCP server."""
    try:
        match = get_resolver(getattr(request, "urlconf", None)).resolve(request.path_info)
    except (Resolver404, ValueError):
        return False
    view = match.func
    module = getattr(getattr(view, "view_class", None), "__module__", None) or getattr(
        view, "__module__", ""
    )
    return str(module).startswith(API_MODULES)


def remember_exception(sender: Any = None, request: Any = None, **kwargs: Any) -> None:
    """``got_request_exception``: keep the request's first database error on the request.

    Django sends the signal while it handles the exception; where the failed layer is
    synchronous (every layer below a synchronous middleware, as django CMS's are) that is
    inside the ``except`` block, in the request's thread, so the exception is at hand."""
    exc = sys.exc_info()[1]
    if request is None or not isinstance(exc, DatabaseError):
        return
    if getattr(request, "_webfetch_database_error", None) is None:
        request._webfetch_database_error = exc


def _database_failed(request: HttpRequest) -> bool:
    """A connection error of the database (``OperationalError``, ``InterfaceError``) made
    this request fail: the exception itself when Django handed it over, else what the
    request's connections say."""
    exc = getattr(request, "_webfetch_database_error", None)
    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    return _database_unusable()


def _database_unusable() -> bool:
    """A database error during this request left a connection of this thread unusable.

    Django marks a connection (``errors_occurred``) when a query or the connect itself
    raised anything but a ``DataError``/``IntegrityError``; the connection is then asked
    whether it still answers (a failed connect left none to ask)."""
    for connection in connections.all(initialized_only=True):
        if not connection.errors_occurred:
            continue
        if connection.connection is None:
            return True
        try:
            if not connection.is_usable():
                return True
        except Exception:  # noqa: BLE001 - a dead connection may raise anything
            return True
    return False


def _is_json(response: HttpResponseBase) -> bool:
    return str(response.get("Content-Type", "")).startswith("application/json")


def json_error(response: HttpResponseBase, request: HttpRequest) -> HttpResponseBase:
    """``response`` as the API answers it: unchanged unless it is an error that is not JSON
    on an API path (see the module docstring)."""
    status = response.status_code
    if status < 400 or _is_json(response) or not is_api_path(request):
        return response
    if status >= 500 and _database_failed(request):
        logger.warning("database unavailable before the API's view: %s", request.path)
        answer = JsonResponse(
            {
                "detail": "The database is unavailable; try again shortly.",
                "code": "database_unavailable",
            },
            status=503,
        )
        answer["Retry-After"] = str(DATABASE_RETRY_AFTER)
        return answer
    if status >= 500:
        from django.conf import settings

        if settings.DEBUG:
            return response  # Django's technical page, as the API's own handler keeps it
        return JsonResponse(
            {"detail": "Internal server error.", "code": "server_error"}, status=500
        )
    detail, code = _CODES.get(status, ("Request refused.", "refused"))
    return JsonResponse({"detail": detail, "code": code}, status=status)


class JSONErrorsMiddleware:
    """Place it first in ``MIDDLEWARE`` (see the module docstring).

    Synchronous only: under ASGI Django runs it in the request's thread, with the other
    synchronous middleware, so it sees the connection that failed."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        got_request_exception.connect(
            remember_exception, dispatch_uid="django_webfetch.api.remember_exception"
        )

    def __call__(self, request: HttpRequest) -> Any:
        return json_error(self.get_response(request), request)
