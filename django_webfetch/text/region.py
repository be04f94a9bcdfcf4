"""The main content of a page too costly to lay out whole, found without a parser.

When the pre-scan or a work budget stops a page (a mega-menu of thousands of links before
the article, a huge footer or sidebar, thousands of nested ``<div>`` around the article, a
comment flood), ``mode="main"`` still wants the article, not the first 20,000 characters of
the page in document order.  :func:`main_region` finds it in a linear pass over the page
with comments, scripts and styles dropped (:func:`~.scan.strip_special`):

1. the first ``<main>`` or ``role="main"`` element, else the ``<article>`` elements (from
   the first to the end of the last), when it holds at least :data:`MIN_REGION_CHARS` of
   text that is mostly not link text;
2. failing those, the densest run of text: the page is cut into windows of
   :data:`WINDOW` characters, each scored by its text outside links, less its link text
   and its tags (:data:`LINK_PENALTY`, :data:`TAG_PENALTY`), and the run of windows with
   the highest sum is the region (the maximum-sum subarray, Kadane's algorithm: one pass;
   Finn, Kushmerick and Smyth's "body text extraction").  Its two ends are then moved
   to a tag boundary within one window on either side, token by token.

Every step is a regular expression over a bounded piece, a string search, or a loop over
at most :data:`MAX_NESTING_TAGS` matches or two windows of tokens, so the pass is linear in
the page; the region then goes through the ordinary bounded pipeline (pre-scan, parse,
selection, render) on its own.
"""

from __future__ import annotations

from .patterns import compile_pattern
from .scan import ascii_lower, reducible, strip_special

__all__ = [
    "LINK_PENALTY",
    "MAX_NESTING_TAGS",
    "MIN_REGION_CHARS",
    "TAG_PENALTY",
    "WINDOW",
    "main_region",
]

#: A ``<main>``, ``role="main"`` or ``<article>`` region with less text than this (a
#: placeholder a script fills) gives way to the densest run of text.
MIN_REGION_CHARS = 100
#: Characters per window of the density pass.
WINDOW = 2048
#: What one character of link text and one tag take off a window's score, in characters
#: of text outside links.
LINK_PENALTY = 2
TAG_PENALTY = 4
#: Start and end tags looked at to find the end of a ``role="main"`` element.
MAX_NESTING_TAGS = 10_000
#: ``role="main"`` matches looked at (one in a tag is the element; one in text is not).
_MAX_ROLE_MATCHES = 8


#: What ends a tag name (the HTML tokenizer's tag name state), or the end of the text: the
#: character checked after ``<main``, ``</main`` or ``role=main``, written out in code
#: (RE2 has no look-around).
_NAME_END = frozenset("\t\n\f\r />")
_ROLE_END = frozenset("\t\n\f\r />\"'")
#: ``role="main"``, ASCII letters in either case; the character after it is checked in code.
_ROLE_RE = compile_pattern(
    r"""[\t\n\f\r /"'][rR][oO][lL][eE][\t\n\f\r ]*=[\t\n\f\r ]*["']?[mM][aA][iI][nN]"""
)
#: An element name, read from a slice of at most ``_NAME_SPAN`` characters.
_NAME_RE = compile_pattern(r"<([A-Za-z][^\t\n\f\r />]{0,63})")
_NAME_SPAN = 65


def main_region(text: str, *, stripped: bool = False) -> str | None:
    """The markup of the main content of ``text`` (decoded HTML), or None when the page
    has no run of text that outweighs its links and tags.

    It reads the part of the page the reduction to text reads (:func:`~.scan.reducible`);
    ``stripped``: ``text`` is that part already, without comments, scripts and styles."""
    if not stripped:
        text, _ = strip_special(reducible(text))
    region = _semantic(text)
    if region is not None:
        return region
    return _densest(text)


