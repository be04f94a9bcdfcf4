"""Fixtures of the assistant tests: the run tests' users, tools, Redis and workers, and the
scripted LLM provider server (``provider.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.runs.conftest import (  # noqa: F401 - fixtures
    AdminTool,
    EchoTool,
    WriteTool,
    approver,
    approver_factory,
    run_tools,
)
from tests.runs.infra import *  # noqa: F403 - the Redis and worker fixtures

from .provider import HOST, PORT, ProviderServer

PROVIDER_ADDRESS = "11.0.0.20"
_server: ProviderServer | None = None


@pytest.fixture(scope="session")
def provider_server(lab_session: Any) -> Iterator[ProviderServer]:
    global _server
    if _server is None:
        _server = ProviderServer(PROVIDER_ADDRESS, lab_session.tls.context)
    yield _server


@pytest.fixture
def configure_provider(
    lab_settings: Any, provider_server: ProviderServer, endpoint_factory: Any, group_factory: Any
) -> Callable[..., Any]:
    """Point the ``assistant`` group at the scripted provider (``kind``: openai/anthropic)."""
    provider_server.reset()
    lab_settings.dns.set(HOST, a=[PROVIDER_ADDRESS])

    def configure(kind: str = "openai", **fields: Any) -> Any:
        group_factory("assistant", enabled=True, scope="configured_endpoint")
        base = (
            f"https://{HOST}:{PORT}/openai/v1"
            if kind != "anthropic"
            else f"https://{HOST}:{PORT}/anthropic"
        )
        fields.setdefault("auth_header_value", "sk-lab-secret")
        return endpoint_factory(
            base, group="assistant", provider_kind=kind, model_name="lab-model", **fields
        )

    return configure


@pytest.fixture
def provider(
    configure_provider: Callable[..., Any], provider_server: ProviderServer, request: Any
) -> ProviderServer:
    kind = getattr(request, "param", "openai")
    configure_provider(kind)
    provider_server.kind = kind  # type: ignore[attr-defined]
    return provider_server


@pytest.fixture
def web(lab_settings: Any, group_factory: Any) -> Any:
    """``web`` enabled (every call waits for approval); the lab answers for its host."""
    group_factory("web", enabled=True)
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[2]])
    return lab_settings


@pytest.fixture
def api(editor: Any, settings: Any) -> Any:
    """An API client logged in as the editor (the run tests' URLs)."""
    from rest_framework.test import APIClient

    settings.ROOT_URLCONF = "tests.runs.urls"
    client = APIClient()
    client.force_login(editor)
    return client


@pytest.fixture
def hold() -> Iterator[threading.Event]:
    """The hung requests' release (set at the end whatever happens: no thread left
    hanging in the provider server)."""
    event = threading.Event()
    yield event
    event.set()
