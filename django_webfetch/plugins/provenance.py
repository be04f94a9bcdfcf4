"""Which installed distribution provides a plugin's entry point, found through
``importlib.metadata`` without importing anything of it (for the entry point the
registry loaded: ``registry.provider``).

A ``trusted`` instance records the distribution it was trusted for (name, version and a
digest of its ``RECORD``) when the operator turns trust on; trust holds only while the
distribution providing the entry point is that one (docs/plugins.rst, "Trusted
instances"; check W034).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["ENTRY_POINT_GROUP", "Provider", "installed_provider", "provider_of"]

ENTRY_POINT_GROUP = "django_webfetch.plugins"


class Provider(NamedTuple):
    """An installed distribution: its name, version and the SHA-256 of its ``RECORD``
    (empty when it has none: a directory put on ``sys.path`` by hand)."""

    name: str
    version: str
    record: str

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def provider_of(ep: Any) -> Provider | None:
    """The distribution of entry point ``ep`` (``None`` when it has none)."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    try:
        name = str(dist.metadata["Name"] or "")
        version = str(dist.version or "")
        record = dist.read_text("RECORD")
    except Exception:  # unreadable metadata: no distribution to trust
        return None
    if not name:
        return None
    digest = hashlib.sha256(record.encode()).hexdigest() if record is not None else ""
    return Provider(name[:200], version[:100], digest)


#: The registry's ``provider`` (set by ``apps.py``: the registry imports this module).
provider_lookup: Callable[[str], Provider | None] | None = None


def installed_provider(plugin: str) -> Provider | None:
    """The distribution of the entry point the registry serves plugin ``plugin`` from
    (``registry.provider``: the very entry point whose manifest and code it loaded, read
    one distribution at a time); ``None`` when no entry point may serve that name (or the
    app is not ready).  Never a fresh ``entry_points()`` look-up by name: that is another
    entry point than the one served when a manifest names another plugin, and one
    undecodable ``entry_points.txt`` makes it raise (tests/plugins/test_issue30_names.py)."""
    lookup = provider_lookup
    return lookup(plugin) if lookup is not None else None
