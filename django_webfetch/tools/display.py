"""How a call's arguments are shown to the person who approves it.

Every approval surface (the admin's card and confirmation page, the django CMS card, the
approval e-mail) shows *every* argument of the call, from the arguments that will run (not
from what a tool chose to put on its card), complete: never cut, whatever its size (the
run service bounds all of them to ``runs.bounds.MAX_ARGUMENTS_BYTES``).

A value is shown as JSON (a string in quotes, with JSON's escapes), and every character
that is not printable (line breaks, tabs, bidirectional and other format controls,
surrogates), every default-ignorable code point (variation selectors, tag characters, the
combining grapheme joiner, Mongolian selectors, ...), every printable character that
renders blank (the Hangul fillers U+3164, U+115F, U+1160, U+FFA0, the Braille blank
U+2800), a combining mark with nothing to combine with (at the start of a name, after
a quote) and every combining mark past ``MAX_MARKS`` on one character (a stack of marks
is drawn far above and below its line, over the rows around it) is written as an escape,
so a value can neither hide part of itself nor forge a line of the card or the mail, and
two different names never look alike (``tests/test_display.py``).  A name that is not an
ASCII identifier is also marked ``[unusual name]``.  HTML surfaces escape the text on top
of that (Django's autoescape or ``format_html``).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_MARKS", "argument_rows", "visible_name", "visible_text"]

#: At most this many combining marks are shown on one character (Vietnamese stacks two,
#: a few scripts three); each further one is escaped.  Unicode's stream-safe format
#: (UAX #15) allows 30, far more than a line of text can show without drawing over the
#: lines around it (tests/test_display.py, tests/plugins/test_bounded_reads_and_shown_metadata.py).
MAX_MARKS = 3


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


#: Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt) plus the Braille blank:
#: printable or not, they render as nothing or as blank space.
_BLANK_RANGES = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def _blank(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _BLANK_RANGES)


#: What a character is to ``visible_text``: shown as it is, always escaped, or a combining
#: mark (escaped unless it follows a letter or digit, within ``MAX_MARKS`` marks).
_SHOWN, _ESCAPED, _MARK = 0, 1, 2
#: Printable ASCII: never hidden, never blank, never a mark; shown as it is in one step.
_PLAIN_RUN = re.compile(r"[ -~]+")


@functools.lru_cache(maxsize=4096)
def _kind(char: str) -> int:
    if not char.isprintable() or _blank(char) or unicodedata.category(char) == "Cf":
        return _ESCAPED
    # A combining mark shows on the character before it: alone, it disguises a quote.
    return _MARK if unicodedata.category(char).startswith("M") else _SHOWN


def visible_text(text: str) -> str:
    """``text`` with every character that is not printable, renders blank or is a
    combining mark with nothing to combine with (or past ``MAX_MARKS`` on one character)
    written as ``\\uXXXX``.

    Runs of printable ASCII are copied whole and each other character is classified once
    (cached), so a value at the 16 KiB cap costs a few regular-expression steps, not a
    Unicode lookup per character."""
    out: list[str] = []
    previous: str | None = None
    marks = 0  # combining marks shown on ``previous`` so far
    position, end = 0, len(text)
    while position < end:
        run = _PLAIN_RUN.match(text, position)
        if run is not None:
            out.append(run.group())
            position = run.end()
            previous, marks = text[position - 1], 0
            continue
        char = text[position]
        position += 1
        kind = _kind(char)
        if kind == _ESCAPED or (
            kind == _MARK and (previous is None or not previous.isalnum() or marks >= MAX_MARKS)
        ):
            out.append(_escape(char))
            previous = None
        elif kind == _MARK:
            out.append(char)
            marks += 1
        else:
            out.append(char)
            previous, marks = char, 0
    return "".join(out)


def visible_name(name: str) -> str:
    """An argument name as visible text, marked when it is not an ASCII identifier."""
    shown = visible_text(name)
    if name.isascii() and name.isidentifier():
        return shown
    return f"{shown} [unusual name]"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def argument_rows(arguments: Any) -> list[tuple[str, str]]:
    """``(name, value)`` for every top-level argument, in order, both as visible text;
    a nested value is shown whole, as JSON.  Arguments that are not an object (never
    stored so, but shown if they were) are one row named ``(arguments)``."""
    if not isinstance(arguments, Mapping):
        return [("(arguments)", visible_text(_json(arguments)))]
    return [(visible_name(str(k)), visible_text(_json(v))) for k, v in arguments.items()]
