"""Tool plugins from other packages, and their egress authority (DESIGN.md §8).

A plugin declares destinations in its manifest (a request, never a grant); an operator
grants destinations per ``PluginInstance``; the plugin reaches exactly the intersection,
re-read from the database on every request, through the host-owned client
(``PluginHandle.http``) and nothing else.  See docs/plugins.rst.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django_webfetch.exports import export, listing

if TYPE_CHECKING:
    from .manifest import Manifest, ManifestError, ToolSpec, parse_manifest
    from .registry import ENTRY_POINT_GROUP

#: Where each name is defined, imported at its first use: the plugin process imports
#: ``plugins.sandbox`` and ``plugins.runtime`` only, never the registry or the manifest's
#: validators (jsonschema, httpx, dnspython), which took most of its start.
_EXPORTS = {
    "ENTRY_POINT_GROUP": "registry",
    "Manifest": "manifest",
    "ManifestError": "manifest",
    "ToolSpec": "manifest",
    "parse_manifest": "manifest",
}


def __getattr__(name: str) -> Any:
    return export(name, _EXPORTS, globals())


def __dir__() -> list[str]:
    return listing(_EXPORTS, globals())


__all__ = ["ENTRY_POINT_GROUP", "Manifest", "ManifestError", "ToolSpec", "parse_manifest"]
