"""What an MCP client is told: :class:`Answer` (no MCP types; ``server.py`` converts)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Answer"]


@dataclass(frozen=True)
class Answer:
    """``text`` is the tool's fenced result or our own words; ``data`` a small structured
    part (the call id, its state, the error code): never server-chosen text."""

    text: str
    is_error: bool = False
    data: dict[str, Any] = field(default_factory=dict)
