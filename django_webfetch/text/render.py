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
from .limits import (
    MAX_DEPTH,
    MAX_PARSE_STEPS,
    MAX_RENDER_STEPS,
    MAX_TEXT_CHARS,
    Deadline,
    Meter,
)

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


class _Mark:
    """An inline opener (``**``, ``[``, a backtick run) waiting for the text it opens."""

    __slots__ = ("index", "text", "written")

    def __init__(self, text: str) -> None:
        self.text = text
        self.index = -1  # where in Sink.parts it was written
        self.written = False


#: A line that starts with one of these would read as Markdown syntax (a heading, a quote,
#: a list item, a table row): it gets a backslash.
_LINE_SYNTAX_RE = re.compile(r"[#>+*|=`~-]|<[A-Za-z/!?]|\d{1,9}[.)](?=\s|$)")


class Sink:
    """Collects text: whitespace collapsed, block breaks, at most one blank line in a row.

    ``markdown``: page text is escaped where it would read as Markdown syntax (``[``, ``]``,
    a ``|`` in a table cell, a line that starts like a heading, quote or list item), so
    that the only links, tables and quotes are the renderer's own.
    """

    def __init__(self, limit: int = MAX_TEXT_CHARS, *, markdown: bool = False) -> None:
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
        self.markdown = markdown
        #: What every line starts with (``> `` in a quote, spaces under a list item).
        self.margins: list[str] = []
        #: >0 inside a heading or a Markdown table cell: block breaks become spaces.
        self.flat = 0
        #: >0 inside a Markdown table cell: ``|`` is escaped.
        self.in_cell = 0
        self.pending: list[_Mark] = []
        #: The number of margins the pending breaks' blank lines carry (the fewest open
        #: when a break was asked for: the blank line before a quote is not quoted).
        self.break_depth = 0

    @property
    def full(self) -> bool:
        return self.size > self.limit

    def block(self, breaks: int) -> None:
        """Start a new line (1) or paragraph (2) before the next text."""
        if self.flat:
            self.space = True
        elif not self.hold:
            if not self.breaks:
                self.break_depth = len(self.margins)
            self.break_depth = min(self.break_depth, len(self.margins))
            self.breaks = max(self.breaks, breaks)

    def _append(self, chunk: str) -> None:
        self.parts.append(chunk)
        self.size += len(chunk)

    def _margin(self) -> str:
        return "".join(self.margins)

    def _start(self) -> bool:
        """Write what comes before the next text; True when it starts a line."""
        self.hold = False
        started = False
        if self.breaks:
            if self.size:
                if self.margins:
                    # A blank line inside a quote is ">" (a bare blank line would end it).
                    blank = "".join(self.margins[: self.break_depth]).rstrip()
                    self._append("\n" + (blank + "\n") * (self.breaks - 1))
                else:
                    self._append("\n" * self.breaks)
            self.line_start = True
            self.breaks = 0
        if self.line_start:
            if self.margins:
                margin = self._margin()
                if self.prefix:
                    # A list item's marker stands in for its own (last) margin.
                    margin = "".join(self.margins[:-1])
                self._append(margin)
            if self.prefix:
                self._append(self.prefix)
                self.prefix = ""
            self.line_start = False
            started = True
        elif self.space and not self.parts[-1].endswith(" "):
            self._append(" ")
        self.space = False
        if self.pending:
            for mark in self.pending:
                mark.index = len(self.parts)
                mark.written = True
                self._append(mark.text)
            self.pending = []
            started = False
        return started

    def text(self, text: str) -> None:
        # Control characters go now, not only in ``finish``: the line-start escapes must see
        # the text as it will read ("\x1b```" is a code fence once the escape is gone).
        words = [w for w in (_CONTROL_RE.sub("", word) for word in text.split()) if w]
        if not words:
            self.space = self.space or bool(text)
            return
        if text[0].isspace():
            self.space = True
        bare = (self.line_start or bool(self.breaks)) and not self.prefix and not self.pending
        started = self._start()
        chunk = " ".join(words)
        if self.markdown:
            chunk = self._escape(chunk, started and bare)
        self._append(chunk)
        self.space = text[-1].isspace()

    def _escape(self, chunk: str, line_start: bool) -> str:
        if "[" in chunk or "]" in chunk:
            chunk = chunk.replace("[", "\\[").replace("]", "\\]")
        if self.in_cell and "|" in chunk:
            chunk = chunk.replace("|", "\\|")
        if line_start:
            match = _LINE_SYNTAX_RE.match(chunk)
            if match is not None:
                # "1990. A year" must not start an ordered list: "1990\. A year".
                at = match.end() - 1 if chunk[0].isdigit() else 0
                chunk = f"{chunk[:at]}\\{chunk[at:]}"
        return chunk

    def preformatted(self, text: str) -> None:
        self._start()
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        if self.margins:
            text = text.replace("\n", "\n" + self._margin())
        self._append(text)
        self.line_start = text.endswith("\n")

    def inline(self, chunk: str) -> None:
        """Write ``chunk`` even when no text follows it (the `` | `` between table cells)."""
        lstrip = self.line_start or bool(self.breaks) or self.parts[-1].endswith(" ")
        self.space = False
        self._start()
        self._append(chunk.lstrip() if lstrip else chunk)

    def line_prefix(self, prefix: str) -> None:
        if self.flat:
            return
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

    # -- Markdown ------------------------------------------------------------------------

    def open_mark(self, text: str) -> _Mark:
        """An opener written just before the next text (after its space and line start)."""
        mark = _Mark(text)
        self.pending.append(mark)
        return mark

    def drop_mark(self, mark: _Mark) -> bool:
        """Forget an opener: True when it was written (and is now blanked)."""
        if not mark.written:
            self.pending.remove(mark)
            return False
        self.size -= len(self.parts[mark.index])
        self.parts[mark.index] = ""
        return True

    def open_code(self) -> int:
        """Start a fenced code block on its own line; returns the index of its fence."""
        self.space = False
        self.line_start = self.line_start or bool(self.breaks) or self.size == 0
        self._start()
        index = len(self.parts)
        self._append("```")
        self._append("\n" + self._margin())
        self.line_start = False
        return index

    def close_code(self, index: int) -> None:
        """End a code block with a fence longer than any backtick run inside it."""
        content = self.since(index + 2)
        if not content.strip():
            for position in range(index, len(self.parts)):
                self.size -= len(self.parts[position])
            del self.parts[index:]
            self.line_start = True
            self.breaks = 2
            return
        # Backticks, or tildes when the code holds longer runs of backticks.
        backticks = longest_run(content, _BACKTICKS_RE)
        tildes = longest_run(content, _TILDES_RE) if backticks >= 9 else 0
        if backticks < 9 or backticks <= tildes:
            fence = "`" * max(3, backticks + 1)
        else:
            fence = "~" * max(3, tildes + 1)
        self.replace(index, fence)
        self._append(("" if content.endswith("\n") else "\n") + self._margin() + fence)
        self.line_start = False
        self.breaks = 2

    def replace(self, index: int, text: str) -> None:
        """Replace the part written at ``index`` (an opener chosen once its content is known)."""
        self.size += len(text) - len(self.parts[index])
        self.parts[index] = text

    def getvalue(self) -> str:
        return "".join(self.parts)


