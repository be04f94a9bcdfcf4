"""One iterative renderer from a parsed tree to readable text, and the text sink it writes to."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from itertools import islice
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit
from xml.etree.ElementTree import Element

import html5lib
from html5lib._tokenizer import HTMLTokenizer
from html5lib.treebuilders import getTreeBuilder

from .hints import words
from .limits import MAX_DEPTH, MAX_TEXT_CHARS, Deadline, DeadlinePassed

__all__ = ["PARSERS", "Sink", "finish", "parse", "render"]


_SVG = "{http://www.w3.org/2000/svg}"
_DROPPED = words(
    "script style noscript template head nav header footer aside form iframe svg canvas button"
    " select title object embed dialog"
)
# header and footer are page chrome only outside sectioning content (HTML-ARIA "banner").
_SECTIONING = frozenset({"article", "main", "section"})
_LINE_BLOCKS = words(
    "address article body center dd details dir div dl dt fieldset figcaption hgroup"
    " html legend li listing main search section summary tr caption"
)
_PARAGRAPH_BLOCKS = words(
    "p blockquote figure h1 h2 h3 h4 h5 h6 hr pre xmp plaintext table textarea"
)
_HEADING_LEVEL = {f"h{level}": level for level in range(1, 7)}
_LISTS = frozenset({"ul", "ol", "menu", "dir"})
_DROPPED_SCHEMES = frozenset({"javascript", "data", "vbscript"})
#: The text of a same-page link that only marks a permalink (Sphinx's "¶", "#", "§").
_PERMALINK_GLYPHS = frozenset({"\u00b6", "#", "\u00a7", "\U0001f517", "\u2693"})
#: A link label longer than this cannot spell out its (at most 2,048-character) URL.
_MAX_LABEL_CHARS = 2100
_MAX_URL_CHARS = 2048
_URL_STRIP = str.maketrans("", "", "\t\n\r")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_BLANK_LINES_RE = re.compile(r"\n\n\n+")
#: <html> (the root html5lib returns) and <body> sit above the elements the depth bound counts.
_ROOT_DEPTH = 1


class Sink:
    """Collects text: whitespace collapsed, block breaks, at most one blank line in a row."""

    def __init__(self, limit: int = MAX_TEXT_CHARS) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.limit = limit
        self.breaks = 0
        self.space = False
        self.line_start = True
        self.prefix = ""
        # In a table cell, block breaks before its first text are dropped, so the cell stays
        # on its row ("a | b", not "a\n\n|\n\nb"); a list item or heading starts a line.
        self.hold = False

    @property
    def full(self) -> bool:
        return self.size > self.limit

    def block(self, breaks: int) -> None:
        """Start a new line (1) or paragraph (2) before the next text."""
        if not self.hold:
            self.breaks = max(self.breaks, breaks)

    def _append(self, chunk: str) -> None:
        self.parts.append(chunk)
        self.size += len(chunk)

    def _start(self) -> None:
        self.hold = False
        if self.breaks:
            if self.size:
                self._append("\n" * self.breaks)
            self.line_start = True
            self.breaks = 0
        if self.line_start:
            if self.prefix:
                self._append(self.prefix)
                self.prefix = ""
            self.line_start = False
        elif self.space:
            self._append(" ")
        self.space = False

    def text(self, text: str) -> None:
        words = text.split()
        if not words:
            self.space = self.space or bool(text)
            return
        if text[0].isspace():
            self.space = True
        self._start()
        self._append(" ".join(words))
        self.space = text[-1].isspace()

    def preformatted(self, text: str) -> None:
        self._start()
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        self._append(text)
        self.line_start = text.endswith("\n")

    def inline(self, chunk: str) -> None:
        """Write ``chunk`` even when no text follows it (the `` | `` between table cells)."""
        lstrip = self.line_start or bool(self.breaks) or self.parts[-1].endswith(" ")
        self.space = False
        self._start()
        self._append(chunk.lstrip() if lstrip else chunk)

    def line_prefix(self, prefix: str) -> None:
        if self.hold:
            self.breaks = max(self.breaks, 1)
            self.hold = False
        self.prefix = prefix

    def suffix(self, chunk: str) -> None:
        """Append ``chunk`` to the text written last, leaving pending breaks and space."""
        self._append(chunk)

    def since(self, index: int) -> str:
        """The text written since ``len(self.parts)`` was ``index``."""
        return "".join(self.parts[index:])

    def cell(self, separator: bool) -> int:
        """Start a table cell (after `` | `` unless it is the row's first); returns a mark."""
        if separator:
            self.inline(" | ")
        self.hold = True
        return self.size

    def end_cell(self, mark: int) -> None:
        """End a cell: breaks its text asked for at its end are dropped, so the row goes on."""
        if self.size > mark:
            self.breaks = 0
        self.hold = False

    def getvalue(self) -> str:
        return "".join(self.parts)


def finish(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """Final clean-up shared by every path: newlines, control characters, blank lines, cap."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL_RE.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = _BLANK_LINES_RE.sub("\n\n", text).strip("\n")
    return text[:limit]


#: Tokens, elements or rendered nodes between two looks at the clock.
_CLOCK_EVERY = 64


class _ClockedTokenizer(HTMLTokenizer):
    """html5lib's tokenizer, looking at the clock between tokens."""

    deadline: Deadline | None = None

    def __iter__(self) -> Any:
        deadline = self.deadline
        for count, token in enumerate(super().__iter__(), 1):
            if deadline is not None and not count % _CLOCK_EVERY and deadline.passed():
                raise DeadlinePassed
            yield token


_ETREE_BUILDER: Any = getTreeBuilder("etree")


class _TreeBuilder(_ETREE_BUILDER):  # type: ignore[misc]
    """The etree builder, looking at the clock when it creates elements (the adoption agency
    and the reconstruction of formatting elements create several for one token)."""

    deadline: Deadline | None = None
    created = 0

    def createElement(self, token: Any) -> Any:  # noqa: N802
        self.created += 1
        if self.deadline is not None and not self.created % _CLOCK_EVERY and self.deadline.passed():
            raise DeadlinePassed
        return super().createElement(token)


class _Parser(html5lib.HTMLParser):
    """html5lib without its error list (recording an error costs a scan of the input chunk),
    with a wall-clock deadline checked between tokens and on every element created."""

    def __init__(self, deadline: Deadline | None) -> None:
        super().__init__(tree=_TreeBuilder, namespaceHTMLElements=False)
        self.deadline = deadline
        self.tree.deadline = deadline

    def parseError(self, errorcode: str = "", datavars: Any = None) -> None:  # noqa: N802
        return None

    def _parse(
        self,
        stream: Any,
        innerHTML: bool = False,  # noqa: N803
        container: Any = "div",
        scripting: bool = False,
        **kwargs: Any,
    ) -> None:
        # html5lib's own _parse, with the clocked tokenizer.  A str input is never re-parsed
        # for another encoding, so html5lib's _ReparseException cannot happen here.
        self.innerHTMLMode = innerHTML
        self.container = container
        self.scripting = scripting
        self.tokenizer = _ClockedTokenizer(stream, parser=self, **kwargs)
        self.tokenizer.deadline = self.deadline
        self.reset()
        self.mainLoop()


#: The HTML5 parsers :func:`parse` can use.
PARSERS = ("lexbor", "html5lib")


def parse(markup: str, *, parser: str = "lexbor", deadline: Deadline | None = None) -> Element:
    """Parse normalised markup into an ``xml.etree`` tree.

    ``lexbor`` (the default) is the C HTML5 parser of selectolax, whose tree is copied into
    ``xml.etree`` elements; ``html5lib`` is the pure-Python one (its ``etree`` builder).
    Both follow the HTML5 tree construction algorithm.  html5lib raises
    :class:`~django_webfetch.text.limits.DeadlinePassed` once ``deadline`` has passed (it
    looks at the clock between tokens and on every element it creates); lexbor's parse is
    one C call, linear, and the copy of its tree looks at the clock every 64 nodes.
    """
    if parser == "html5lib":
        root: Element = _Parser(deadline).parse(markup)
        return root
    if parser != "lexbor":
        raise ValueError(f"unknown parser {parser!r}")
    return _lexbor(markup, deadline)


def _lexbor(markup: str, deadline: Deadline | None = None) -> Element:
    """Lexbor's tree as ``xml.etree`` elements, copied iteratively (text joined, comments
    dropped)."""
    from selectolax.lexbor import LexborHTMLParser

    document = LexborHTMLParser(markup).root
    root = Element("html")
    if document is None:  # pragma: no cover - lexbor always makes an <html> element
        return root
    stack = [(document, root)]
    clock = 0
    while stack:
        clock += 1
        if deadline is not None and not clock % _CLOCK_EVERY and deadline.passed():
            raise DeadlinePassed
        node, element = stack.pop()
        last: Element | None = None
        child = node.child
        while child is not None:
            tag = child.tag
            if tag == "-text":
                text = child.text_content or ""
                if last is None:
                    element.text = (element.text or "") + text
                else:
                    last.tail = (last.tail or "") + text
            elif tag is not None and not tag.startswith("-"):
                attributes = child.attributes
                copy = Element(
                    tag,
                    {key: value or "" for key, value in attributes.items()} if attributes else {},
                )
                element.append(copy)
                last = copy
                stack.append((child, copy))
            child = child.next
    return root


def _resolve(href: str, base: str | None) -> str | None:
    href = href.strip(" \t\n\r\f").translate(_URL_STRIP)
    if not href:
        return None
    try:
        url = urljoin(base, href) if base else href
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        return None
    if scheme in _DROPPED_SCHEMES or len(url) > _MAX_URL_CHARS:
        return None
    return url


def _hidden(element: Element) -> bool:
    return (
        element.get("hidden") is not None
        or element.get("aria-hidden", "").strip().lower() == "true"
    )


class _Close:
    __slots__ = ("cell", "index", "mark", "name", "url")

    def __init__(self, name: str) -> None:
        self.name = name
        self.url: str | None = None
        self.mark = 0  # sink.size when the element opened
        self.index = 0  # len(sink.parts) when the element opened
        self.cell = False


def _bare(url: str) -> str:
    """A URL as people write it in text: no scheme, no ``www.``, no trailing slash."""
    bare = url.partition("://")[2] or url
    return bare.removeprefix("www.").rstrip("/").lower()


def _spells_url(label: str, url: str) -> bool:
    """Whether a link's text already shows its URL (``<a href=x>x</a>``)."""
    return _bare(label.strip()) == _bare(url)


def _holds_content(element: Element) -> bool:
    """Whether a form holds the page (ASP.NET wraps every page in one form)."""
    if element.find(".//main") is not None or element.find(".//article") is not None:
        return True
    return sum(1 for _ in islice(element.iter("p"), 3)) == 3


def _dropped(name: str, element: Element, sectioning: int, chrome: bool) -> bool:
    if name in ("header", "footer"):
        if not chrome:
            return _hidden(element)
        # Outside sectioning content a header is the site's banner, unless it holds the
        # page's headline (and often a standfirst under it).  ``sectioning`` counts the
        # headers kept around this one, so each check looks at a subtree no other check
        # looked at.
        return sectioning == 0 and (
            name == "footer" or next(element.iter("h1"), None) is None or _hidden(element)
        )
    if name == "form":
        return chrome and not _holds_content(element)
    return name in _DROPPED or _hidden(element)


def _host(url: str | None) -> str:
    if not url:
        return ""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return ""
    return host.removeprefix("www.")


#: Files a link in the main content points to as a reference, even on the page's own site.
_DOCUMENTS = tuple(
    f".{suffix}"
    for suffix in words("pdf doc docx odt rtf xls xlsx ods csv ppt pptx odp zip epub txt json xml")
)


def _reference(url: str, own_host: str) -> bool:
    """Whether a link in the main content is a reference (its URL is shown) rather than
    navigation: a link to another site, or to a document."""
    host = _host(url)
    if host and host != own_host:
        return True
    try:
        path = urlsplit(url).path.lower()
    except ValueError:  # pragma: no cover - _resolve already parsed it
        return False
    return path.endswith(_DOCUMENTS)


_SCHEME_RE = re.compile(r"[ \t\n\r\f]*[A-Za-z][A-Za-z0-9+.\-]*:")


def _internal(href: str) -> bool:
    """Whether an ``href`` is a relative link (no scheme, no ``//host``) to something other
    than a document: a link within the site."""
    if _SCHEME_RE.match(href) or href.lstrip(" \t\n\r\f").startswith(("//", "\\", "/\\")):
        return False
    path = href.partition("#")[0].partition("?")[0].strip().lower()
    return not path.endswith(_DOCUMENTS)


def _permalink(element: Element) -> bool:
    """A link that only holds a permalink glyph (Sphinx's "¶")."""
    return len(element) == 0 and (element.text or "").strip() in _PERMALINK_GLYPHS


def render(
    root: Element | Sequence[Element],
    sink: Sink,
    base_url: str | None,
    *,
    pruned: Collection[Element] = (),
    main: bool = False,
    deadline: Deadline | None = None,
) -> None:
    """Render the tree under ``root`` into ``sink``, iteratively, to ``MAX_DEPTH`` levels.

    A link is ``text (url)``, except that the URL is left out when it leads to this page
    (``#section``), when the text already shows it, or when an earlier link showed it.

    ``main``: ``root`` is a list of the page's main-content elements (see :mod:`.main`);
    ``pruned`` elements under them are skipped, headers, footers and forms are kept (what is
    chrome among them was pruned), and only links to other sites or to documents show their
    URL: a link within the site is navigation, a link elsewhere or to a file is a reference.
    Raises :class:`~django_webfetch.text.limits.DeadlinePassed` once ``deadline`` has passed.
    """
    clock = 0
    roots = [root] if isinstance(root, Element) else list(root)
    stack: list[tuple[Element, int] | _Close | str] = [(item, 0) for item in reversed(roots)]
    own_host = _host(base_url)
    lists: list[int] = []  # item counters of the open lists, -1 for an unordered list
    page = urldefrag(base_url)[0] if base_url else None
    shown: set[str] = set()  # URLs already in the text
    sectioning = 0
    pre = 0
    cells: list[int] = []  # cells seen in each open row
    while stack and not sink.full:
        clock += 1
        if deadline is not None and not clock % _CLOCK_EVERY and deadline.passed():
            raise DeadlinePassed
        item = stack.pop()
        if isinstance(item, str):
            if pre:
                sink.preformatted(item)
            else:
                sink.text(item)
            continue
        if isinstance(item, _Close):
            name = item.name
            if item.url is not None and sink.size > item.mark:
                url = item.url
                if url not in shown:
                    shown.add(url)
                    label = (
                        sink.since(item.index) if sink.size - item.mark < _MAX_LABEL_CHARS else ""
                    )
                    if not _spells_url(label, url):
                        sink.suffix(f" ({url})")
            if item.cell:
                sink.end_cell(item.mark)
            if name in _SECTIONING or name == "header":
                sectioning -= 1
            if name in ("pre", "xmp", "listing", "plaintext", "textarea"):
                pre -= 1
            if name in _LISTS:
                lists.pop()
                sink.block(1 if lists else 2)
            if name == "tr":
                cells.pop()
            if name in _PARAGRAPH_BLOCKS or name in _HEADING_LEVEL:
                sink.block(2)
            elif name in _LINE_BLOCKS:
                sink.block(1)
            continue
        element, depth = item
        if depth == 0:
            sink.block(1)
        elif element.tail:
            stack.append(element.tail)
        tag: object = element.tag  # a function for comments
        if not isinstance(tag, str) or depth > MAX_DEPTH + _ROOT_DEPTH:
            continue
        name = tag
        if tag.startswith("{"):
            if tag.startswith(_SVG):
                continue
            name = tag.rpartition("}")[2]
        if _dropped(name, element, sectioning, not main) or element in pruned:
            continue
        close = _Close(name)
        if name in _SECTIONING or name == "header":
            sectioning += 1
        if name in _PARAGRAPH_BLOCKS or name in _HEADING_LEVEL:
            sink.block(2)
        elif name in _LINE_BLOCKS:
            sink.block(1)
        if name in _HEADING_LEVEL:
            sink.line_prefix("#" * _HEADING_LEVEL[name] + " ")
        elif name == "li":
            marker = "- "
            if lists and lists[-1] >= 0:
                lists[-1] += 1
                marker = f"{lists[-1]}. "
            sink.line_prefix("  " * max(len(lists) - 1, 0) + marker)
        elif name in _LISTS:
            sink.block(1 if lists else 2)
            lists.append(0 if name == "ol" else -1)
        elif name == "br":
            sink.block(1)
        elif name in ("pre", "xmp", "listing", "plaintext", "textarea"):
            pre += 1
        elif name == "tr":
            cells.append(0)
        elif name in ("td", "th") and cells:
            close.cell = True
            close.mark = sink.cell(separator=cells[-1] > 0)
            cells[-1] += 1
        elif name == "a":
            href = element.get("href")
            if main and href is not None and _internal(href):
                # A link within the site shows no URL in the main content: no need to
                # resolve it (most links of a page are such links).
                if href.lstrip().startswith("#") and _permalink(element):
                    continue
                href = None
            if href is not None:
                target = _resolve(href, base_url)
                if target is not None and page is not None and urldefrag(target)[0] == page:
                    if _permalink(element):
                        continue
                    target = None
                if main and target is not None and not _reference(target, own_host):
                    target = None
                close.url = target
                close.mark = sink.size
                close.index = len(sink.parts)
        stack.append(close)
        stack.extend((child, depth + 1) for child in reversed(element))
        if element.text:
            stack.append(element.text)
