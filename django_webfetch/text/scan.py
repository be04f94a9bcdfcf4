"""The linear pre-scan that decides whether html5lib may parse a page.

One pass over the decoded page tokenizes it the way HTML5 does (tags, attributes, comments,
raw-text elements) and replays a simplified HTML5 tree construction over a model of the stack
of open elements: ``<p>`` closing, implied end tags, void elements, table rows and cells,
foreign content, and the formatting elements that the adoption agency algorithm re-opens
(``<b><div>x</b>`` leaves the ``<div>`` open; unclosed ``<b>`` reopens in every later block).
Every operation looks at no more than ``MAX_DEPTH`` model elements, so the pass is linear.

The pass writes a normalised copy of the markup for html5lib: lower-case tag names, only the
attributes the renderer reads, no comments, no script/style/... content, a no-quirks doctype.
``class``, ``id`` and ``role`` become one ``wf`` weight (:mod:`.hints`).  The content of
``<nav>``, of hidden elements and of lists and divs whose class names a menu is copied as bare
tags, without text or attributes: no mode shows it, and so navigation cannot fill the parser
input, while the tree keeps the shape the cost model predicts.
It also estimates what html5lib would spend on that copy (a per-token cost plus the stack
walk html5lib does on every tag).  When the copy would nest deeper than ``MAX_DEPTH``, has an
element with too many attributes or an over-long tag, or costs more than the budget, html5lib
does not see it: the page is reduced to text by :func:`reduce_to_text` instead, unless enough
text came before the offending markup, in which case html5lib parses the part before it.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from itertools import islice

from .hints import (
    CLASS_ATTRIBUTE,
    HINT_ATTRIBUTE,
    MAX_HINT_CHARS,
    class_hint,
    class_key,
    hint_weight,
    words,
)
from .limits import MAX_DEPTH, MAX_PARSER_INPUT, MAX_TEXT_CHARS, Deadline

__all__ = [
    "MAX_REDUCE_TOKENS",
    "Scan",
    "ascii_lower",
    "reduce_to_text",
    "reducible",
    "scan",
    "strip_special",
    "title_line",
]

#: Estimated work of the pre-scan and html5lib together, in units of one Python-level step
#: (about 80 ns here): past it the page is reduced to text.
COST_BUDGET = 2_000_000
#: The cost of one tag or text token to html5lib, in steps, beside the stack walk.
TOKEN_COST = 150
TEXT_COST = 50
#: One character reference (``&lt;``, ``&#60;``, an ``&`` that starts none): html5lib looks
#: each one up in its entity table character by character.
REFERENCE_COST = 80
#: One element html5lib creates beside the start tag's own (a formatting element re-opened
#: by the reconstruction or cloned by the adoption agency): html5lib creates an etree
#: element, and the renderer visits it.
ELEMENT_COST = 100
#: One attribute: the pre-scan reads it, and html5lib too when it is kept.
ATTRIBUTE_COST = 15
#: One token html5lib never sees (a comment, doctype, processing instruction, script
#: element, ``</>``): the pre-scan's own work, one loop of Python.
SKIP_COST = 15
#: One element whose content html5lib never sees (``script``, ``style``, ``title``...):
#: the pre-scan reads its start tag, searches for its end tag and reads that too (issue 28:
#: charged as a skipped token, 2 MiB of ``<script></script>`` cost the pre-scan four times
#: what the budget assumes).
RAW_SKIP_COST = 60
#: One comment: the pre-scan searches for its end (measured at twice a skipped token).
COMMENT_COST = 30
#: One NUL character: html5lib reports and drops each one separately.
NUL_COST = 40
#: A kept attribute value longer than this is dropped (the renderer drops URLs over 2,048
#: characters anyway), so one huge tag costs its attributes, not the page.
MAX_VALUE_CHARS = 4096
#: Tag names are cut to this many characters.
MAX_NAME_CHARS = 64
#: How often (in tokens) the pre-scan looks at the clock.
_CLOCK_EVERY = 512
#: When a limit is hit after this much text, html5lib parses the markup before it.
ENOUGH_TEXT = 2 * MAX_TEXT_CHARS


_TAG_NAME_RE = re.compile(r"[A-Za-z][^\t\n\f\r />]*")
_SKIP_RE = re.compile(r"[\t\n\f\r /]*")
_ATTR_RE = re.compile(
    r"([^\t\n\f\r />][^\t\n\f\r />=]*)"
    r"""(?:[\t\n\f\r ]*=[\t\n\f\r ]*("[^"]*"?|'[^']*'?|[^\t\n\f\r >]*))?"""
)
_COMMENT_END_RE = re.compile(r"--!?>")
#: ARIA roles of page chrome (the roles of nav, header, footer, aside and search forms) and
#: of dialogs (cookie banners): an element with one of them gets ``hidden`` in the copy.
_CHROME_ROLES = words("alertdialog banner complementary contentinfo dialog navigation search")


