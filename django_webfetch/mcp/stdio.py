"""The MCP stdio transport (``manage.py webfetch mcp``), for local clients.

The process serves one user: the one whose personal access token it was started with
(``WEBFETCH_MCP_TOKEN``).  The token is looked up again on every request, so revoking it (or
deactivating the user) stops the session at its next request.
"""

from __future__ import annotations

import anyio
from mcp.server.stdio import stdio_server

from django_webfetch.models import AccessToken

from .server import Context, Unauthorized, build_server, db

__all__ = ["serve"]


def serve(secret: str) -> None:
    """Serve MCP on stdin/stdout until the client closes them."""

    async def authenticate(ctx: Context) -> AccessToken:
        token = await db(AccessToken.objects.authenticate, secret)
        if token is None:
            raise Unauthorized
        return token

    async def main() -> None:
        server = build_server(authenticate)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