def _chars(markup: str) -> tuple[int, int]:
    """Characters of text (whitespace not counted) in ``markup``, and of those in links.

    A tag is a ``<`` whose next ``<`` or ``>`` is a ``>`` (``<[^<>]*>``); a ``<`` without
    one is text.  A link's text is the text after an ``<a>`` start tag up to the next
    ``<``.  One split at ``<`` and a string search per piece: no pattern, linear."""
    pieces = markup.split("<")
    outside = [pieces[0]]
    plain = [pieces[0]]
    for piece in pieces[1:]:
        close = piece.find(">")
        if close < 0:
            outside.append("<" + piece)
            plain.append("<" + piece)
            continue
        after = piece[close + 1 :]
        outside.append(after)
        if not (piece[0] in "aA" and piece[1] in _NAME_END):
            plain.append(after)
    text = len("".join("".join(outside).split()))
    return text, text - len("".join("".join(plain).split()))


def _convincing(markup: str) -> bool:
    text, links = _chars(markup)
    return text - links >= MIN_REGION_CHARS and links * 2 <= text


def _semantic(text: str) -> str | None:
    """The first ``<main>`` or ``role="main"`` element, else the ``<article>`` elements."""
    lowered = ascii_lower(text)  # HTML's tag names: ASCII letters in either case
    starts: list[tuple[int, int]] = []  # (start, end) candidates, the earliest first
    main = _find_tag(lowered, "<main", 0)
    if main >= 0:
        closing = _find_tag(lowered, "</main", main + len("<main"))
        starts.append((main, len(text) if closing < 0 else closing))
    role = _role_main(text, lowered)
    if role is not None:
        starts.append(role)
    for start, end in sorted(starts):
        if _convincing(text[start:end]):
            return text[start:end]
    first = lowered.find("<article")
    last = lowered.rfind("</article")
    if first >= 0:
        region = text[first : last if last > first else len(text)]
        if _convincing(region):
            return region
    return None


def _find_tag(lowered: str, prefix: str, pos: int) -> int:
    """Where the first ``prefix`` (``"<main"``, ``"</div"``) at or after ``pos`` in
    ``lowered`` is followed by what ends a tag name or by the end of the text; -1 if none.
    Each string search starts after the last one's start: linear in the text."""
    while True:
        found = lowered.find(prefix, pos)
        if found < 0:
            return -1
        after = found + len(prefix)
        if after == len(lowered) or lowered[after] in _NAME_END:
            return found
        pos = found + 1


def _role_main(text: str, lowered: str | None = None) -> tuple[int, int] | None:
    """Where the first element with ``role="main"`` starts and ends (its end tag found by
    counting the start and end tags of its name, at most :data:`MAX_NESTING_TAGS`)."""
    if lowered is None:
        lowered = ascii_lower(text)
    seen = 0
    for match in _ROLE_RE.finditer(text):
        end = match.end()
        if end < len(text) and text[end] not in _ROLE_END:
            continue  # role=mainly: no match
        seen += 1
        if seen > _MAX_ROLE_MATCHES:
            return None
        start = text.rfind("<", 0, match.start() + 1)
        name = _NAME_RE.match(text[start : start + _NAME_SPAN]) if start >= 0 else None
        if name is None or text.find(">", start, match.start()) >= 0:
            continue  # "role=main" in text, not in a tag
        return start, _element_end(lowered, start, ascii_lower(name.group(1)))
    return None


def _element_end(lowered: str, start: int, name: str) -> int:
    """Where the element ``name`` that starts at ``start`` ends: the end tag that brings
    the count of its start and end tags back to zero (the end of the text when none does,
    or after :data:`MAX_NESTING_TAGS` tags)."""
    opening, closing = "<" + name, "</" + name
    depth = 0
    pos = start
    next_open = _find_tag(lowered, opening, pos)
    next_close = _find_tag(lowered, closing, pos)
    for _ in range(MAX_NESTING_TAGS):
        if next_open < 0 and next_close < 0:
            break
        if next_close < 0 or 0 <= next_open < next_close:
            depth += 1
            pos = next_open + len(opening) + 1  # past the tag name and the character after it
        else:
            depth -= 1
            if depth == 0:
                return next_close
            pos = next_close + len(closing) + 1
        if 0 <= next_open < pos:
            next_open = _find_tag(lowered, opening, pos)
        if 0 <= next_close < pos:
            next_close = _find_tag(lowered, closing, pos)
    return len(lowered)


