"""Which installed distribution provides a plugin's entry point, found through
``importlib.metadata`` without importing anything of it.

A ``trusted`` instance records the distribution it was trusted for (name, version and a
digest of its ``RECORD``) when the operator turns trust on; trust holds only while the
distribution providing the entry point is that one (docs/plugins.rst, "Trusted
instances"; check W034).
"""

from __future__ import annotations

import hashlib
from importlib.metadata import entry_points
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


def installed_provider(plugin: str) -> Provider | None:
    """The distribution providing entry point ``plugin`` now; ``None`` when none does or
    more than one does (the registry refuses a name claimed twice)."""
    found = list(entry_points(group=ENTRY_POINT_GROUP, name=plugin))
    if len(found) != 1:
        return None
    return provider_of(found[0])
