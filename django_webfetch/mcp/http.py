"""The MCP Streamable HTTP transport, mounted beside Django's ASGI application.

In the project's ``asgi.py`` (Django is set up first: this module imports the models)::

    from django.core.asgi import get_asgi_application

    django_application = get_asgi_application()

    from django_webfetch.mcp.http import with_mcp  # noqa: E402

    application = with_mcp(django_application, path="/mcp")

or run ``uvicorn django_webfetch.mcp.asgi:application``, which does just that.  The server
needs the ASGI lifespan protocol (uvicorn, hypercorn, granian): the SDK's session manager
runs for the process's lifetime.

Every HTTP request to the endpoint carries ``Authorization: Bearer <token>``: a personal
access token, or (with ``WEBFETCH_OAUTH_RESOURCE`` set) an OAuth access token bound to that
resource, which resolves to its grant (``django_webfetch.oauth.grants.principal``).  The
token is looked up on every request (a revoked token is refused at once, 401, with the
RFC 9728 ``resource_metadata`` a client discovers the authorization server from), and an
MCP session only answers requests made for the principal (token or grant) that opened it.
The ``Host`` header is checked against Django's ``ALLOWED_HOSTS``, as Django checks it.

An open session is a hold of kind ``mcp_sessions`` (``budgets.holds``), counted for its
token and for the token's user from the request that opens it (``initialize``) until it
ends (``DELETE``, ``WEBFETCH_MCP_SESSION_IDLE`` seconds without a request in flight, or the
server's shutdown).  Past a bound the opening request is answered ``429`` with
``Retry-After`` and a JSON-RPC error whose ``data`` is the refusal (``too_many_open``).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.auth.provider import AccessToken as BearerToken
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from django_webfetch.budgets import holds
from django_webfetch.conf import conf
from django_webfetch.models import AccessToken
from django_webfetch.models.tokens import TOKEN_PREFIX

from .server import TOO_MANY_OPEN, Context, Unauthorized, build_server, db

__all__ = [
    "MAX_REQUEST_BYTES",
    "SessionManager",
    "TokenVerifier",
    "mcp_endpoint",
    "principals",
    "too_many_open",
    "with_mcp",
]

#: Bytes of one HTTP request body (a tool's arguments are at most 16 KiB as JSON).
MAX_REQUEST_BYTES = 256 * 1024


def _live_token(token_id: int | str) -> AccessToken | None:
    return (
        AccessToken.objects.live()
        .select_related("user")
        .filter(pk=token_id, user__is_active=True)
        .first()
    )


def _oauth_principal(secret: str, resource: str) -> AccessToken | None:
    from django_webfetch.oauth.grants import principal

    return principal(secret, resource)


class TokenVerifier:
    """The SDK's ``TokenVerifier``: a bearer token is a live personal access token, or an
    OAuth access token bound to ``WEBFETCH_OAUTH_RESOURCE`` whose grant is live."""

    async def verify_token(self, token: str) -> BearerToken | None:
        resource = conf.WEBFETCH_OAUTH_RESOURCE
        if token.startswith(TOKEN_PREFIX) or resource is None:
            row = await db(AccessToken.objects.authenticate, token)
        else:
            row = await db(_oauth_principal, token, resource)
        if row is None:
            return None
        return BearerToken(
            token="",  # the secret is not kept
            # The principal a session is bound to: the personal token, or the OAuth grant
            # (stable across refreshes: a refreshed token keeps its session).
            client_id=f"webfetch-token-{row.pk}",
            subject=str(row.user.pk),
            scopes=[],
            claims={"webfetch_token": row.pk},
        )


async def _authenticate(ctx: Context) -> AccessToken:
    request = ctx.request
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    if not isinstance(user, AuthenticatedUser):
        raise Unauthorized
    token_id = (user.access_token.claims or {}).get("webfetch_token")
    token = await db(_live_token, token_id)
    if token is None:
        raise Unauthorized
    return token


def _allowed_hosts() -> list[str]:
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # as Django's HttpRequest.get_host
    return allowed


class _CheckHost:
    """Refuse (400) a ``Host`` that Django's ``ALLOWED_HOSTS`` does not allow."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        host = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), "")
        domain, _port = split_domain_port(host)
        if not domain or not validate_host(domain, _allowed_hosts()):
            body = json.dumps({"error": "invalid_host", "error_description": "Bad Host."})
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self.app(scope, receive, send)


#: The lease of the session the current request opens (set around the SDK's admission).
_OPENING: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "webfetch_mcp_opening", default=None
)


