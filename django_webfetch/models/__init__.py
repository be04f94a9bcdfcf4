"""The app's models; import them from here."""

from __future__ import annotations

from .events import Decision, EgressEvent
from .hosts import ConfiguredEndpoint, HostListEntry, ListKind, SiteHost
from .scopes import DataClass, EgressScope, ToolGroup

__all__ = [
    "ConfiguredEndpoint",
    "DataClass",
    "Decision",
    "EgressEvent",
    "EgressScope",
    "HostListEntry",
    "ListKind",
    "SiteHost",
    "ToolGroup",
]
