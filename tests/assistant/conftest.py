"""Fixtures of the assistant tests: the run tests' users, tools, Redis and workers, and the
scripted LLM provider server (``provider.py``)."""

from __future__ import annotations

from tests.runs.conftest import (  # noqa: F401 - fixtures
    AdminTool,
    EchoTool,
    WriteTool,
    approver,
    approver_factory,
    run_tools,
)
from tests.runs.infra import *  # noqa: F403 - the Redis and worker fixtures
