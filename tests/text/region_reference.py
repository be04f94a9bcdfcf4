"""The reference for tests/text/test_region.py: ``django_webfetch/text/region.py`` as it was
before its patterns moved to RE2 (Python ``re``, one-character negative lookaheads, one
pattern compiled per ``role="main"`` element name), kept as it was to compare against.
Only tests import it; it never runs on a page the package reads.

The original module docstring follows.

The main content of a page too costly to lay out whole, found without a parser.

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

import re

from django_webfetch.text.scan import ascii_lower, reducible, strip_special

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

_MAIN_RE = re.compile(r"<main(?![^\t\n\f\r />])", re.IGNORECASE)
_MAIN_END_RE = re.compile(r"</main(?![^\t\n\f\r />])", re.IGNORECASE)
_ROLE_RE = re.compile(
    r"""[\t\n\f\r /"']role[\t\n\f\r ]*=[\t\n\f\r ]*["']?main(?![^\t\n\f\r />"'])""",
    re.IGNORECASE,
)
_NAME_RE = re.compile(r"<([A-Za-z][^\t\n\f\r />]{0,63})")
#: A link's start tag and the text up to the next tag: its (first) text.
_LINK_TEXT_RE = re.compile(r"<a(?![^\t\n\f\r />])[^<>]*>[^<]*", re.IGNORECASE)
#: A tag, for counting text: up to the next ``<`` or ``>``, so that a failed attempt never
#: scans on past the next ``<`` (a window of ``<a<a<a`` is linear, not quadratic).
_TAG_RE = re.compile(r"<[^<>]*>")
#: Tags and text, for the token-level refinement of the region's ends.
_TOKEN_RE = re.compile(r"<[^<>]*>|[^<]+|<")


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
    """Characters of text (whitespace not counted) in ``markup``, and of those in links."""
    text = len("".join(_TAG_RE.sub(" ", markup).split()))
    plain = len("".join(_TAG_RE.sub(" ", _LINK_TEXT_RE.sub(" ", markup)).split()))
    return text, text - plain


def _convincing(markup: str) -> bool:
    text, links = _chars(markup)
    return text - links >= MIN_REGION_CHARS and links * 2 <= text


def _semantic(text: str) -> str | None:
    """The first ``<main>`` or ``role="main"`` element, else the ``<article>`` elements."""
    starts: list[tuple[int, int]] = []  # (start, end) candidates, the earliest first
    main = _MAIN_RE.search(text)
    if main is not None:
        closing = _MAIN_END_RE.search(text, main.end())
        starts.append((main.start(), len(text) if closing is None else closing.start()))
    role = _role_main(text)
    if role is not None:
        starts.append(role)
    for start, end in sorted(starts):
        if _convincing(text[start:end]):
            return text[start:end]
    lowered = ascii_lower(text)
    first = lowered.find("<article")
    last = lowered.rfind("</article")
    if first >= 0:
        region = text[first : last if last > first else len(text)]
        if _convincing(region):
            return region
    return None


def _role_main(text: str) -> tuple[int, int] | None:
    """Where the first element with ``role="main"`` starts and ends (its end tag found by
    counting the start and end tags of its name, at most :data:`MAX_NESTING_TAGS`)."""
    pos = 0
    for _ in range(_MAX_ROLE_MATCHES):
        match = _ROLE_RE.search(text, pos)
        if match is None:
            return None
        pos = match.end()
        start = text.rfind("<", 0, match.start() + 1)
        name = _NAME_RE.match(text, start) if start >= 0 else None
        if name is None or text.find(">", start, match.start()) >= 0:
            continue  # "role=main" in text, not in a tag
        tag = re.compile(rf"<(/?){re.escape(name.group(1))}(?![^\t\n\f\r />])", re.IGNORECASE)
        depth = 0
        for count, found in enumerate(tag.finditer(text, start)):
            if count >= MAX_NESTING_TAGS:
                break
            depth += -1 if found.group(1) else 1
            if depth == 0:
                return start, found.start()
        return start, len(text)
    return None


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
    """``(start, end, score)`` of the tags and text pieces in ``text[start:end]``."""
    tokens = []
    in_link = False
    for match in _TOKEN_RE.finditer(text, start, end):
        piece = match.group()
        if piece.startswith("<") and len(piece) > 1:
            name = ascii_lower(piece[1:3])
            if name in ("a ", "a>", "a\t", "a\n"):
                in_link = True
            elif name == "/a":
                in_link = False
            score = -TAG_PENALTY
        else:
            chars = len("".join(piece.split()))
            score = -LINK_PENALTY * chars if in_link else chars
        tokens.append((match.start(), match.end(), score))
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
