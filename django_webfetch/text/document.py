"""A page's whole extracted text, and the parts it is read in.

The renderer writes a Markdown link as ``[text][n]``; the ``n``-th URL is kept beside the
text, in :attr:`Document.links`.  A part is a slice of the text with the definitions
(``[n]: url``) of the links it uses after it, under a line that labels them as untrusted
URLs chosen by the page, each percent-encoded to one line of ASCII and cut to
:data:`MAX_LINK_URL_CHARS`: a URL can close no fence and start no line of its own.
A part, definitions included, has at most ``size`` characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .fence import open_code_fence, render_url
from .limits import MAX_TEXT_CHARS

__all__ = ["LINKS_HEADING", "MAX_LINK_URL_CHARS", "Document", "Part"]

#: Link URLs in the definitions are cut to this many characters.
MAX_LINK_URL_CHARS = 300
LINKS_HEADING = "Links (untrusted URLs chosen by the page):"
#: A reference the renderer wrote (page text has no unescaped ``]``, see ``Sink._escape``).
_REFERENCE_RE = re.compile(r"\]\[([0-9]{1,6})\]")
#: Where a part may end, best first: a paragraph, a line, a space.
_BREAKS = ("\n\n", "\n", " ")
#: A part ends at a break in its last fifth, if it has one.
_SLACK = 0.2


@dataclass(frozen=True)
class Part:
    """One part of a document: ``text`` (with its link definitions), the characters
    ``start``–``end`` of the document's text it holds, and its place (``number`` of
    ``total``, from 1)."""

    text: str
    start: int
    end: int
    number: int
    total: int

    @property
    def location(self) -> str:
        """``part 2 of 5, characters 20,000–40,000`` (of 96,000)."""
        return f"part {self.number} of {self.total}, characters {self.start:,}–{self.end:,}"


@dataclass(frozen=True)
class Document:
    """The whole text of a page (``[text][n]`` links) and the URLs of its links."""

    text: str
    links: tuple[str, ...] = ()

    def _definition(self, number: int) -> str:
        return f"[{number}]: {render_url(self.links[number - 1], MAX_LINK_URL_CHARS)}"

    def _references(self, start: int, end: int) -> list[int]:
        """The link numbers used in ``text[start:end]``, once each, in order."""
        seen: dict[int, None] = {}
        for match in _REFERENCE_RE.finditer(self.text, start, end):
            number = int(match.group(1))
            if 0 < number <= len(self.links):
                seen[number] = None
        return list(seen)

    def _end(self, start: int, size: int) -> int:
        """Where the part that starts at ``start`` ends: at most ``size`` characters once
        rendered (its link definitions, and a code fence closed or opened again, counted)."""
        text = self.text
        before = self._fence_before(start)
        end = min(len(text), start + size)
        while True:
            if end < len(text):
                floor = start + int((end - start) * (1 - _SLACK))
                for mark in _BREAKS:
                    cut = text.rfind(mark, floor, end)
                    if cut > start:
                        end = cut + len(mark)
                        break
            over = len(self._render(start, end, before)) - size
            if over <= 0 or end <= start + 1:
                return end
            if over * 2 < end - start:
                # Cut the text by what it is over (fewer references need no more room).
                end -= over
                continue
            # The link definitions take more room than the text (a page of links): cutting
            # by what it is over would leave one character, and the next part would render
            # the same 20,000 characters again, once per character (issue 28: 28 s of CPU
            # for a 40 KB menu).  The longest end that fits, by bisection.
            low, high = start + 1, end - 1
            while low < high:
                middle = (low + high + 1) // 2
                if len(self._render(start, middle, before)) <= size:
                    low = middle
                else:
                    high = middle - 1
            end = low

    def _fence_before(self, start: int) -> str | None:
        opened = open_code_fence(self.text[:start]) if start else None
        return opened[1] if opened is not None else None

    def boundaries(self, size: int = MAX_TEXT_CHARS) -> list[tuple[int, int]]:
        """The ``(start, end)`` of every part, in order (one empty part for no text)."""
        bounds = []
        start = 0
        while True:
            end = self._end(start, size)
            bounds.append((start, end))
            if end >= len(self.text):
                return bounds
            start = end

    def part(self, number: int = 1, size: int = MAX_TEXT_CHARS) -> Part | None:
        """Part ``number`` (from 1), or None past the last one."""
        bounds = self.boundaries(size)
        if not 1 <= number <= len(bounds):
            return None
        start, end = bounds[number - 1]
        return Part(self.render(start, end), start, end, number, len(bounds))

    def part_at(self, start: int, size: int = MAX_TEXT_CHARS) -> Part | None:
        """The part that holds character ``start`` of the text, or None past its end."""
        bounds = self.boundaries(size)
        for number, (first, end) in enumerate(bounds, 1):
            if first <= start < end or (first == end == start == 0):
                return Part(self.render(first, end), first, end, number, len(bounds))
        return None

    def render(self, start: int, end: int) -> str:
        """``text[start:end]`` with the definitions of the links it uses."""
        return self._render(start, end, self._fence_before(start))

    def _render(self, start: int, end: int, before: str | None) -> str:
        body = self.text[start:end].strip("\n")
        if before is not None:
            # The part starts inside a code block: open it again.
            body = f"{before}\n{body}"
        opened = open_code_fence(body)
        if opened is not None:
            body += "\n" + opened[1]
        references = self._references(start, end)
        if not references:
            return body
        definitions = "\n".join(self._definition(number) for number in references)
        return f"{body}\n\n{LINKS_HEADING}\n\n{definitions}"
