"""The tool interface: ``Tool``, ``ToolResult``, ``ToolContext`` and ``ToolApprovalRule``."""

from __future__ import annotations

import copy
import enum
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from django_webfetch.net.policy import Scope
from django_webfetch.values import ToolResult

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
    """What the approval interface needs from a call (a ``ToolInvocation``, or the durable
    ``ToolCall`` row of ``runs``)."""

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

    ``approved`` is set by the run service (``runs.execute``) once a human approved this call;
    ``run_tool`` refuses a call that needs approval without it.
    """

    user: Any = None
    call_id: str = ""
    approved: bool = False
    plugin_instance: Any = None
    #: The URLs the call's conversation showed (normalised: ``net.urlnorm``), for the
    #: composed-URL rule (``tools.approval.url_provenance``); ``None``: no conversation.
    seen_urls: frozenset[str] | None = None


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

    def canonical_arguments(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """The arguments as they are stored, checked and run (``runs.request_call`` calls
        this first).  A tool whose URL decides anything (provenance, the allowlist) writes
        it in its one canonical form here, so that what is compared is what is sent, never
        the model's spelling (issue 29, finding 7).  The default changes nothing."""
        return arguments

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
    4. where rule 2 skipped approval, a URL the model composed (``external_filtered``
       scope, a group with ``fetch_only_seen_urls``) still needs it (``tools.approval``).
    5. a call that reads a later part of a text kept for an earlier call (same tool, URL,
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
            if ToolApprovalRule.composed_url_requires_approval(tool, call, context):
                return True
            return tool.requires_approval(call, context) is not False
        except Exception:
            logger.exception("approval rule of tool %r failed; approval required", tool.name)
            return True

    @staticmethod
    def url_provenance(tool: Tool, call: ToolCallLike, context: ToolContext | None) -> str | None:
        """``seen`` / ``composed`` for the URL of a call in the ``external_filtered`` scope
        made in a conversation (``context.seen_urls``); ``None`` otherwise."""
        from .approval import COMPOSED, url_provenance

        if tool.scope is not Scope.EXTERNAL_FILTERED or context is None:
            return None
        if context.seen_urls is None:
            return None
        try:
            url = tool.preflight_url(call.arguments)
        except Exception:
            logger.exception("pre-flight URL of tool %r failed; counted as composed", tool.name)
            return COMPOSED
        return url_provenance(url, context.seen_urls)

    @staticmethod
    def composed_url_requires_approval(
        tool: Tool, call: ToolCallLike, context: ToolContext | None
    ) -> bool:
        """Rule 2's exception: a URL the model composed waits for a human although the
        group skips approval through its allowlist (``fetch_only_seen_urls``)."""
        from .approval import composed_url_requires_approval, tool_group

        provenance = ToolApprovalRule.url_provenance(tool, call, context)
        if provenance is None:
            return False
        return composed_url_requires_approval(tool_group(tool.group), provenance)

    @staticmethod
    def group_requires_approval(tool: Tool) -> bool:
        """The structural rule (2): from the group row, whatever the tool's code says."""
        from django_webfetch.models import EgressScope

        from .approval import group_requires_approval, has_allowlist, tool_group

        group = tool_group(tool.group)
        network = tool.scope is not Scope.NONE
        if group is not None:
            network = network or group.scope != EgressScope.NONE
        return group_requires_approval(group, network=network, granted=lambda: has_allowlist(group))
