"""Fixtures of the budget tests: the run tests' tools and the assistant's scripted provider."""

from __future__ import annotations

from tests.assistant.conftest import (  # noqa: F401 - fixtures
    api,
    configure_provider,
    provider,
    provider_server,
)
from tests.runs.conftest import (  # noqa: F401 - fixtures
    EchoTool,
    approver,
    approver_factory,
    run_tools,
)
