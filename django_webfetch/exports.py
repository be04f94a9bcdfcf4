"""A package's names imported at their first use (PEP 562), for package ``__init__``
modules that only re-export: importing one module of the package (the plugin process
imports ``net.errors`` and ``plugins.sandbox``) then imports none of the others and their
dependencies.  Standard library only: the plugin process imports it."""

from __future__ import annotations

import importlib
from typing import Any


def export(name: str, exports: dict[str, str], namespace: dict[str, Any]) -> Any:
    """Name ``name`` of the package whose ``namespace`` (its ``globals()``) and ``exports``
    (name: the submodule defining it) are given: imported from its submodule and kept in
    the namespace, or the package's submodule of that name, imported; else
    ``AttributeError``, as for any missing attribute."""
    package = namespace["__name__"]
    if not name.isidentifier():
        # ``getattr(package, "runtime.launch")`` is no attribute, and imports nothing.
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module = exports.get(name)
    if module is None:
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    namespace[name] = value
    return value


def listing(exports: dict[str, str], namespace: dict[str, Any]) -> list[str]:
    """What ``dir()`` of such a package lists: its exported names and its module dunders
    (not the names its ``__init__`` imports to export lazily)."""
    return sorted({*exports, *(name for name in namespace if name.startswith("__"))})
