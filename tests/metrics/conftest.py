"""Fixtures of the metrics tests: the run tests' tools and the assistant's scripted provider."""

from __future__ import annotations

import pytest

from tests.assistant.conftest import (  # noqa: F401 - fixtures
    configure_provider,
    provider,
    provider_server,
)
from tests.runs.conftest import EchoTool, approver, approver_factory, run_tools  # noqa: F401


@pytest.fixture
def web(lab_settings, group_factory):
    """The ``web`` group enabled; a public and a private lab host."""
    group_factory("web", enabled=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    lab_settings.dns.set("intranet.lab.example", a=[lab_settings.PRIVATE[0]])
    return lab_settings
