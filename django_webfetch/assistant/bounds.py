"""Bounds of what the model is sent: one tool result, and the whole context of a request.

``bound_result`` cuts a tool result to a byte budget (UTF-8) so that the untrusted-content
fence survives the cut: a cut never falls inside a marker line, and every fence left open by
the cut is closed with its own END marker before our note.  Pure functions, no Django.
"""

from __future__ import annotations

import re

from django_webfetch.text.fence import END_MARKER

__all__ = ["MIN_RESULT_BYTES", "bound_result", "omitted_note", "utf8_len"]

#: The smallest budget ``bound_result`` accepts (room for the note and a closing marker).
MIN_RESULT_BYTES = 1000

_MARKER_RE = re.compile(
    r"<<<(BEGIN|END) UNTRUSTED EXTERNAL WEB CONTENT nonce=([0-9A-Za-z_-]{1,64})>>>"
)


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def omitted_note(size: int) -> str:
    return f"[result omitted: {size} bytes]"


def _cut_note(limit: int, size: int) -> str:
    return f"\n[result cut to fit {limit} bytes; it had {size} bytes]"


def _prefix_chars(text: str, budget: int) -> int:
    """The largest ``n`` with ``utf8_len(text[:n]) <= budget``."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= budget:
        return len(text)
    return len(encoded[: max(budget, 0)].decode("utf-8", "ignore"))


def _closers(kept: str) -> str:
    """END markers for every fence that ``kept`` opens and does not close (innermost first).

    Linear in the number of markers: an END closes its fence and every fence opened inside
    it (a stack, with a count per nonce for the membership test)."""
    stack: list[str] = []
    open_count: dict[str, int] = {}
    for match in _MARKER_RE.finditer(kept):
        kind, nonce = match.group(1), match.group(2)
        if kind == "BEGIN":
            stack.append(nonce)
            open_count[nonce] = open_count.get(nonce, 0) + 1
        elif open_count.get(nonce):
            while stack:
                top = stack.pop()
                open_count[top] -= 1
                if top == nonce:
                    break
    return "".join("\n" + END_MARKER.format(nonce=n) for n in reversed(stack))


def bound_result(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` bytes of UTF-8, else a prefix of it with every fence
    the cut opened closed again and a note saying how much was cut, within ``limit``."""
    if limit < MIN_RESULT_BYTES:
        raise ValueError(f"a result bound below {MIN_RESULT_BYTES} bytes leaves no room")
    size = utf8_len(text)
    if size <= limit:
        return text
    note = _cut_note(limit, size)
    budget = limit - utf8_len(note)
    spans = [(m.start(), m.end()) for m in _MARKER_RE.finditer(text)]

    def cut_at(byte_budget: int) -> int:
        end = _prefix_chars(text, byte_budget)
        for start, stop in spans:
            if start < end < stop:  # never keep half a marker line
                return start
        return end

    reserve = 0
    for _ in range(8):
        end = cut_at(budget - reserve)
        closing = _closers(text[:end])
        needed = utf8_len(text[:end]) + utf8_len(closing)
        if needed <= budget:
            return text[:end] + closing + note
        reserve = utf8_len(closing)
    # Fall back to the text before the first marker: nothing is left open there.
    first = spans[0][0] if spans else len(text)
    end = min(_prefix_chars(text, budget), first)
    return text[:end] + note
