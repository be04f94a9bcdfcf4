"""The guarded HTTP client a provider's SDK is given: every request through the egress guard
(``net/guarded.py``), in the HTTP library the SDK is built on (httpx, or httpx2)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx

__all__ = [
    "MAX_PROVIDER_RESPONSE_BYTES",
    "SELF_HOSTED_NOTE",
    "provider_client",
    "sdk_http_client",
    "usage_dict",
]

#: A provider answer larger than this is refused (``provider_response_too_large``).
MAX_PROVIDER_RESPONSE_BYTES = 2 * 1024 * 1024


def provider_client(
    policy: Any, *, observer: Callable[[Any], None] | None, timeout: float
) -> httpx.AsyncClient:
    """The SDK's ``httpx.AsyncClient``: on the guarded transport of ``net/guarded.py``, so the
    guard checks and pins every request (no redirects, no proxy environment)."""
    from django_webfetch.net.guarded import guarded_async_client

    return guarded_async_client(
        policy,
        observer=_noting_exemption(policy, observer),
        max_response_bytes=MAX_PROVIDER_RESPONSE_BYTES,
        timeout=timeout,
    )


#: In the audit log of every request that used an endpoint's private-address exemption.
SELF_HOSTED_NOTE = "self-hosted endpoint (the operator's private-address exemption)"


def _noting_exemption(
    policy: Any, observer: Callable[[Any], None] | None
) -> Callable[[Any], None] | None:
    """``observer``, with the exemption named on each event of an exempted host: the audit
    log says which requests rode on the operator's decision."""
    exempted = frozenset(getattr(policy, "allow_private_hosts", ()) or ())
    if observer is None or not exempted:
        return observer

    def note(event: Any) -> None:
        if getattr(event, "url_host", None) in exempted and event.decision != "failed":
            detail = getattr(event, "detail", "")
            event = replace(
                event, detail=f"{detail}; {SELF_HOSTED_NOTE}" if detail else SELF_HOSTED_NOTE
            )
        observer(event)

    return note


def sdk_http_client(sdk: str, client: httpx.AsyncClient, timeout: float) -> Any:
    """The guarded client in the HTTP library the SDK is built on (httpx, or httpx2 for
    openai >= 3 / anthropic >= 2)."""
    import importlib

    try:
        base = importlib.import_module(f"{sdk}._base_client")
    except ImportError:  # pragma: no cover - depends on the SDK's layout
        return client
    if "httpx2" in vars(base):
        from django_webfetch.net.bridge import guarded_httpx2_client
        from django_webfetch.net.guarded import AsyncGuardedClient

        if not isinstance(client, AsyncGuardedClient):
            # The bridge carries the guard's client only: nothing else reaches a provider.
            raise TypeError("the provider's client must be the guarded client")
        return guarded_httpx2_client(client, timeout=timeout)
    return client


def usage_dict(usage: Any) -> dict[str, int]:
    result: dict[str, int] = {}
    for name in ("input_tokens", "output_tokens"):
        value = getattr(usage, name, None)
        if isinstance(value, int):
            result[name] = value
    return result
