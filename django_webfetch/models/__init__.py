"""The app's models; import them from here."""

from __future__ import annotations

from django_webfetch.assistant.models import AssistantRun, Conversation, Message, RunEvent, RunState
from django_webfetch.budgets.models import Budget, BudgetUsage
from django_webfetch.plugins.models import PluginInstance

from .calls import CallState, RunOrigin, ToolCall
from .events import Decision, EgressEvent
from .hosts import ConfiguredEndpoint, HostListEntry, ListKind, SiteHost
from .operations import OperationsOverview
from .scopes import DATA_CLASS_NOTICES, DataClass, EgressScope, ToolGroup
from .texts import StoredText
from .tokens import AccessToken, TokenEvent, TokenKind

__all__ = [
    "DATA_CLASS_NOTICES",
    "AccessToken",
    "AssistantRun",
    "Budget",
    "BudgetUsage",
    "CallState",
    "ConfiguredEndpoint",
    "Conversation",
    "DataClass",
    "Decision",
    "EgressEvent",
    "EgressScope",
    "HostListEntry",
    "ListKind",
    "Message",
    "OperationsOverview",
    "PluginInstance",
    "RunEvent",
    "RunOrigin",
    "RunState",
    "SiteHost",
    "StoredText",
    "TokenEvent",
    "TokenKind",
    "ToolCall",
    "ToolGroup",
]
