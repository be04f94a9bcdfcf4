"""Both ways to wait, one set of cases: a test that takes ``flavour`` runs once blocking
and once on an event loop (``net.steps``: the same rules, driven two ways)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from django_webfetch.net.guard import UrlGuard
from django_webfetch.net.guarded import (
    AsyncGuardedTransport,
    GuardedTransport,
    guarded_async_client,
    guarded_client,
)
from django_webfetch.net.resolve import DnsResolver, Resolution


@pytest.fixture(params=["sync", "async"])
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class _Blocking:
    """An async httpx client used through a sync-looking face: each call runs to its end
    on a private event loop (the body read in full), so a sync test runs unchanged."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._loop = asyncio.new_event_loop()
        self._client = client

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def request(self, method: str, url: Any, **kwargs: Any) -> httpx.Response:
        async def call() -> httpx.Response:
            response = await self._client.request(method, url, **kwargs)
            await response.aread()
            return response

        return self._run(call())

    def get(self, url: Any, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: Any, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def close(self) -> None:
        try:
            self._run(self._client.aclose())
        finally:
            self._loop.close()

    def __enter__(self) -> _Blocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def make_client(flavour: str) -> Any:
    """``guarded_client`` or ``guarded_async_client`` (behind ``_Blocking``)."""
    if flavour == "sync":
        return guarded_client
    return lambda *args, **kwargs: _Blocking(guarded_async_client(*args, **kwargs))


@pytest.fixture
def make_transport_client(flavour: str) -> Any:
    """A plain httpx client (``follow_redirects`` and all) on either guarded transport."""

    def build(policy: Any, **kwargs: Any) -> Any:
        client_kwargs = {k: kwargs.pop(k) for k in ("follow_redirects",) if k in kwargs}
        if flavour == "sync":
            return httpx.Client(transport=GuardedTransport(policy, **kwargs), **client_kwargs)
        transport = AsyncGuardedTransport(policy, **kwargs)
        return _Blocking(httpx.AsyncClient(transport=transport, **client_kwargs))

    return build


@pytest.fixture
def lookup(flavour: str) -> Any:
    """``resolver.resolve`` or ``resolver.resolve_async`` (on a fresh event loop)."""

    def run(resolver: DnsResolver, name: str, *, timeout: float) -> Resolution:
        if flavour == "sync":
            return resolver.resolve(name, timeout=timeout)
        return asyncio.run(resolver.resolve_async(name, timeout=timeout))

    # A test's own DNS server binds a fixed port: each flavour its own (they run at once).
    run.offset = 0 if flavour == "sync" else 100  # type: ignore[attr-defined]
    return run


@pytest.fixture
def check(flavour: str) -> Any:
    """``guard.check`` or ``guard.check_async`` (on a fresh event loop)."""

    def run(guard: UrlGuard, url: str, policy: Any, **kwargs: Any) -> Any:
        if flavour == "sync":
            return guard.check(url, policy, **kwargs)
        return asyncio.run(guard.check_async(url, policy, **kwargs))

    return run
