"""The guarded client in httpx2, for SDKs built on it (openai >= 3, anthropic >= 2).

``guarded_httpx2_client(inner)`` is an ``httpx2.AsyncClient`` whose every request is sent
by ``inner`` (a ``guarded_async_client``): the same guard, pin, bounds and records.  Like
the httpx clients it keeps the caller's URL string for the guard (``net.rawurl``) before
httpx2 parses it, forwards the response headers as the bytes the server sent (never
re-encoded), and renames every foreign exception through the one table
(``net.foreign``), httpx2's included.

An SDK that hands over a URL it already parsed (an ``httpx2.URL`` built from its
``base_url``) has no string left to keep: the operator's ``base_url`` is then the string
to check, before the SDK is built.
"""

from __future__ import annotations

from typing import Any

import httpx

from .foreign import foreign_errors
from .guarded import AsyncGuardedClient
from .rawurl import CHECKED_URL, RAW_URL, keep_built, mark_follow, on_redirect

__all__ = ["guarded_httpx2_client"]

#: Framing the bridge re-does: the body is handed over whole and already decoded.
_FRAMING = (b"content-encoding", b"content-length", b"transfer-encoding")


def guarded_httpx2_client(inner: AsyncGuardedClient, *, timeout: float) -> Any:
    """An ``httpx2.AsyncClient`` on ``inner``: no redirects, no environment."""
    import httpx2

    class Bridge(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: Any) -> Any:
            body = await request.aread()
            raw = request.extensions.get(RAW_URL)
            forwarded = httpx.Request(
                request.method,
                str(request.url),
                headers=list(request.headers.raw),
                content=body,
                extensions={RAW_URL: raw} if isinstance(raw, str) else {},
            )
            response = await inner.send(forwarded, follow_redirects=False)
            try:
                content = await response.aread()
            finally:
                await response.aclose()
            headers = [(k, v) for k, v in response.headers.raw if k.lower() not in _FRAMING]
            return httpx2.Response(
                response.status_code,
                headers=headers,
                content=content,
                request=request,
                extensions={CHECKED_URL: response.extensions.get(CHECKED_URL)},
            )

        async def aclose(self) -> None:
            await inner.aclose()

    class Client(httpx2.AsyncClient):
        def build_request(self, method: str, url: Any, **kwargs: Any) -> Any:
            build = super().build_request
            unbuildable = (httpx2.InvalidURL, httpx2.UnsupportedProtocol, UnicodeError)
            return keep_built(
                lambda: build(method, url, **kwargs), url, unbuildable, inner.refuse_unbuildable
            )

        async def send(self, request: Any, **kwargs: Any) -> Any:
            mark_follow(request, kwargs.get("follow_redirects"), self.follow_redirects)
            with foreign_errors():
                return await super().send(request, **kwargs)

    async def on_response(response: Any) -> None:
        on_redirect(response, inner.refuse_redirect)

    return Client(
        transport=Bridge(),
        follow_redirects=False,
        trust_env=False,
        timeout=timeout,
        event_hooks={"response": [on_response]},
    )
