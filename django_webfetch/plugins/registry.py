"""Installed plugins: the manifests behind the ``django_webfetch.plugins`` entry points.

Loaded once per process (a package upgrade needs a restart to change the code anyway) and
reloaded by ``reset()``.  A manifest that fails validation refuses the whole plugin: none
of its tools is registered and the problem is reported by system check
``django_webfetch.E030``.
"""

from __future__ import annotations

import logging
import threading
from importlib.metadata import entry_points
from typing import Any

from .manifest import Manifest, ManifestError, parse_manifest

__all__ = ["ENTRY_POINT_GROUP", "get_manifest", "load", "manifests", "problems", "reset"]

logger = logging.getLogger("django_webfetch.plugins")

ENTRY_POINT_GROUP = "django_webfetch.plugins"

_lock = threading.RLock()
_manifests: dict[str, Manifest] | None = None
_problems: list[str] = []


def _load_entry_point(ep: Any) -> Manifest:
    try:
        loaded = ep.load()
    except Exception as exc:
        raise ManifestError(
            "manifest_load", f"entry point {ep.name!r} could not be loaded ({type(exc).__name__})"
        ) from exc
    return parse_manifest(loaded)


def _origin(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    package = getattr(dist, "name", None) or "?"
    return f"{package}:{ep.name}"


def load() -> dict[str, Manifest]:
    global _manifests
    with _lock:
        if _manifests is None:
            claims: dict[str, list[tuple[str, Manifest]]] = {}
            _problems.clear()
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                try:
                    manifest = _load_entry_point(ep)
                except ManifestError as exc:
                    message = f"plugin entry point {ep.name!r} refused ({exc.reason}): {exc}"
                    logger.error("django_webfetch %s", message)
                    _problems.append(message)
                    continue
                claims.setdefault(manifest.name, []).append((_origin(ep), manifest))
            found: dict[str, Manifest] = {}
            for name, claimed in claims.items():
                if len(claimed) > 1:
                    # The instances of a name (its grant, its secrets) belong to no package
                    # when two claim it: which one the import system finds first is no
                    # decision (a dependency could take over an operator's plugin).
                    origins = ", ".join(sorted(origin for origin, _ in claimed))
                    message = (
                        f"plugin {name!r} is claimed by more than one entry point ({origins}); "
                        "all are refused"
                    )
                    logger.error("django_webfetch %s", message)
                    _problems.append(message)
                    continue
                found[name] = claimed[0][1]
            _manifests = found
        return _manifests


def manifests() -> list[Manifest]:
    return sorted(load().values(), key=lambda m: m.name)


def get_manifest(name: str) -> Manifest | None:
    return load().get(name)


def problems() -> list[str]:
    load()
    return list(_problems)


def reset() -> None:
    global _manifests
    with _lock:
        _manifests = None
        _problems.clear()