def _chrome_role(value: str) -> bool:
    return value.strip().lower() in _CHROME_ROLES


def _hiding_style(value: str) -> bool:
    """Whether an inline style hides the element (``display: none``, ``visibility: hidden``)."""
    for declaration in value.lower().split(";"):
        prop, _, setting = declaration.partition(":")
        setting = setting.replace("!important", "").strip()
        if (prop.strip(), setting) in (("display", "none"), ("visibility", "hidden")):
            return True
    return False


_HIDING = {"role": _chrome_role, "style": _hiding_style}
#: Read for :mod:`.hints`: the parser gets their weight as one ``wf`` attribute.
_HINTED = frozenset({"class", "id"})
_KEPT_ATTRIBUTES = frozenset({"href", "alt", "hidden", "aria-hidden", *_HIDING, *_HINTED})
#: Elements whose content no mode renders (navigation), and the elements a menu class prunes.
#: Their content reaches the parser as bare tags (so the tree stays the one the model
#: predicts) without text or attributes, and so cannot fill the parser input (a mega-menu).
_PRUNED = frozenset({"nav"})
_MENU_PRUNED = words("ul ol menu div")
_LISTS = words("ul ol menu")

# Elements whose content is not markup.  Dropped: never shown.  Kept: shown as text.
_RAW_DROPPED = frozenset({"script", "style", "noscript", "iframe", "noembed", "noframes"})
_RAW_KEPT = frozenset({"textarea", "xmp"})
_RAW_END_RE = {
    name: re.compile(rf"</{name}[\t\n\f\r />]", re.IGNORECASE)
    for name in (*_RAW_DROPPED, *_RAW_KEPT, "title")
}

