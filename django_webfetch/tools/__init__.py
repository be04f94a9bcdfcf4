"""Assistant tools: the interface, the registry and the built-in network tools."""

from __future__ import annotations

from .base import (
    Effect,
    Tool,
    ToolApprovalRule,
    ToolCallLike,
    ToolContext,
    ToolInvocation,
    ToolResult,
)
from .registry import ToolRegistry, default_registry, run_tool, specs, tools_for_user

__all__ = [
    "Effect",
    "Tool",
    "ToolApprovalRule",
    "ToolCallLike",
    "ToolContext",
    "ToolInvocation",
    "ToolRegistry",
    "ToolResult",
    "default_registry",
    "run_tool",
    "specs",
    "tools_for_user",
]