_BACKTICKS_RE = re.compile("`+")
_TILDES_RE = re.compile("~+")


def longest_run(text: str, pattern: re.Pattern[str] = _BACKTICKS_RE) -> int:
    """The longest run of backticks (or tildes) in ``text``."""
    return max(map(len, pattern.findall(text)), default=0)


def finish(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """Final clean-up shared by every path: newlines, control characters, blank lines, cap."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL_RE.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    text = _BLANK_LINES_RE.sub("\n\n", text).strip("\n")
    return text[:limit]


class _MeteredTokenizer(HTMLTokenizer):
    """html5lib's tokenizer, one step of the parse meter per token."""

    meter: Meter

    def __iter__(self) -> Any:
        step = self.meter.step
        for token in super().__iter__():
            step()
            yield token


_ETREE_BUILDER: Any = getTreeBuilder("etree")


class _TreeBuilder(_ETREE_BUILDER):  # type: ignore[misc]
    """The etree builder, one step of the parse meter per element it creates (the adoption
    agency and the reconstruction of formatting elements create several for one token)."""

    meter: Meter

    def createElement(self, token: Any) -> Any:  # noqa: N802
        self.meter.step()
        return super().createElement(token)


class _Parser(html5lib.HTMLParser):
    """html5lib without its error list (recording an error costs a scan of the input chunk),
    counting its tokens and the elements it creates on one :class:`~.limits.Meter`."""

    def __init__(self, meter: Meter) -> None:
        super().__init__(tree=_TreeBuilder, namespaceHTMLElements=False)
        self.meter = meter
        self.tree.meter = meter

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
        # html5lib's own _parse, with the metered tokenizer.  A str input is never re-parsed
        # for another encoding, so html5lib's _ReparseException cannot happen here.
        self.innerHTMLMode = innerHTML
        self.container = container
        self.scripting = scripting
        self.tokenizer = _MeteredTokenizer(stream, parser=self, **kwargs)
        self.tokenizer.meter = self.meter
        self.reset()
        self.mainLoop()


#: The HTML5 parsers :func:`parse` can use.
PARSERS = ("lexbor", "html5lib")


def parse(
    markup: str,
    *,
    parser: str = "lexbor",
    deadline: Deadline | None = None,
    budget: int | None = None,
    meter: Meter | None = None,
) -> Element:
    """Parse normalised markup into an ``xml.etree`` tree.

    ``lexbor`` (the default) is the C HTML5 parser of selectolax, whose tree is copied into
    ``xml.etree`` elements; ``html5lib`` is the pure-Python one (its ``etree`` builder).
    Both follow the HTML5 tree construction algorithm.

    The parse counts its work: with html5lib one step per token and per element its tree
    builder creates, with Lexbor (one linear C call) one step per node of its tree copied.
    Past ``budget`` steps (``MAX_PARSE_STEPS``) it raises
    :class:`~django_webfetch.text.limits.OverBudget` (the same pages on every machine); once
    the safety net ``deadline`` has fired (looked at every 64 steps),
    :class:`~django_webfetch.text.limits.DeadlinePassed`.  ``meter``
    (instead of ``budget`` and ``deadline``) counts the steps where the caller reads them.
    """
    if meter is None:
        meter = Meter(MAX_PARSE_STEPS if budget is None else budget, deadline)
    if parser == "html5lib":
        root: Element = _Parser(meter).parse(markup)
        return root
    if parser != "lexbor":
        raise ValueError(f"unknown parser {parser!r}")
    return _lexbor(markup, meter)


def _lexbor(markup: str, meter: Meter) -> Element:
    """Lexbor's tree as ``xml.etree`` elements, copied iteratively (text joined, comments
    dropped)."""
    from selectolax.lexbor import LexborHTMLParser

    document = LexborHTMLParser(markup).root
    root = Element("html")
    if document is None:  # pragma: no cover - lexbor always makes an <html> element
        return root
    stack = [(document, root)]
    while stack:
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
                meter.step()
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
    __slots__ = ("cell", "code", "index", "mark", "name", "opener", "quote", "url", "margin")

    def __init__(self, name: str) -> None:
        self.name = name
        self.url: str | None = None
        self.mark = 0  # sink.size when the element opened
        self.index = 0  # len(sink.parts) when the element opened
        self.cell = False
        self.opener: _Mark | None = None  # Markdown: emphasis, inline code, a link's "["
        self.code = -1  # Markdown: the index of a code block's opening fence
        self.quote = False
        self.margin = False  # Markdown: a list item's margin was pushed


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


#: Markdown: a table is a pipe table when every cell holds at most this many characters
#: and no block (a list, a heading, code, a quote, another table) and it has at most
#: :data:`MAX_TABLE_COLUMNS` columns; otherwise it is a layout table, and its cells are
#: rendered as blocks (nothing is cut).
MAX_CELL_CHARS = 250
MAX_TABLE_COLUMNS = 12
_CELL_BLOCKS = words("table ul ol dl pre blockquote h1 h2 h3 h4 h5 h6 hr listing xmp")
_ROW_GROUPS = frozenset({"thead", "tbody", "tfoot"})
_EMPHASIS = {"strong": "**", "b": "**", "em": "*", "i": "*"}
_CODE = frozenset({"code", "kbd", "samp", "tt"})
#: Emphasis longer than this (a whole standfirst in italics) is layout, not meaning.
_MAX_EMPHASIS_CHARS = 200
_MAX_ALT_CHARS = 300


def _cells(row: Element) -> list[Element]:
    return [cell for cell in row if cell.tag in ("td", "th")]


def _rows(table: Element) -> list[list[Element]]:
    # Both parsers put every row in a row group (HTML5 inserts the <tbody>).
    rows: list[list[Element]] = []
    for child in table:
        if child.tag in _ROW_GROUPS:
            rows.extend(_cells(row) for row in child if row.tag == "tr")
    return rows


def _pipe_table(table: Element) -> int:
    """The number of columns when ``table`` reads as a pipe table (0: a layout table).

    Each cell is walked until it proves too long or holds a block, so a nested table is
    never walked by the tables around it: linear over all the tables of a page.
    """
    rows = _rows(table)
    columns = max(map(len, rows), default=0)
    if not rows or not 0 < columns <= MAX_TABLE_COLUMNS:
        return 0
    for row in rows:
        for cell in row:
            size = 0
            stack = [cell]
            while stack:
                element = stack.pop()
                if element is not cell:
                    if element.tag in _CELL_BLOCKS:
                        return 0
                    size += len((element.tail or "").strip())
                size += len((element.text or "").strip())
                if size > MAX_CELL_CHARS:
                    return 0
                stack.extend(element)
    return columns


class Links:
    """The URLs of a Markdown text's reference links, numbered from 1 in order of use."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self._numbers: dict[str, int] = {}

    def number(self, url: str) -> int:
        number = self._numbers.get(url)
        if number is None:
            self.urls.append(url)
            number = self._numbers[url] = len(self.urls)
        return number


def render(
    root: Element | Sequence[Element],
    sink: Sink,
    base_url: str | None,
    *,
    pruned: Collection[Element] = (),
    main: bool = False,
    deadline: Deadline | None = None,
    links: Links | None = None,
    budget: int | None = None,
    meter: Meter | None = None,
) -> None:
    """Render the tree under ``root`` into ``sink``, iteratively, to ``MAX_DEPTH`` levels.

    A link is ``text (url)``, except that the URL is left out when it leads to this page
    (``#section``), when the text already shows it, or when an earlier link showed it.
    With ``links`` (a Markdown sink), a link is ``[text][n]`` instead, its URL the ``n``-th
    of ``links``; headings, lists, quotes, code, tables and emphasis are Markdown too.

    ``main``: ``root`` is a list of the page's main-content elements (see :mod:`.main`);
    ``pruned`` elements under them are skipped, headers, footers and forms are kept (what is
    chrome among them was pruned), and only links to other sites or to documents show their
    URL: a link within the site is navigation, a link elsewhere or to a file is a reference.
    Each node visited is one step: past ``budget`` steps (``MAX_RENDER_STEPS``) it raises
    :class:`~django_webfetch.text.limits.OverBudget`, and once the safety net ``deadline``
    has fired (looked at every 64 steps), :class:`~django_webfetch.text.limits.DeadlinePassed`.
    ``meter`` (instead of ``budget`` and ``deadline``) counts the steps where the caller
    reads them.
    """
    if meter is None:
        meter = Meter(MAX_RENDER_STEPS if budget is None else budget, deadline)
    markdown = sink.markdown
    roots = [root] if isinstance(root, Element) else list(root)
    stack: list[tuple[Element, int] | _Close | str] = [(item, 0) for item in reversed(roots)]
    own_host = _host(base_url)
    lists: list[int] = []  # item counters of the open lists, -1 for an unordered list
    page = urldefrag(base_url)[0] if base_url else None
    shown: set[str] = set()  # URLs already in the text
    sectioning = 0
    pre = 0
    code = 0  # Markdown: open inline code and code blocks (no emphasis, no links)
    heading = 0
    emphasis: list[str] = []  # Markdown: the open emphasis markers
    cells: list[int] = []  # cells seen in each open row
    # Markdown pipe tables: per open table, its columns (0: layout) and the rows written.
    tables: list[list[int]] = []
    while stack and not sink.full:
        meter.step()
        item = stack.pop()
        if isinstance(item, str):
            if pre:
                sink.preformatted(item)
            else:
                sink.text(item)
            continue
        if isinstance(item, _Close):
            name = item.name
            if item.opener is not None:
                _close_inline(sink, item, links)
            elif item.url is not None and not markdown and sink.size > item.mark:
                url = item.url
                if url not in shown:
                    shown.add(url)
                    label = (
                        sink.since(item.index) if sink.size - item.mark < _MAX_LABEL_CHARS else ""
                    )
                    if not _spells_url(label, url):
                        sink.suffix(f" ({url})")
            if name in _EMPHASIS and item.opener is not None:
                emphasis.pop()
            if name in _CODE and item.opener is not None:
                code -= 1
            if item.cell:
                if markdown:
                    sink.flat -= 1
                    sink.in_cell -= 1
                else:
                    sink.end_cell(item.mark)
            if item.code >= 0:
                sink.close_code(item.code)
                code -= 1
            if item.quote:
                sink.margins.pop()
                sink.block(2)
            if item.margin:
                sink.margins.pop()
            if name in _HEADING_LEVEL and markdown:
                heading -= 1
                sink.flat -= 1
            if name in _SECTIONING or name == "header":
                sectioning -= 1
            if name in ("pre", "xmp", "listing", "plaintext", "textarea"):
                pre -= 1
            if name in _LISTS:
                lists.pop()
                sink.block(1 if lists else 2)
            if name == "tr":
                count = cells.pop()
                if markdown and tables and tables[-1][0] and count:
                    columns, written = tables[-1]
                    sink.inline(" |" + "  |" * (columns - count))
                    if not written:
                        sink.block(1)
                        sink.inline("|" + " --- |" * columns)
                    tables[-1][1] = written + 1
            if name == "table" and markdown:
                tables.pop()
            if name in _PARAGRAPH_BLOCKS or name in _HEADING_LEVEL:
                sink.block(2)
            elif name in _LINE_BLOCKS or (markdown and name in ("td", "th") and not item.cell):
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
            if markdown:
                heading += 1
                sink.flat += 1
        elif name == "li":
            marker = "- "
            if lists and lists[-1] >= 0:
                lists[-1] += 1
                marker = f"{lists[-1]}. "
            if markdown:
                if not sink.flat:
                    sink.line_prefix(marker)
                    sink.margins.append(" " * len(marker))
                    close.margin = True
            else:
                sink.line_prefix("  " * max(len(lists) - 1, 0) + marker)
        elif name in _LISTS:
            sink.block(1 if lists else 2)
            lists.append(0 if name == "ol" else -1)
        elif name == "br":
            sink.block(1)
        elif name in ("pre", "xmp", "listing", "plaintext", "textarea"):
            pre += 1
            if markdown and pre == 1 and not sink.flat and not code:
                code += 1
                close.code = sink.open_code()
        elif name == "tr":
            cells.append(0)
            if markdown:
                # A pipe table is set off by a blank line (it cannot interrupt a paragraph).
                sink.block(2 if tables and tables[-1][0] and not tables[-1][1] else 1)
        elif name in ("td", "th") and cells:
            if markdown:
                if tables and tables[-1][0]:
                    close.cell = True
                    sink.inline("| " if not cells[-1] else " | ")
                    sink.flat += 1
                    sink.in_cell += 1
                else:
                    sink.block(1)
            else:
                close.cell = True
                close.mark = sink.cell(separator=cells[-1] > 0)
            cells[-1] += 1
        elif name == "table" and markdown:
            columns = 0 if sink.flat else _pipe_table(element)
            tables.append([columns, 0])
            if columns:
                sink.block(2)
        elif name == "blockquote" and markdown and not sink.flat:
            sink.block(2)
            sink.margins.append("> ")
            close.quote = True
        elif name in _EMPHASIS and markdown:
            marker = _EMPHASIS[name]
            if not heading and not code and marker not in emphasis:
                emphasis.append(marker)
                close.opener = sink.open_mark(marker)
                close.index = len(sink.parts)
        elif name in _CODE and markdown:
            if not code and not pre:
                code += 1
                close.opener = sink.open_mark("`")
                close.index = len(sink.parts)
        elif name == "img" and markdown:
            alt = " ".join((element.get("alt") or "").split())[:_MAX_ALT_CHARS]
            if alt:
                sink.text(f"(image: {alt})")
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
                if target is not None and links is not None and not code:
                    close.opener = sink.open_mark("[")
        stack.append(close)
        stack.extend((child, depth + 1) for child in reversed(element))
        if element.text:
            stack.append(element.text)


def _close_inline(sink: Sink, item: _Close, links: Links | None) -> None:
    """Close a Markdown link, emphasis or inline code span opened by ``item.opener``."""
    opener = item.opener
    assert opener is not None
    if not opener.written:
        sink.drop_mark(opener)
        return
    content = sink.since(opener.index + 1)
    name = item.name
    if name == "a":
        url = item.url
        assert url is not None and links is not None
        if _spells_url(content.strip("\\"), url) or "\n" in content or not content.strip():
            # The text already shows the URL, or the link holds blocks (a product card):
            # a bare reference after its text.
            sink.drop_mark(opener)
            if _spells_url(content, url):
                return
            sink.suffix(f" [link][{links.number(url)}]")
            return
        sink.suffix(f"][{links.number(url)}]")
    elif name in _CODE:
        run = longest_run(content)
        if run:
            fence = "`" * (run + 1)
            sink.replace(opener.index, fence + " ")
            sink.suffix(" " + fence)
        else:
            sink.suffix("`")
    elif len(content) > _MAX_EMPHASIS_CHARS or "\n" in content or not content.strip():
        sink.drop_mark(opener)
    else:
        sink.suffix(opener.text)