def _score(markup: str) -> int:
    text, links = _chars(markup)
    return text - links - LINK_PENALTY * links - TAG_PENALTY * markup.count("<")


def _densest(text: str) -> str | None:
    """The run of windows whose scores have the highest sum (Kadane), its ends refined."""
    best = 0
    best_range = (0, -1)
    total = 0
    first = 0
    for index, start in enumerate(range(0, len(text), WINDOW)):
        if total <= 0:
            total, first = 0, index
        total += _score(text[start : start + WINDOW])
        if total > best:
            best, best_range = total, (first, index)
    if best <= 0:
        return None
    first, last = best_range
    start = _best_start(text, max(0, (first - 1) * WINDOW), (first + 1) * WINDOW)
    end = _best_end(text, last * WINDOW, (last + 2) * WINDOW)
    return text[start:end]


def _tokens(text: str, start: int, end: int) -> list[tuple[int, int, int]]:
    """``(start, end, score)`` of the tags and text pieces in ``text[start:end]``: a tag is
    a ``<`` whose next ``<`` or ``>`` is a ``>``, a lone ``<`` is a piece of its own, and
    the text between them is one piece."""
    tokens: list[tuple[int, int, int]] = []
    in_link = False

    def text_piece(first: int, piece: str) -> None:
        if piece:
            chars = len("".join(piece.split()))
            score = -LINK_PENALTY * chars if in_link else chars
            tokens.append((first, first + len(piece), score))

    pieces = text[start:end].split("<")
    text_piece(start, pieces[0])
    at = start + len(pieces[0])
    for piece in pieces[1:]:
        close = piece.find(">")
        if close < 0:
            text_piece(at, "<")  # a lone "<": a piece of text of its own
            text_piece(at + 1, piece)
        else:
            name = ascii_lower(piece[:2])
            if name in ("a ", "a>", "a\t", "a\n"):
                in_link = True
            elif name == "/a":
                in_link = False
            tokens.append((at, at + close + 2, -TAG_PENALTY))
            text_piece(at + close + 2, piece[close + 1 :])
        at += 1 + len(piece)
    return tokens


#: Tags next to the region's text that come along with it (its headline's ``<h1>``, the
#: ``</p>`` of its last paragraph).
_EDGE_TAGS = 8


def _best_start(text: str, start: int, end: int) -> int:
    """Where in ``text[start:end]`` the suffix with the highest score starts, with the
    start tags just before it (the ``<div><h1>`` of a headline)."""
    tokens = _tokens(text, start, end)
    best, at, total = 0, len(tokens), 0
    for index in range(len(tokens) - 1, -1, -1):
        total += tokens[index][2]
        if total > best:
            best, at = total, index
    floor = max(0, at - _EDGE_TAGS)
    while at > floor and _start_tag(text, tokens[at - 1]):
        at -= 1
    return tokens[at][0] if at < len(tokens) else end


def _best_end(text: str, start: int, end: int) -> int:
    """Where in ``text[start:end]`` the prefix with the highest score ends, with the end
    tags just after it."""
    tokens = _tokens(text, start, end)
    best, at, total = 0, -1, 0
    for index, token in enumerate(tokens):
        total += token[2]
        if total > best:
            best, at = total, index
    ceiling = min(len(tokens) - 1, at + _EDGE_TAGS)
    while at < ceiling and text.startswith("</", tokens[at + 1][0]):
        at += 1
    return tokens[at][1] if at >= 0 else start


def _start_tag(text: str, token: tuple[int, int, int]) -> bool:
    """Whether a token is a start tag other than a link's."""
    first, last, _ = token
    return (
        last - first > 2
        and text[first] == "<"
        and text[first + 1].isalpha()
        and ascii_lower(text[first + 1 : first + 3]) not in ("a ", "a>", "a\t", "a\n")
    )