# The element sets of html5lib 1.1 (its constants and in-body rules), which knows nothing of
# <template> (an ordinary element to it), <search> or <dialog>.
_VOID = words(
    "area base basefont bgsound br col embed frame hr image img input keygen link meta param"
    " source track wbr"
)
_HEAD_ONLY = frozenset({"base", "basefont", "bgsound", "link", "meta", "title", "head"})
_IGNORED = frozenset({"html", "body", "head", "frameset", "frame"})
_FORMATTING = words("a b big code em font i nobr s small strike strong tt u")
_MARKER_ELEMENTS = frozenset({"applet", "marquee", "object", "td", "th", "caption"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CLOSES_P = words(
    "address article aside blockquote center details dir div dl fieldset figcaption figure"
    " footer header hgroup main menu nav ol p section summary ul pre listing form plaintext"
    " table hr xmp li dd dt h1 h2 h3 h4 h5 h6"
)
_BLOCK_END = words(
    "address article aside blockquote button center details dialog dir div dl fieldset"
    " figcaption figure footer header hgroup listing main menu nav ol pre section summary ul"
    " form li dd dt"
)
_SPECIAL = words(
    "address applet area article aside base basefont bgsound blockquote body br button caption"
    " center col colgroup command dd details dir div dl dt embed fieldset figure footer form"
    " frame frameset h1 h2 h3 h4 h5 h6 head header hr html iframe image img input isindex li"
    " link listing marquee menu meta nav noembed noframes noscript object ol p param plaintext"
    " pre script section select style table tbody td textarea tfoot th thead title tr ul wbr"
    " xmp"
)
_SCOPE = words("applet caption html marquee object table td th")
_TABLE_SECTIONS = frozenset({"tbody", "thead", "tfoot"})
_TABLE_CONTEXT = frozenset({"table", "tbody", "thead", "tfoot"})
_BUTTON_SCOPE = _SCOPE | {"button"}
_TABLE_SCOPE = frozenset({"html", "table"})
_NO_SCOPE: frozenset[str] = frozenset()
_TABLE_ONLY = frozenset({"table"})
_CELL_CONTEXT = _TABLE_CONTEXT | {"tr"}
_LI = frozenset({"li"})
_DD_DT = frozenset({"dd", "dt"})
_FOREIGN_ROOTS = frozenset({"svg", "math"})
#: Foreign elements whose content is HTML again (HTML5 "integration points"; lower case).
_INTEGRATION_POINTS = frozenset({"foreignobject", "desc", "title", "mi", "mo", "mn", "ms", "mtext"})
_BREAKOUT = words(
    "b big blockquote body br center code dd div dl dt em embed h1 h2 h3 h4 h5 h6 head hr i img"
    " li listing menu meta nobr ol p pre ruby s small span strong strike sub sup table tt u ul"
    " var"
)


class _LimitHit(Exception):
    """The markup went past a bound."""


class _El:
    __slots__ = ("foreign", "key", "name", "open")

    def __init__(self, name: str, key: str, foreign: bool = False) -> None:
        self.name = name
        self.key = key
        self.foreign = foreign
        self.open = True


class _Tree:
    """A model of html5lib's stack of open elements and list of active formatting elements."""

    def __init__(self) -> None:
        self.stack: list[_El] = []
        self.active: list[_El | None] = []  # None is a marker
        self.cost = 0
        self.depth = 0  # the deepest the stack has been

    # -- stack ----------------------------------------------------------------------------
    def push(self, element: _El) -> None:
        self.stack.append(element)
        depth = len(self.stack)
        if depth > self.depth:
            self.depth = depth
            if depth > MAX_DEPTH:
                raise _LimitHit

    def leaf(self) -> None:
        """An element that is inserted and closed at once."""
        depth = len(self.stack) + 1
        if depth > self.depth:
            self.depth = depth
            if depth > MAX_DEPTH:
                raise _LimitHit

    def pop_to(self, index: int) -> None:
        """Pop the element at ``index`` and everything above it."""
        for element in self.stack[index:]:
            element.open = False
            if element.name in _MARKER_ELEMENTS:
                self.clear_to_marker()
        del self.stack[index:]

    def find(self, names: frozenset[str] | str, scope: frozenset[str] = _SCOPE) -> int:
        """Index of the topmost element named in ``names`` that is in scope, else -1."""
        if isinstance(names, str):
            names = frozenset((names,))
        stack = self.stack
        top = len(stack) - 1
        for index in range(top, -1, -1):
            name = stack[index].name
            if name in names or name in scope:
                self.cost += top - index
                return index if name in names else -1
        self.cost += top
        return -1

    def close(self, names: frozenset[str] | str, scope: frozenset[str] = _SCOPE) -> None:
        index = self.find(names, scope)
        if index >= 0:
            self.pop_to(index)

    # -- active formatting elements -------------------------------------------------------
    def reconstruct(self) -> None:
        active = self.active
        if not active or active[-1] is None:
            return
        self.cost += len(self.stack) // 8  # html5lib: "entry in openElements", in C
        if active[-1].open:
            return
        index = len(active) - 1
        while index > 0:
            previous = active[index - 1]
            if previous is None or previous.open:
                break
            index -= 1
        for position in range(index, len(active)):
            old = active[position]
            assert old is not None
            element = _El(old.name, old.key)
            self.push(element)
            active[position] = element
            self.cost += len(self.stack) // 8 + ELEMENT_COST

    def add_formatting(self, element: _El) -> None:
        active = self.active
        self.cost += len(active)
        same = 0
        for position in range(len(active) - 1, -1, -1):
            entry = active[position]
            if entry is None:
                break
            if entry.key == element.key:
                same += 1
                if same == 3:  # the "Noah's Ark" clause
                    del active[position]
                    break
        active.append(element)

    def clear_to_marker(self) -> None:
        active = self.active
        while active:
            if active.pop() is None:
                return

    def last_formatting(self, name: str) -> int:
        active = self.active
        self.cost += len(active)
        for position in range(len(active) - 1, -1, -1):
            entry = active[position]
            if entry is None:
                return -1
            if entry.name == name:
                return position
        return -1

    def adoption_agency(self, name: str) -> None:
        stack = self.stack
        for _ in range(8):
            self.cost += len(stack)
            position = self.last_formatting(name)
            if position < 0:
                self.any_other_end_tag(name)
                return
            formatting = self.active[position]
            assert formatting is not None
            if not formatting.open:
                del self.active[position]
                return
            index = stack.index(formatting)
            furthest = -1
            for above in range(index + 1, len(stack)):
                if stack[above].name in _SPECIAL:
                    furthest = above
                    break
            if furthest < 0:
                self.pop_to(index)
                del self.active[position]
                return
            # Elements between the formatting element and the furthest block: the first
            # three that are formatting elements are cloned, the others are closed.
            kept: list[_El] = []
            for counter, node in enumerate(reversed(stack[index + 1 : furthest])):
                node.open = False
                if node.name in _FORMATTING:
                    self.cost += len(self.active)
                    if node in self.active:
                        if counter < 3:
                            node.open = True
                            kept.append(node)
                        else:
                            self.active.remove(node)
            formatting.open = False
            self.cost += ELEMENT_COST * (len(kept) + 1)  # the clones html5lib creates
            clone = _El(formatting.name, formatting.key)
            self.active[self.active.index(formatting)] = clone
            kept.reverse()
            stack[index:] = [*kept, stack[furthest], clone, *stack[furthest + 1 :]]

    def any_other_end_tag(self, name: str) -> None:
        stack = self.stack
        for index in range(len(stack) - 1, -1, -1):
            self.cost += 1
            current = stack[index].name
            if current == name:
                self.pop_to(index)
                return
            if current in _SPECIAL:
                return

    # -- tokens ---------------------------------------------------------------------------
    def text(self) -> None:
        self.cost += TEXT_COST
        if self.stack and self.stack[-1].foreign:
            return
        self.reconstruct()

    def start_tag(self, name: str, key: str, self_closing: bool) -> None:
        stack = self.stack
        self.cost += TOKEN_COST
        if stack and stack[-1].foreign:
            if name not in _BREAKOUT:
                if self_closing:
                    self.leaf()
                else:
                    self.push(_El(name, key, foreign=True))
                return
            while stack and stack[-1].foreign:
                self.pop_to(len(stack) - 1)
        if name in _IGNORED or name in _HEAD_ONLY:
            return
        if name in _FOREIGN_ROOTS:
            self.reconstruct()
            if self_closing:
                self.leaf()
            else:
                self.push(_El(name, key, foreign=True))
            return
        if name in _CLOSES_P:
            if name == "li":
                self.close_list_item(_LI)
            elif name in _DD_DT:
                self.close_list_item(_DD_DT)
            self.close("p", _BUTTON_SCOPE)
            if name in _HEADINGS and stack and stack[-1].name in _HEADINGS:
                self.pop_to(len(stack) - 1)
        elif name in _TABLE_SECTIONS or name in ("caption", "colgroup"):
            if not self.close_to(_TABLE_ONLY):
                return  # outside a table html5lib ignores it
        elif name == "tr":
            if not self.close_to(_TABLE_CONTEXT):
                return
            if stack[-1].name == "table":
                self.push(_El("tbody", "tbody"))
        elif name in ("td", "th"):
            if not self.close_to(_CELL_CONTEXT):
                return
            if stack[-1].name != "tr":
                if stack[-1].name == "table":
                    self.push(_El("tbody", "tbody"))
                self.push(_El("tr", "tr"))
        elif name == "a":
            if self.last_formatting("a") >= 0:
                self.adoption_agency("a")
                position = self.last_formatting("a")
                if position >= 0:
                    # The clone left open when the algorithm ran out of iterations.
                    stale = self.active.pop(position)
                    assert stale is not None
                    stack.remove(stale)
                    stale.open = False
            self.reconstruct()
        elif name == "nobr":
            self.reconstruct()
            if self.find("nobr") >= 0:
                self.adoption_agency("nobr")
                self.reconstruct()
        elif name == "button":
            self.close("button")
            self.reconstruct()
        elif name in ("option", "optgroup"):
            if stack and stack[-1].name == "option":
                self.pop_to(len(stack) - 1)
            self.reconstruct()
        else:
            self.reconstruct()
        if name in _VOID:
            self.leaf()
            return
        element = _El(name, key)
        self.push(element)
        if name in _FORMATTING:
            self.add_formatting(element)
        elif name in _MARKER_ELEMENTS:
            self.active.append(None)

    def close_list_item(self, names: frozenset[str]) -> None:
        stack = self.stack
        for index in range(len(stack) - 1, -1, -1):
            self.cost += 1
            current = stack[index].name
            if current in names:
                self.pop_to(index)
                return
            if current in _SPECIAL and current not in ("address", "div", "p"):
                return

    def close_to(self, names: frozenset[str]) -> bool:
        """Close what is open above the nearest table context; False when there is none."""
        index = self.find(names, _NO_SCOPE)
        if index < 0:
            return False
        self.pop_to(index + 1)
        return True

    def end_tag(self, name: str) -> None:
        stack = self.stack
        self.cost += TOKEN_COST
        if stack and stack[-1].foreign:
            for index in range(len(stack) - 1, -1, -1):
                if not stack[index].foreign:
                    break
                if stack[index].name == name:
                    self.pop_to(index)
                    return
        if name in _FORMATTING:
            self.adoption_agency(name)
        elif name == "p":
            index = self.find("p", _BUTTON_SCOPE)
            if index < 0:  # html5lib inserts an empty <p>
                self.push(_El("p", "p"))
                index = len(stack) - 1
            self.pop_to(index)
        elif name in _HEADINGS:
            self.close(_HEADINGS)
        elif name in _BLOCK_END or name in _FOREIGN_ROOTS:
            self.close(name)
        elif name in _MARKER_ELEMENTS or name == "table":
            self.close(name, _NO_SCOPE)
        elif name in _TABLE_SECTIONS or name == "tr":
            self.close(name, _TABLE_SCOPE)
        elif name == "br":
            # html5lib inserts the <br> with its in-body rules, even in foreign content.
            if stack and stack[-1].foreign:
                self.leaf()
            else:
                self.start_tag("br", "br", False)
        elif name not in _IGNORED:
            self.any_other_end_tag(name)


@dataclass(frozen=True)
class Scan:
    """What the pre-scan found: the markup html5lib may parse, or None to reduce to text."""

    markup: str | None
    title: str
    cost: int
    depth: int
    #: The safety net fired during the pre-scan (``markup`` is None then).
    timed_out: bool = False
    #: ``markup`` is the part of the page before a bound (the parser input, the cost
    #: budget or the depth after enough text): the rest of the page is not in it.
    cut: bool = False


#: Flags ``_tag`` returns: the class or id names a menu (for any element; for a list), or
#: the element is hidden.
MENU, LIST_MENU, HIDDEN = 1, 2, 4


def _tag(
    text: str, pos: int, limit: int = -1
) -> tuple[int, list[tuple[str, str | None]], int, bool, int]:
    """Read a tag's attributes from ``pos`` (after its name).

    Returns the position after the tag (-1 at end of input), the attributes the renderer
    reads, the number of attributes, whether the tag is self-closing, and the flags
    ``MENU``, ``LIST_MENU`` and ``HIDDEN``.  Raises ``_LimitHit`` once it has read more
    than ``limit`` attributes (when ``limit`` >= 0).
    """
    kept: list[tuple[str, str | None]] = []
    count = 0
    hint = 0
    hinted = 0  # bit 1: class seen, bit 2: id seen, bit 4: role seen
    flags = 0
    size = len(text)
    skip = _SKIP_RE.match
    attribute = _ATTR_RE.match
    while True:
        after = skip(text, pos).end()  # type: ignore[union-attr]
        if after >= size:
            return -1, kept, count, False, 0
        if text[after] == ">":
            if hint:
                kept.append((HINT_ATTRIBUTE, str(hint)))
            return after + 1, kept, count, after > pos and text[after - 1] == "/", flags
        match = attribute(text, after)
        assert match is not None
        count += 1
        if count == limit:
            raise _LimitHit
        name = match.group(1).lower()
        if name in _KEPT_ATTRIBUTES:
            value = match.group(2)
            if value is not None and len(value) > MAX_VALUE_CHARS:
                pos = match.end()
                continue
            if value is not None and value[:1] in ("'", '"'):
                value = value[1:-1]
            if name in _HINTED:
                seen = 1 if name == "class" else 2
                if not hinted & seen:
                    hinted |= seen
                    weight, menu = class_hint((value or "")[:MAX_HINT_CHARS])
                    hint += weight
                    flags |= menu
                    if seen == 1 and value:
                        kept.append((CLASS_ATTRIBUTE, class_key(value)))
                pos = match.end()
                continue
            if name in _HIDING:
                # role and style are not kept: an element they hide gets ``hidden``.
                if name == "role" and not hinted & 4:
                    hinted |= 4
                    hint += hint_weight(name, html.unescape((value or "")[:MAX_HINT_CHARS]))
                if not _HIDING[name](html.unescape(value or "")):
                    pos = match.end()
                    continue
                name, value = "hidden", None
            if name == "hidden" or (
                name == "aria-hidden" and (value or "").strip().lower() == "true"
            ):
                flags |= HIDDEN
            if all(name != seen for seen, _ in kept):
                kept.append((name, value))
        pos = match.end()


def _lower(name: str) -> str:
    """A tag name as html5lib sees it (ASCII lower case), cut to ``MAX_NAME_CHARS``: no
    known element has a longer name, and html5lib reads a name one character at a time."""
    name = name[:MAX_NAME_CHARS]
    return name.lower() if name.isascii() else name.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(text: str) -> str:
    """``text`` with ASCII letters in lower case (and its length kept, unlike ``lower``)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _skip_comment(text: str, pos: int) -> int:
    """Position after the comment that starts at ``pos`` (at ``<!--``)."""
    if text.startswith(">", pos + 4):
        return pos + 5
    if text.startswith("->", pos + 4):
        return pos + 6
    end = _COMMENT_END_RE.search(text, pos + 4)
    return len(text) if end is None else end.end()


def _bogus_end(text: str, pos: int) -> int:
    end = text.find(">", pos)
    return len(text) if end < 0 else end + 1


def _raw_end(text: str, name: str, pos: int) -> tuple[int, int]:
    """Where the raw text of element ``name`` ends, and where its end tag ends."""
    match = _RAW_END_RE[name].search(text, pos)
    if match is None:
        return len(text), len(text)
    after = _tag(text, match.end() - 1)[0]
    return match.start(), len(text) if after < 0 else after


def _escape(value: str) -> str:
    return value.replace('"', "&quot;")


def _foreign(tree: _Tree, name: str) -> bool:
    """Whether a start tag ``name`` is a foreign element here (``<svg><title/>``): then it
    is no raw-text element, and its content is markup."""
    stack = tree.stack
    return (
        bool(stack)
        and stack[-1].foreign
        and stack[-1].name not in _INTEGRATION_POINTS
        and name not in _BREAKOUT
    )


def scan(text: str, *, deadline: Deadline | None = None) -> Scan:
    """Pre-scan decoded markup (see the module docstring).

    Every token the loop reads is charged to the cost budget, and once ``deadline`` has
    passed the page goes to the text path (``timed_out``).
    """
    tree = _Tree()
    out: list[str] = ["<!DOCTYPE html>"]
    size_out = len(out[0])
    text_chars = 0
    title: str | None = None
    size = len(text)
    pos = 0
    find = text.find
    tag_name = _TAG_NAME_RE.match
    clock = _CLOCK_EVERY
    pruning: _El | None = None  # the element whose content is pruned (see _PRUNED)
    try:
        while pos < size:
            clock -= 1
            if not clock:
                clock = _CLOCK_EVERY
                if deadline is not None and deadline.passed():
                    return Scan(None, _title(title), tree.cost, tree.depth, timed_out=True)
            if tree.cost > COST_BUDGET:
                raise _LimitHit
            lt = find("<", pos)
            if lt < 0:
                lt = size
            if pruning is not None and not pruning.open:
                pruning = None
            if lt > pos:
                if pruning is not None:
                    tree.cost += SKIP_COST
                    pos = lt
                    continue
                chunk = text[pos:lt]
                # html5lib looks up each character reference, and reports and drops each NUL.
                tree.cost += REFERENCE_COST * chunk.count("&")
                if "\0" in chunk:
                    tree.cost += NUL_COST * chunk.count("\0")
                    chunk = chunk.replace("\0", "")
                chunk_bytes = (
                    len(chunk) if chunk.isascii() else len(chunk.encode("utf-8", "replace"))
                )
                if size_out + chunk_bytes > MAX_PARSER_INPUT:
                    break
                tree.text()
                if tree.cost > COST_BUDGET:
                    raise _LimitHit
                out.append(chunk)
                size_out += chunk_bytes
                text_chars += lt - pos
                pos = lt
                continue
            nxt = text[pos + 1 : pos + 2]
            if nxt == "!":
                if text.startswith("!--", pos + 1):
                    tree.cost += COMMENT_COST
                    pos = _skip_comment(text, pos)
                else:
                    tree.cost += SKIP_COST
                    pos = _bogus_end(text, pos)
                continue
            if nxt == "?":
                tree.cost += SKIP_COST
                pos = _bogus_end(text, pos)
                continue
            closing = nxt == "/"
            name_match = tag_name(text, pos + 2 if closing else pos + 1)
            if name_match is None:
                if closing and pos + 2 < size:  # "</>" is dropped, "</3" is a bogus comment
                    tree.cost += SKIP_COST
                    pos = pos + 3 if text[pos + 2] == ">" else _bogus_end(text, pos)
                    continue
                # A "<" that starts no tag is text, a character reference to html5lib.
                pos += 1
                if pruning is not None:
                    tree.cost += SKIP_COST
                    continue
                if size_out + 4 > MAX_PARSER_INPUT:
                    break
                tree.cost += REFERENCE_COST
                tree.text()
                out.append("&lt;")
                size_out += 4
                text_chars += 1
                continue
            name = _lower(name_match.group())
            limit = (COST_BUDGET - tree.cost) // ATTRIBUTE_COST + 2
            end, kept, count, self_closing, flags = _tag(text, name_match.end(), limit)
            if end < 0:  # a tag cut off by the end of the input is dropped
                pos = size
                break
            tree.cost += ATTRIBUTE_COST * count
            for _, value in kept:
                if value:  # html5lib decodes character references in attribute values
                    tree.cost += REFERENCE_COST * value.count("&")
            if closing:
                piece = f"</{name}>"
                tree.end_tag(name)
            elif (name in _RAW_DROPPED or name == "title") and not _foreign(tree, name):
                tree.cost += RAW_SKIP_COST
                raw_end, after = _raw_end(text, name, end)
                if name == "title" and title is None:
                    title = html.unescape(text[end:raw_end])
                pos = after
                continue
            else:
                prune = pruning is None and (
                    flags & HIDDEN
                    or name in _PRUNED
                    or (flags & MENU and name in _MENU_PRUNED)
                    or (flags & LIST_MENU and name in _LISTS)
                )
                if prune:
                    # Not rendered: its class key is no use to the selection either.
                    kept = [item for item in kept if item[0] != CLASS_ATTRIBUTE]
                    if all(key != "hidden" for key, _ in kept):
                        kept.append(("hidden", None))
                attributes = (
                    ""
                    if pruning is not None
                    else "".join(
                        f" {key}" if value is None else f' {key}="{_escape(value)}"'
                        for key, value in kept
                    )
                )
                piece = f"<{name}{attributes}{'/' if self_closing else ''}>"
                raw = name in _RAW_KEPT or name == "plaintext"
                raw = raw and not _foreign(tree, name)
                below = tree.stack[-1] if tree.stack else None
                tree.start_tag(name, f"{name}{attributes}", self_closing)
                if prune and tree.stack and tree.stack[-1] is not below:
                    pruning = tree.stack[-1]
                if raw and name != "plaintext":
                    raw_end, after = _raw_end(text, name, end)
                    content = "" if pruning is not None else text[end:raw_end]
                    # Each "<" of raw text is a state change to html5lib's tokenizer, each
                    # "&" of a textarea a reference.
                    tree.cost += REFERENCE_COST * (content.count("&") + content.count("<"))
                    piece = f"{piece}{content}</{name}>"
                    end = after
                    text_chars += len(content)
                elif raw:
                    content = "" if pruning is not None else text[end:]
                    tree.cost += REFERENCE_COST * content.count("&")
                    piece += content
                    text_chars += size - end
                    end = size
            piece_bytes = len(piece) if piece.isascii() else len(piece.encode("utf-8", "replace"))
            if size_out + piece_bytes > MAX_PARSER_INPUT:
                break
            if tree.cost > COST_BUDGET:
                raise _LimitHit
            out.append(piece)
            size_out += piece_bytes
            pos = end
        if tree.cost > COST_BUDGET:
            raise _LimitHit
    except _LimitHit:
        if text_chars < ENOUGH_TEXT:
            return Scan(None, _title(title), tree.cost, tree.depth)
    return Scan("".join(out), _title(title), tree.cost, tree.depth, cut=pos < size)


def _title(title: str | None) -> str:
    return " ".join(title.split())[:300] if title else ""


#: A page title as the text shows it: one line, at most 300 characters.
title_line = _title


# -- reduction to text ---------------------------------------------------------------------

_BLOCK_NAMES = (
    "address|article|aside|blockquote|br|caption|center|dd|details|dialog|dir|div|dl|dt"
    "|fieldset|figcaption|figure|footer|form|h[1-6]|header|hgroup|hr|li|listing|main|menu|nav"
    "|ol|p|pre|search|section|summary|table|tbody|td|tfoot|th|thead|tr|ul|xmp"
)
# The lookaheads fail fast on "<" not followed by a letter, before the alternation of names.
_BLOCK_TAG_RE = re.compile(
    rf"</?(?=[A-Za-z])(?:{_BLOCK_NAMES})(?![^\t\n\f\r />])[^>]*>", re.IGNORECASE
)
_ANY_TAG_RE = re.compile(r"</?[A-Za-z][^>]*>|<[!?][^>]*>|</>")
# A block tag becomes this (then a line break): it keeps the tag's ">", so the second pass
# finds every other tag where a single pass would (never scanning on past a removed ">").
_BLOCK_MARK = "\uffff>"
_TAG_START_RE = re.compile(r"</?[A-Za-z]|<[!?]")
_SPECIAL_START_RE = re.compile(
    r"<(?=[!A-Za-z])(?:!--|(script|style|noscript|iframe|noembed|noframes|title|textarea|xmp|template"
    r"|plaintext)(?![^\t\n\f\r />]))",
    re.IGNORECASE,
)
_TEMPLATE_RE = re.compile(r"<(/?)template(?![^\t\n\f\r />])", re.IGNORECASE)


def _template_end(text: str, pos: int) -> int:
    """Position after the ``</template>`` that closes the template opened before ``pos``."""
    depth = 1
    while True:
        match = _TEMPLATE_RE.search(text, pos)
        if match is None:
            return len(text)
        pos = match.end()
        depth += -1 if match.group(1) else 1
        if depth == 0:
            return _bogus_end(text, pos)


def strip_special(text: str) -> tuple[str, str | None]:
    """Drop comments and the content of script, style, template and the like."""
    parts: list[str] = []
    title: str | None = None
    pos = 0
    while True:
        match = _SPECIAL_START_RE.search(text, pos)
        if match is None:
            parts.append(text[pos:])
            return "".join(parts), title
        parts.append(text[pos : match.start()])
        name = match.group(1)
        if name is None:
            pos = _skip_comment(text, match.start())
            continue
        name = name.lower()
        after = _tag(text, match.end())[0]
        if after < 0:
            return "".join(parts), title
        if name == "plaintext":
            parts.append("\n" + html.escape(text[after:], quote=False))
            return "".join(parts), title
        if name == "template":
            pos = _template_end(text, after)
            continue
        raw_end, pos = _raw_end(text, name, after)
        if name in _RAW_KEPT:
            raw = text[after:raw_end]
            if name == "textarea":  # RCDATA: character references count, tags do not
                raw = html.unescape(raw)
            parts.append("\n" + html.escape(raw, quote=False) + "\n")
        elif name == "title" and title is None:
            title = html.unescape(text[after:raw_end])


#: Tags (``<``) and character references (``&``) the reduction to text and the search for
#: the main content (:mod:`.region`) read at most: past them the rest of the page is left
#: out.  A realistic 2 MiB page has about 40,000, a mega-menu of 6,000 links 25,000, a
#: page the pre-scan's cost budget stops with comments alone 133,000; 2 MiB of ``<a>`` has
#: 700,000, and reading them all took twice the old time limit.
MAX_REDUCE_TOKENS = 150_000
_REDUCE_CHUNK = 16 * 1024
_REDUCE_TOKEN_RE = re.compile("[<&]")


def reducible(text: str) -> str:
    """The part of ``text`` the reduction reads: up to its ``MAX_REDUCE_TOKENS``-th ``<`` or
    ``&`` (counted by the string methods, a chunk at a time)."""
    count = 0
    for start in range(0, len(text), _REDUCE_CHUNK):
        chunk = text[start : start + _REDUCE_CHUNK]
        tokens = chunk.count("<") + chunk.count("&")
        if count + tokens > MAX_REDUCE_TOKENS:
            # The first token of this chunk that is not read.
            first = next(islice(_REDUCE_TOKEN_RE.finditer(chunk), MAX_REDUCE_TOKENS - count, None))
            return text[: start + first.start()]
        count += tokens
    return text


def reduce_to_text(text: str) -> tuple[str, str]:
    """Markup reduced to text without a parser: tags dropped, block tags made line breaks.

    Returns the text and the page title.  Linear: each regular expression applies its
    quantifiers to single character classes, and the tag patterns only run over the part of
    the input before its last ``>``, so a match attempt never fails after a long scan.
    Bounded by work: it reads the page up to its ``MAX_REDUCE_TOKENS``-th tag or character
    reference (:func:`reducible`).
    """
    stripped, title = strip_special(reducible(text))
    last = stripped.rfind(">") + 1
    head, tail = stripped[:last], stripped[last:]
    cut = _TAG_START_RE.search(tail)
    if cut is not None:  # a tag cut off by the end of the input is dropped
        tail = tail[: cut.start()]
    # Template replacements only (a Python callback per tag costs a microsecond each).
    head = _BLOCK_TAG_RE.sub(_BLOCK_MARK, head.replace("\uffff", "\ufffd"))
    head = _ANY_TAG_RE.sub("", head).replace(_BLOCK_MARK, "\n")
    reduced = html.unescape(head + tail)
    lines = (" ".join(line.split()) for line in reduced.split("\n"))
    return "\n".join(line for line in lines if line), _title(title)
