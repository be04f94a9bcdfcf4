"""Tool plugins from other packages, and their egress authority (DESIGN.md §8).

A plugin declares destinations in its manifest (a request, never a grant); an operator
grants destinations per ``PluginInstance``; the plugin reaches exactly the intersection,
re-read from the database on every request, through the host-owned client
(``PluginHandle.http``) and nothing else.  See docs/plugins.rst.
"""

from __future__ import annotations

from .manifest import Manifest, ManifestError, ToolSpec, parse_manifest
from .registry import ENTRY_POINT_GROUP

__all__ = ["ENTRY_POINT_GROUP", "Manifest", "ManifestError", "ToolSpec", "parse_manifest"]
