"""The tool interface: ``Tool``, ``ToolResult``, ``ToolContext`` and ``ToolApprovalRule``."""

from __future__ import annotations

import copy
import enum
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from django_webfetch.net.errors import EgressDenied, UnsupportedMediaType, WebFetchError
from django_webfetch.net.failures import describe_failure
from django_webfetch.net.policy import Scope

__all__ = [
    "TOOL_NAME_RE",
    "Effect",
    "Tool",
    "ToolApprovalRule",
    "ToolCallLike",
    "ToolContext",
    "ToolInvocation",
    "ToolResult",
]

logger = logging.getLogger("django_webfetch.tools")

#: What OpenAI and Anthropic both accept as a tool name.
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class Effect(str, enum.Enum):
    READ = "read"
    WRITE = "write"


@runtime_checkable
class ToolCallLike(Protocol):
    """What the approval interface needs from a call (a ``ToolInvocation``, or issue 5's
    durable ``ToolCall`` row)."""

    @property
    def arguments(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class ToolInvocation:
    """A call as a tool sees it before it runs."""

    tool: str
    arguments: Mapping[str, Any]
    user: Any = None
    call_id: str = ""


@dataclass(frozen=True)
class ToolContext:
    """Who runs a call and under which conditions.

    ``approved`` is set by the run service (issue 5) once a human approved this call;
    ``run_tool`` refuses a call that needs approval without it.
    """

    user: Any = None
    call_id: str = ""
    approved: bool = False
    plugin_instance: Any = None


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


class Tool:
    """Base class of every assistant tool.

    Subclasses set the class attributes and implement ``execute``.  ``scope`` is the
    egress scope the tool needs: its group must have exactly that scope, or the tool is not
    offered and gets no egress.
    """

    name: ClassVar[str]
    group: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    scope: ClassVar[Scope] = Scope.NONE
    effect: ClassVar[Effect] = Effect.READ
    requires_admin: ClassVar[bool] = False
    #: Offered when its group has no ``ToolGroup`` row.  Always False for network tools.
    enabled_by_default: ClassVar[bool] = False
    #: Seconds: this tool's whole-fetch budget, lowered from the global ``WEBFETCH_TIMEOUT``
    #: (never raised past it).  ``None``: the global budget.
    time_budget: ClassVar[float | None] = None

    def requires_approval(self, call: ToolCallLike, context: ToolContext | None = None) -> bool:
        """Does this call need a human approval?  (Write effects always do; see
        ``ToolApprovalRule``.)"""
        return False

    def preflight_url(self, arguments: Mapping[str, Any]) -> str | None:
        """The URL this call would request first, for the guard's pre-flight check when the
        call is requested (DESIGN.md §7); ``None``: nothing to check before it runs."""
        return None

    def approval_preview(self, call: ToolCallLike) -> dict[str, Any]:
        """What the approval card shows (JSON)."""
        return {"tool": self.name, "group": self.group, "arguments": dict(call.arguments)}

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        raise NotImplementedError

    # -- specs --------------------------------------------------------------------------

    def spec(self, format: str = "json_schema") -> dict[str, Any]:
        parameters = copy.deepcopy(self.parameters)
        if format == "json_schema":
            return {"name": self.name, "description": self.description, "parameters": parameters}
        if format == "openai":
            return {
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description,
                    "parameters": parameters,
                },
            }
        if format == "anthropic":
            return {"name": self.name, "description": self.description, "input_schema": parameters}
        raise ValueError(f"unknown tool spec format {format!r}")

    def __repr__(self) -> str:
        return f"<Tool {getattr(self, 'name', '?')}>"


class ToolApprovalRule:
    """Decides whether a call waits for a human (DESIGN.md §7).

    Decided by the tool's *group*, not by the tool's own code:

    1. a write effect always needs approval; nothing a tool or an operator configures can
       lift it;
    2. a tool whose group has a network scope (or, without a group row, a tool that declares
       one) needs approval, unless that group's ``skip_approval_with_allowlist`` is on AND
       its allowlist is not empty;
    3. a tool's own ``requires_approval`` can only add approval, never remove it;
    4. a call that reads a later part of a text kept for an earlier call (same tool, URL,
       conversation and user, within ``WEBFETCH_STORED_TEXT_TTL``; ``tools/paging.py``)
       makes no request: it needs no new approval.

    Any error on the way (an unreadable group, a failing tool rule) means approval.
    """

    @staticmethod
    def requires_approval(
        tool: Tool, call: ToolCallLike, context: ToolContext | None = None
    ) -> bool:
        if tool.effect is not Effect.READ:
            return True
        try:
            from .paging import reads_stored_part

            if reads_stored_part(tool, call.arguments, context):
                return False
            if ToolApprovalRule.group_requires_approval(tool):
                return True
            return tool.requires_approval(call, context) is not False
        except Exception:
            logger.exception("approval rule of tool %r failed; approval required", tool.name)
            return True

    @staticmethod
    def group_requires_approval(tool: Tool) -> bool:
        """The structural rule (2): from the group row, whatever the tool's code says."""
        from django_webfetch.models import EgressScope, HostListEntry, ListKind, ToolGroup

        group = ToolGroup.objects.filter(slug=tool.group).first()
        if group is None:
            return tool.scope is not Scope.NONE
        network = group.scope != EgressScope.NONE or tool.scope is not Scope.NONE
        if not network:
            return False
        if not group.skip_approval_with_allowlist:
            return True
        return not HostListEntry.objects.filter(group=group, list=ListKind.ALLOW).exists()
