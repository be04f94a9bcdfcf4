"""Fixtures of the run tests: test tools, users with the approval permission, Redis,
Celery workers and a throwaway PostgreSQL cluster (the last three in ``tests/runs/infra``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import pytest

from django_webfetch.net.policy import Scope
from django_webfetch.tools import Effect, Tool, ToolCallLike, ToolContext, ToolResult


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "postgres: needs initdb/postgres (a throwaway PostgreSQL cluster)"
    )
    config.addinivalue_line("markers", "worker: starts real Celery worker processes")


from .infra import *  # noqa: E402,F403 - the Redis, worker and PostgreSQL fixtures


class EchoTool(Tool):
    """Echoes its text.  ``needs_approval`` is flipped by tests."""

    name = "runs_echo"
    group = "runs-test"
    scope = Scope.NONE
    effect = Effect.READ
    enabled_by_default = True
    description = "Echo a text (run tests)."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 100}},
        "required": ["text"],
        "additionalProperties": False,
    }
    needs_approval: ClassVar[bool] = True
    executed: ClassVar[list[Mapping[str, Any]]] = []

    def requires_approval(self, call: ToolCallLike, context: ToolContext | None = None) -> bool:
        return type(self).needs_approval

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        type(self).executed.append(dict(arguments))
        if arguments["text"] == "refuse":
            return ToolResult.failure("refused_by_tool", "The tool refused.")
        if arguments["text"] == "explode":
            raise RuntimeError("boom")
        return ToolResult(content=f"echo: {arguments['text']}", meta={"call": context.call_id})


class WriteTool(EchoTool):
    """A write: always approved by a human, whatever its own rule says."""

    name = "runs_write"
    effect = Effect.WRITE
    needs_approval = False
    description = "Write something (run tests)."


class AdminTool(EchoTool):
    name = "runs_admin_only"
    requires_admin = True
    description = "Admin-only echo (run tests)."


@pytest.fixture
def run_tools(tool_registry: Any) -> Iterator[Any]:
    EchoTool.needs_approval = True
    EchoTool.executed = []
    for tool in (EchoTool, WriteTool, AdminTool):
        tool_registry.register(tool)
    yield tool_registry
    EchoTool.needs_approval = True
    EchoTool.executed = []


@pytest.fixture
def approver_factory(user_factory: Callable[..., Any]) -> Callable[..., Any]:
    def make(**kwargs: Any) -> Any:
        from django.contrib.auth.models import Permission

        user = user_factory(staff=True, **kwargs)
        user.user_permissions.add(
            Permission.objects.get(
                codename="approve_toolcall", content_type__app_label="django_webfetch"
            )
        )
        # Drop the cached permissions.
        from django.contrib.auth import get_user_model

        return get_user_model().objects.get(pk=user.pk)

    return make


@pytest.fixture
def approver(approver_factory: Callable[..., Any]) -> Any:
    return approver_factory(username="approver")
