"""Value types shared across the layers: no Django, no database, no service.

They sit below ``models/`` so that a row can turn its stored JSON back into a value without
importing the layer that produces it (DESIGN.md §1: models import no services):

- ``ToolResult``: what a tool returns (re-exported by ``django_webfetch.tools``, where tool
  authors import it from);
- ``PluginGrant``: the effective egress grant of one plugin instance (re-exported by
  ``django_webfetch.egress``, which turns it into an ``EgressPolicy``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django_webfetch.net.errors import EgressDenied, UnsupportedMediaType, WebFetchError
from django_webfetch.net.failures import describe_failure

__all__ = ["PluginGrant", "ToolResult"]


def _jsonable(value: Any) -> Any:
    # A round trip proves the value is JSON and leaves no shared mutable state behind.
    return json.loads(json.dumps(value, allow_nan=False))


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns to the assistant loop.

    ``content`` is text for the model; ``error`` a stable machine code (``None`` on
    success); ``meta`` JSON data for the run record and the UI (never server-chosen text).
    """

    content: str = ""
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):
            raise TypeError("ToolResult.content must be a string")
        if self.error is not None and not isinstance(self.error, str):
            raise TypeError("ToolResult.error must be a string or None")
        if not isinstance(self.meta, dict):
            raise TypeError("ToolResult.meta must be a dict")
        object.__setattr__(self, "meta", _jsonable(self.meta))

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"content": self.content, "error": self.error, "meta": copy.deepcopy(self.meta)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolResult:
        if not isinstance(data, Mapping):
            raise TypeError("a ToolResult dict is expected")
        return cls(
            content=data.get("content", ""),
            error=data.get("error"),
            meta=dict(data.get("meta") or {}),
        )

    @classmethod
    def failure(cls, code: str, message: str, **meta: Any) -> ToolResult:
        return cls(content=message, error=code, meta=meta)

    @classmethod
    def from_exception(cls, exc: WebFetchError) -> ToolResult:
        """A result naming only the rule or error code, never server text (DESIGN.md §6)."""
        if isinstance(exc, EgressDenied):
            return cls.failure(
                exc.code,
                f"The request was refused by the egress guard (rule: {exc.reason}).",
                reason=exc.reason,
            )
        if isinstance(exc, UnsupportedMediaType):
            # The refused type is the server's choice: it is never echoed (the audit log
            # records it); only the types we accept could be named.
            return cls.failure(exc.code, "The response has a media type that is not accepted.")
        if exc.failure:
            # What failed, in our fixed words (net.failures): never library or server text.
            return cls.failure(
                exc.code,
                f"The request failed ({exc.code}: {exc.failure}). {describe_failure(exc.failure)}",
                failure=exc.failure,
            )
        return cls.failure(exc.code, f"The request failed ({exc.code}).")


@dataclass(frozen=True)
class PluginGrant:
    """The effective egress grant of one plugin instance (DESIGN.md §8).

    ``hosts`` is already the intersection of what the plugin declares and what the operator
    granted (list-entry syntax, no ports).  ``allow_private`` names exact hosts of ``hosts``
    that may resolve to private addresses (never metadata).  An empty grant means no egress.
    """

    hosts: tuple[str, ...]
    label: str = ""
    allow_private: tuple[str, ...] = ()
