"""How a call's arguments are shown to the person who approves it (issue 19, item 2).

Every approval surface (the admin's card and confirmation page, the django CMS card, the
approval e-mail) shows *every* argument of the call, from the arguments that will run (not
from what a tool chose to put on its card), complete: never cut, whatever its size (the
run service bounds all of them to ``runs.bounds.MAX_ARGUMENTS_BYTES``).

A value is shown as JSON (a string in quotes, with JSON's escapes), and every character
that is not printable (line breaks, tabs, bidirectional and other format controls,
surrogates) is written as an escape, so a value can neither hide part of itself nor forge a
line of the card or the mail.  HTML surfaces escape the text on top of that (Django's
autoescape or ``format_html``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["argument_rows", "visible_text"]


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible_text(text: str) -> str:
    """``text`` with every character that is not printable written as ``\\uXXXX``."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def argument_rows(arguments: Any) -> list[tuple[str, str]]:
    """``(name, value)`` for every top-level argument, in order, both as visible text;
    a nested value is shown whole, as JSON.  Arguments that are not an object (never
    stored so, but shown if they were) are one row named ``(arguments)``."""
    if not isinstance(arguments, Mapping):
        return [("(arguments)", visible_text(_json(arguments)))]
    return [(visible_text(str(k)), visible_text(_json(v))) for k, v in arguments.items()]