def principals(scope: Scope) -> tuple[tuple[str, str], ...]:
    """The principals of an authenticated MCP request: its user and its token."""
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser):  # pragma: no cover - RequireAuth ran first
        return ()
    token = user.access_token
    return (
        ("user", str(token.subject)),
        ("token", str((token.claims or {}).get("webfetch_token"))),
    )


def too_many_open(exc: holds.TooManyOpen) -> JSONResponse:
    """The refusal of a hold over MCP's HTTP transport: ``429`` with ``Retry-After``."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": TOO_MANY_OPEN,
            "message": str(exc),
            "data": {"error": exc.code, **exc.as_dict()},
        },
    }
    return JSONResponse(
        body,
        status_code=429,
        headers={"Retry-After": str(exc.retry_after), "Cache-Control": "no-store"},
    )


@holds.surface("mcp_sessions", "mcp:initialize")
class SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, each session a hold of kind ``mcp_sessions`` for its
    token and its user (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._leases: dict[str, holds.Lease] = {}

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        try:
            async with super().run():
                yield
        finally:
            for lease in list(self._leases.values()):
                lease.release()
            self._leases.clear()

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        opens = not any(k == b"mcp-session-id" for k, _ in scope.get("headers", ()))
        if not opens:
            await super()._handle_stateful_request(scope, receive, send)
            return
        try:
            lease = holds.acquire("mcp_sessions", *principals(scope))
        except holds.TooManyOpen as exc:
            await too_many_open(exc)(scope, receive, send)
            return
        opening = [lease, False]
        reset = _OPENING.set(opening)
        try:
            await super()._handle_stateful_request(scope, receive, send)
        finally:
            _OPENING.reset(reset)
            if not opening[1]:
                lease.release()

    def _admit_session(self, requestor: Any) -> Any:
        transport = super()._admit_session(requestor)
        opening = _OPENING.get()
        if transport is not None and opening is not None:
            self._leases[str(transport.mcp_session_id)] = opening[0]
            opening[1] = True
        return transport

    async def _discard_session(self, session_id: str, transport: Any) -> None:
        lease = self._leases.pop(session_id, None)
        if lease is not None:
            lease.release()
        await super()._discard_session(session_id, transport)


def _resource_metadata_url() -> str | None:
    """RFC 9728 §5.1: where a client finds the authorization server (OAuth on only)."""
    resource = conf.WEBFETCH_OAUTH_RESOURCE
    if resource is None:
        return None
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"


def mcp_endpoint() -> tuple[ASGIApp, StreamableHTTPSessionManager]:
    """The endpoint (an ASGI app) and its session manager, whose ``run()`` must be entered
    for the process's lifetime (:func:`with_mcp` does it in the ASGI lifespan)."""
    server = build_server(_authenticate)
    manager = SessionManager(
        app=server,
        max_request_body_size=MAX_REQUEST_BYTES,
        # Idle sessions end in minutes; how many may be open is the door's (budgets.holds).
        session_idle_timeout=conf.WEBFETCH_MCP_SESSION_IDLE,
        max_sessions=None,
        # The Host header is checked against ALLOWED_HOSTS (below); an Origin cannot carry
        # the bearer token, so a browser page cannot use the endpoint on a user's behalf.
        security_settings=None,
    )
    endpoint = RequireAuthMiddleware(
        StreamableHTTPASGIApp(manager),
        required_scopes=[],
        resource_metadata_url=_resource_metadata_url(),  # type: ignore[arg-type]
    )
    app = AuthenticationMiddleware(endpoint, backend=BearerAuthBackend(TokenVerifier()))
    return _CheckHost(app), manager


class _Router:
    def __init__(self, django_app: ASGIApp, path: str) -> None:
        self.django_app = django_app
        self.path = "/" + path.strip("/")
        self.endpoint, self.manager = mcp_endpoint()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http" and scope["path"].rstrip("/") == self.path:
            await self.endpoint(scope, receive, send)
        else:
            await self.django_app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        try:
            async with self.manager.run():
                await send({"type": "lifespan.startup.complete"})
                message = await receive()
        except Exception as exc:
            await send({"type": "lifespan.startup.failed", "message": str(exc)[:200]})
            raise
        await send({"type": "lifespan.shutdown.complete"})


def with_mcp(django_app: ASGIApp, *, path: str = "/mcp") -> ASGIApp:
    """``django_app`` with the MCP endpoint at ``path`` (and the lifespan it needs)."""
    return _Router(django_app, path)
