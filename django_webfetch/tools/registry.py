"""The tool registry: built-ins, installed apps' ``webfetch_tools``, tool entry points and
the *sources* added from ``apps.py`` (the plugins' tools are one: this module never imports
``plugins/``, which sits above it, DESIGN.md §1).

Tools are offered per user (``tools_for_user``): a tool of a disabled or mis-declared group
and an admin-only tool for a non-superuser are never offered.  ``run_tool`` is the only way
the assistant loop executes a tool: it validates the arguments against the tool's JSON
Schema, enforces the approval rule and never lets an exception escape.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from importlib.metadata import entry_points
from typing import Any

from django.apps import apps
from django.db import InterfaceError, OperationalError
from django.utils.module_loading import import_string

from django_webfetch.net.errors import WebFetchError
from django_webfetch.net.policy import Scope
from django_webfetch.schemas import SchemaRefused, argument_errors, check_tool_schema

from .base import (
    TOOL_NAME_RE,
    Effect,
    Tool,
    ToolApprovalRule,
    ToolContext,
    ToolInvocation,
    ToolResult,
)

__all__ = [
    "BUILTIN_TOOLS",
    "ENTRY_POINT_GROUP",
    "SPEC_FORMATS",
    "ToolRegistry",
    "default_registry",
    "run_tool",
    "specs",
    "tools_for_user",
    "unencodable_arguments",
    "validate_arguments",
]

logger = logging.getLogger("django_webfetch.tools")

#: A source of tools added to a registry from the composition root (``apps.py``): called at
#: each load, it gives ``(tool, where it comes from)`` pairs, validated like any other tool.
ToolSource = Callable[[], Iterable[tuple[Any, str]]]
#: Narrows what is offered at each offer (``tools_for_user``): given the tools offered so
#: far, returns those still offered (it drops only its own source's tools).
OfferFilter = Callable[[list[Tool]], list[Tool]]

ENTRY_POINT_GROUP = "django_webfetch.tools"
SPEC_FORMATS = ("json_schema", "openai", "anthropic")
BUILTIN_TOOLS: tuple[str, ...] = (
    "django_webfetch.tools.fetch_external_url.FetchExternalUrl",
    "django_webfetch.tools.search_site.SearchSite",
    "django_webfetch.tools.probe_url.ProbeUrl",
    "django_webfetch.tools.read_source.ReadSource",
    "django_webfetch.tools.search_code.SearchCode",
    "django_webfetch.tools.get_last_exception.GetLastException",
)


def _instantiate(obj: Any) -> Tool:
    if isinstance(obj, str):
        obj = import_string(obj)
    if isinstance(obj, type) and issubclass(obj, Tool):
        obj = obj()
    if not isinstance(obj, Tool):
        raise TypeError(f"{obj!r} is not a Tool")
    return obj


#: Groups whose tools must all be admin-only (they send source and logs off-site).
ADMIN_ONLY_GROUPS = frozenset({"code"})
#: ``DataClass.SOURCE_AND_LOGS`` (not imported: the registry loads before the models).
SOURCE_AND_LOGS = "sourceAndLogs"


def validate_tool(tool: Tool) -> None:
    """Raise ``ValueError`` when a tool is malformed (it is then not registered)."""
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise ValueError(f"{name!r}: the name must match {TOOL_NAME_RE.pattern}")
    if not isinstance(getattr(tool, "group", None), str) or not tool.group:
        raise ValueError(f"{name!r}: no group")
    if not isinstance(getattr(tool, "description", None), str) or not tool.description:
        raise ValueError(f"{name!r}: no description")
    if not isinstance(tool.scope, Scope):
        raise ValueError(f"{name!r}: scope must be a net.policy.Scope")
    if not isinstance(tool.effect, Effect):
        raise ValueError(f"{name!r}: effect must be an Effect")
    if tool.scope is not Scope.NONE and tool.enabled_by_default:
        raise ValueError(f"{name!r}: a network tool cannot be enabled by default")
    if tool.group in ADMIN_ONLY_GROUPS and (not tool.requires_admin or tool.enabled_by_default):
        # The group sends this installation's source and logs to the LLM provider: every
        # tool in it, built-in or registered by another app, is admin-only and default-off.
        raise ValueError(
            f"{name!r}: a tool in group {tool.group!r} must be admin-only "
            "(requires_admin=True) and not enabled by default"
        )
    budget: Any = tool.time_budget
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0
    ):
        raise ValueError(f"{name!r}: time_budget must be a positive number of seconds or None")
    params: Any = tool.parameters
    if not isinstance(params, dict) or params.get("type") != "object":
        raise ValueError(f"{name!r}: parameters must be a JSON Schema of type object")
    try:
        check_tool_schema(params)  # local $ref only, patterns on RE2
    except SchemaRefused as exc:
        raise ValueError(f"{name!r}: parameters refused ({exc.reason}): {exc}") from exc


class ToolRegistry:
    """Thread-safe, loaded once on first use; ``reset()`` reloads (tests, plugin installs)."""

    def __init__(self, *, builtins: Iterable[str] = BUILTIN_TOOLS, discover: bool = True) -> None:
        self._builtins = tuple(builtins)
        self._discover = discover
        self._tools: dict[str, Tool] | None = None
        self._lock = threading.RLock()
        self._sources: dict[str, ToolSource] = {}
        self._filters: dict[str, OfferFilter] = {}
        #: Where each registered tool came from ("built-in", "app x", "plugin y").
        self._sources_of: dict[str, str] = {}
        self.problems: list[str] = []

    def add_source(
        self, name: str, source: ToolSource, *, offered: OfferFilter | None = None
    ) -> None:
        """Add (or replace) the source ``name``; it is read at the next load.

        ``apps.py`` adds the plugins' tools this way, after the built-ins, the apps and the
        entry points (first registration wins, so a source never shadows a built-in).
        ``offered`` narrows, at each offer, which of its tools are offered (a plugin's only
        once an instance of it is installed).
        """
        with self._lock:
            self._sources[name] = source
            if offered is None:
                self._filters.pop(name, None)
            else:
                self._filters[name] = offered
            self._tools = None

    # -- loading ------------------------------------------------------------------------

    def load(self) -> dict[str, Tool]:
        with self._lock:
            if self._tools is None:
                self._tools = {}
                self._sources_of = {}
                self.problems = []
                for path in self._builtins:
                    self._add(path, source="built-in")
                if self._discover:
                    for app_config in apps.get_app_configs():
                        for obj in getattr(app_config, "webfetch_tools", ()) or ():
                            self._add(obj, source=f"app {app_config.label}")
                    for ep in entry_points(group=ENTRY_POINT_GROUP):
                        self._add_entry_point(ep)
                    for source in self._sources.values():
                        for obj, where in source():
                            self._add(obj, source=where)
            return self._tools

    def _add_entry_point(self, ep: Any) -> None:
        try:
            loaded = ep.load()
        except Exception as exc:
            self._problem(f"entry point {ep.name!r} could not be loaded ({type(exc).__name__})")
            return
        objs = loaded() if callable(loaded) and not isinstance(loaded, type) else loaded
        if isinstance(objs, (Tool, type, str)):
            objs = [objs]
        try:
            items = list(objs)
        except TypeError:
            self._problem(f"entry point {ep.name!r} did not give tools")
            return
        for obj in items:
            self._add(obj, source=f"entry point {ep.name}")

    def _add(self, obj: Any, *, source: str) -> None:
        assert self._tools is not None
        try:
            tool = _instantiate(obj)
            validate_tool(tool)
        except Exception as exc:
            self._problem(f"from {source} rejected: {exc}")
            return
        if tool.name in self._tools:
            # First registration wins: built-ins load first, so a plugin cannot shadow them.
            self._problem(
                f"{tool.name!r} from {source} rejected (tool_name_taken): the name is taken "
                f"by {self._sources_of.get(tool.name, 'an earlier tool')}"
            )
            return
        self._tools[tool.name] = tool
        self._sources_of[tool.name] = source

    def _problem(self, message: str) -> None:
        logger.error("django_webfetch tool %s", message)
        self.problems.append(message)

    def register(self, obj: Any) -> Tool:
        """Register a tool (class, instance or dotted path); ``ValueError`` if rejected."""
        with self._lock:
            tools = self.load()
            tool = _instantiate(obj)
            validate_tool(tool)
            if tool.name in tools:
                raise ValueError(f"tool name {tool.name!r} is taken")
            tools[tool.name] = tool
            return tool

    def reset(self) -> None:
        with self._lock:
            self._tools = None
            self.problems = []

    # -- queries ------------------------------------------------------------------------

    def get(self, name: str) -> Tool | None:
        return self.load().get(name)

    def all(self) -> list[Tool]:
        return sorted(self.load().values(), key=lambda t: t.name)

    def tools_for_user(self, user: Any) -> list[Tool]:
        """The tools offered to ``user``.  Fails closed (no tools) if the DB is unreadable."""
        if user is None or not getattr(user, "is_authenticated", False):
            return []
        if not getattr(user, "is_active", False):
            return []
        from django_webfetch.models import ToolGroup

        try:
            groups = {g.slug: g for g in ToolGroup.objects.all()}
        except Exception:
            logger.exception("tool groups unreadable; no tools offered")
            return []
        is_admin = bool(getattr(user, "is_superuser", False))
        offered = []
        for tool in self.all():
            if tool.requires_admin and not is_admin:
                continue
            group = groups.get(tool.group)
            if (
                group is not None
                and getattr(group, "data_class", None) == SOURCE_AND_LOGS
                and not is_admin
            ):
                continue  # a group that sends source and logs is for admins, whatever the tool says
            if group is None:
                available = tool.enabled_by_default and tool.scope is Scope.NONE
            else:
                available = group.enabled and (
                    tool.scope is Scope.NONE or group.scope == tool.scope.value
                )
            if available:
                offered.append(tool)
        try:
            for narrow in list(self._filters.values()):
                offered = narrow(offered)
        except Exception:
            logger.exception("a tool source's offer filter failed; no tools offered")
            return []
        return offered

    def why_not_offered(self, user: Any, name: object) -> tuple[str, str]:
        """``(code, sentence)``: why ``name`` is not offered to ``user`` (in our words).

        ``no_such_tool``, ``admin_only``, ``tool_not_installed`` (a plugin's tool, no
        instance of the plugin), ``group_disabled``, ``group_scope`` (the group's scope is
        not the tool's), ``not_authenticated``.  Only what the user may know: the
        tool's group is named, nothing of its configuration.
        """
        if user is None or not getattr(user, "is_authenticated", False):
            return "not_authenticated", "Sign in to use tools."
        if not getattr(user, "is_active", False):
            return "not_authenticated", "This account is inactive."
        tool = self.get(name) if isinstance(name, str) else None
        if tool is None:
            return "no_such_tool", "There is no tool of that name."
        if tool.requires_admin and not getattr(user, "is_superuser", False):
            return "admin_only", "This tool is offered to administrators only."
        try:
            for narrow in list(self._filters.values()):
                if tool not in narrow([tool]):
                    return "tool_not_installed", "The tool's plugin is not installed here."
        except Exception:
            return "tool_not_offered", "This tool is not offered to you."
        from django_webfetch.models import ToolGroup

        group = ToolGroup.objects.filter(slug=tool.group).first()
        if group is None or not group.enabled:
            return "group_disabled", f"The tool's group {tool.group!r} is disabled."
        if tool.scope is not Scope.NONE and group.scope != tool.scope.value:
            return (
                "group_scope",
                f"The tool's group {tool.group!r} does not have the egress scope the tool needs.",
            )
        return "tool_not_offered", "This tool is not offered to you."

    def specs(self, tools: Iterable[Tool], format: str = "json_schema") -> list[dict[str, Any]]:
        if format not in SPEC_FORMATS:
            raise ValueError(f"unknown tool spec format {format!r}; use one of {SPEC_FORMATS}")
        return [tool.spec(format) for tool in tools]

    # -- running ------------------------------------------------------------------------

    def run(
        self,
        name: str,
        arguments: Any,
        *,
        user: Any,
        context: ToolContext | None = None,
        raise_database_errors: bool = False,
    ) -> ToolResult:
        """Run the tool; never raises, except, with ``raise_database_errors``, when the
        database is unavailable (``OperationalError``, ``InterfaceError``): a caller that
        can wait for it (``runs.execute``) does, instead of failing the call."""
        try:
            return self._run(name, arguments, user=user, context=context)
        except WebFetchError as exc:
            return ToolResult.from_exception(exc)
        except (OperationalError, InterfaceError):
            if raise_database_errors:
                raise
            logger.exception("tool %r failed", str(name)[:100])
            return ToolResult.failure("internal_error", "The tool failed unexpectedly.")
        except Exception:
            logger.exception("tool %r failed", str(name)[:100])
            return ToolResult.failure("internal_error", "The tool failed unexpectedly.")

    def _run(
        self, name: object, arguments: Any, *, user: Any, context: ToolContext | None
    ) -> ToolResult:
        tool = self.get(name) if isinstance(name, str) else None
        if tool is None:
            return ToolResult.failure("unknown_tool", "There is no tool of that name.")
        if tool not in self.tools_for_user(user):
            return ToolResult.failure("tool_unavailable", "This tool is not available.")
        invalid = validate_arguments(tool, arguments)
        if invalid is not None:
            return invalid
        context = replace(context, user=user) if context is not None else ToolContext(user=user)
        call = ToolInvocation(
            tool=tool.name, arguments=dict(arguments), user=user, call_id=context.call_id
        )
        if ToolApprovalRule.requires_approval(tool, call, context) and not context.approved:
            return ToolResult.failure(
                "approval_required",
                "This call needs a human approval before it can run.",
                preview=tool.approval_preview(call),
            )
        result = tool.execute(dict(arguments), context)
        if not isinstance(result, ToolResult):
            raise TypeError(f"tool {tool.name!r} returned {type(result).__name__}")
        return result


def validate_arguments(tool: Tool, arguments: Any) -> ToolResult | None:
    """``None`` when ``arguments`` match the tool's JSON Schema, else an ``invalid_arguments``
    result naming at most ten problems (paths and schema keywords, never the values)."""
    if not isinstance(arguments, Mapping):
        return ToolResult.failure("invalid_arguments", "The arguments must be an object.")
    unencodable = unencodable_arguments(arguments)
    if unencodable is not None:
        return unencodable
    errors = sorted(
        argument_errors(tool.parameters, arguments),
        key=lambda e: [str(p) for p in e.path],
    )
    if not errors:
        return None
    problems = [
        {"path": "/".join(str(p) for p in e.absolute_path), "problem": str(e.validator)}
        for e in errors[:10]
    ]
    return ToolResult.failure(
        "invalid_arguments",
        "The arguments do not match the tool's parameters: "
        + "; ".join(f"{p['path'] or '(root)'}: {p['problem']}" for p in problems),
        errors=problems,
    )


def unencodable_arguments(arguments: Mapping[str, Any]) -> ToolResult | None:
    """``None`` when every string of ``arguments`` (keys too) is valid Unicode, else an
    ``invalid_arguments`` result naming where the first lone UTF-16 surrogate is (never
    the value).  JSON's ``"\\ud800"`` escape decodes to one, which no UTF-8 writer takes:
    a plugin's process, a database, a pattern engine (issue 30, attack 16, finding 3).
    Walked with a stack of its own, never by recursion."""
    stack: list[tuple[Any, str]] = [(arguments, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _lone_surrogate(item):
                return _surrogate_at(where)
        elif isinstance(item, Mapping):
            for key, value in item.items():
                label = f"{where}/{_label(key)}" if where else _label(key)
                if isinstance(key, str) and _lone_surrogate(key):
                    return _surrogate_at(label)
                stack.append((value, label))
        elif isinstance(item, (list, tuple)):
            stack.extend((value, f"{where}/{index}") for index, value in enumerate(item))
    return None


def _lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _label(key: object) -> str:
    return str(key)[:64].encode("ascii", "backslashreplace").decode("ascii")


def _surrogate_at(where: str) -> ToolResult:
    problems = [{"path": where, "problem": "lone_surrogate"}]
    return ToolResult.failure(
        "invalid_arguments",
        f"The arguments hold text that is not valid Unicode (a lone surrogate) at "
        f"{where or '(root)'}.",
        errors=problems,
    )


default_registry = ToolRegistry()


def tools_for_user(user: Any) -> list[Tool]:
    return default_registry.tools_for_user(user)


def specs(tools_or_user: Any, format: str = "json_schema") -> list[dict[str, Any]]:
    """Tool specs for a list of tools, or for the tools offered to a user."""
    if isinstance(tools_or_user, (list, tuple)):
        tools = list(tools_or_user)
    else:
        tools = default_registry.tools_for_user(tools_or_user)
    return default_registry.specs(tools, format)


def run_tool(
    name: str, arguments: Any, *, user: Any, context: ToolContext | None = None
) -> ToolResult:
    """Run one tool call for ``user``.  Never raises: errors come back as ``ToolResult``."""
    return default_registry.run(name, arguments, user=user, context=context)
