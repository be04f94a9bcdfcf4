"""What may be stored: the bounds every value meets before it reaches the database.

A call's arguments come from a model (through the assistant) or from an HTTP client; both
can send what no database column takes: a NUL character (PostgreSQL's ``text`` and
``jsonb`` refuse it with ``DataError``), a lone UTF-16 surrogate (not encodable as UTF-8),
JSON nested thousands of levels deep (``RecursionError`` in every recursive walker), or
megabytes of text.  :func:`check_storable` refuses all of them, in one iterative walk
bounded by :data:`MAX_ARGUMENTS_BYTES`, *before* anything is stored, the same way on
SQLite and PostgreSQL.  It never echoes the offending value, only where it was.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django_webfetch.net.errors import WebFetchError

__all__ = [
    "MAX_ARGUMENTS_BYTES",
    "MAX_COMMENT_CHARS",
    "MAX_DEPTH",
    "InputRejected",
    "check_storable",
    "check_text",
    "make_storable",
    "safe_label",
]

#: The arguments of one call, as compact UTF-8 JSON.
MAX_ARGUMENTS_BYTES = 16 * 1024
#: Nesting of objects and arrays (a tool's parameters are a few levels deep).
MAX_DEPTH = 32
#: A decision's comment, in characters.
MAX_COMMENT_CHARS = 2000


class InputRejected(WebFetchError, ValueError):
    """A value that must not be stored.  ``code``: ``arguments_too_large``,
    ``nesting_too_deep``, ``invalid_characters`` or ``not_json``; ``where``: a JSON
    pointer-like path to the offending value (never the value itself)."""

    code = "input_rejected"

    def __init__(self, code: str, message: str, *, where: str = "") -> None:
        self.code = code
        self.where = where
        super().__init__(message + (f" (at {where})" if where else ""))


def _bad_text(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return True
    return False


def check_text(text: str, *, where: str = "") -> None:
    """Refuse a NUL or a lone surrogate in ``text``."""
    if _bad_text(text):
        raise InputRejected(
            "invalid_characters",
            "Text must not contain NUL characters or lone UTF-16 surrogates.",
            where=where,
        )


def safe_label(text: str) -> str:
    """``text`` cut to 64 characters and made printable ASCII (NUL and surrogates
    escaped), fit for a message, a log line and a JSON response."""
    return text[:64].encode("ascii", "backslashreplace").decode("ascii")


def _path(parts: tuple[str, ...]) -> str:
    return "/" + "/".join(safe_label(p.replace("~", "~0").replace("/", "~1")) for p in parts)


def check_storable(
    value: Any, *, max_bytes: int = MAX_ARGUMENTS_BYTES, max_depth: int = MAX_DEPTH
) -> int:
    """Raise :class:`InputRejected` unless ``value`` is plain JSON (dict with ``str`` keys,
    list, ``str``, ``int``, finite ``float``, ``bool``, ``None``) that every supported
    database stores as it is, at most ``max_depth`` deep and ``max_bytes`` long as compact
    UTF-8 JSON.  Returns that length.

    The walk is iterative and stops as soon as the running size passes ``max_bytes``, so
    its cost is bounded by the bound, not by the input."""
    size = 0
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, parts = stack.pop()
        if depth > max_depth:
            raise InputRejected(
                "nesting_too_deep",
                f"Arguments may be nested at most {max_depth} levels deep.",
                where=_path(parts),
            )
        if isinstance(item, str):
            check_text(item, where=_path(parts))
            size += len(item.encode("utf-8")) + 2
        elif isinstance(item, bool) or item is None:
            size += 5
        elif isinstance(item, int):
            size += len(str(item)) if abs(item) < 10**40 else max_bytes + 1
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise InputRejected("not_json", "Numbers must be finite.", where=_path(parts))
            size += 24
        elif isinstance(item, dict):
            size += 2
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InputRejected(
                        "not_json", "Object keys must be strings.", where=_path(parts)
                    )
                check_text(key, where=_path((*parts, key)))
                size += len(key.encode("utf-8")) + 4
                stack.append((child, depth + 1, (*parts, key)))
                if size > max_bytes:
                    break
        elif isinstance(item, (list, tuple)):
            size += 2 + len(item)
            if size <= max_bytes:
                stack.extend(
                    (child, depth + 1, (*parts, str(index))) for index, child in enumerate(item)
                )
        else:
            raise InputRejected(
                "not_json", "Arguments must be plain JSON values.", where=_path(parts)
            )
        if size > max_bytes:
            raise InputRejected(
                "arguments_too_large", f"Arguments may be at most {max_bytes} bytes as JSON."
            )
    return size


def json_size(value: Any) -> int:
    """The compact UTF-8 JSON length of an already checked value (for tests and docs)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def storable_text(text: str) -> str:
    """``text`` with each NUL and each lone surrogate replaced by U+FFFD (a surrogate pair
    is joined into its character)."""
    if not _bad_text(text):
        return text
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.replace("\x00", "\ufffd")


def make_storable(value: Any) -> Any:
    """A copy of ``value`` that every supported database stores and every JSON renderer
    renders: strings (keys too) through :func:`storable_text`, non-finite floats as
    ``None``, tuples as lists, non-string keys and other objects as their ``str()``.

    For what a *tool* produced (a result, a preview): unlike a client's input, which is
    refused (:func:`check_storable`), a result must be kept, so it is repaired.  The walk
    is iterative (no ``RecursionError`` on deep values)."""

    def leaf(item: Any) -> Any:
        if isinstance(item, str):
            return storable_text(item)
        if isinstance(item, bool) or item is None or isinstance(item, int):
            return item
        if isinstance(item, float):
            return item if item == item and item not in (float("inf"), float("-inf")) else None
        return storable_text(str(item))

    def container(item: Any) -> Any:
        if isinstance(item, Mapping):
            return {}
        if isinstance(item, (list, tuple)):
            return []
        return None

    root = container(value)
    if root is None:
        return leaf(value)
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = (
            ((storable_text(str(k)), v) for k, v in source.items())
            if isinstance(source, Mapping)
            else enumerate(source)
        )
        for key, child in items:
            made = container(child)
            if made is None:
                made = leaf(child)
            else:
                stack.append((child, made))
            if isinstance(target, dict):
                target[key] = made
            else:
                target.append(made)
    return root
