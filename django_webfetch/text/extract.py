"""``extract_text``: a fetched body to bounded, readable text."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from xml.etree.ElementTree import Element

from .charset import decode_body
from .document import Document
from .limits import (
    MAX_STORED_CHARS,
    MAX_TEXT_CHARS,
    TIME_LIMIT,
    Deadline,
    DeadlinePassed,
    OverBudget,
)
from .main import SKIPPED, Selection, consent_notices, hidden, select
from .region import main_region
from .render import PARSERS, Links, Sink, finish, parse, render
from .scan import reduce_to_text, reducible, scan, strip_special, title_line

__all__ = [
    "FORMATS",
    "HTML_TYPES",
    "MAX_BODY_BYTES",
    "MODES",
    "OUT_OF_TIME_NOTE",
    "REASONS",
    "TEXT_TYPES",
    "Extraction",
    "extract",
    "extract_text",
]

#: ``main``: the page's main content (falling back to ``page``); ``page``: the whole page.
MODES = ("main", "page")
#: ``markdown`` (the default): headings, lists, pipe tables, code blocks, quotes, emphasis
#: and reference links; ``text``: plain text (link URLs inline, in parentheses).
FORMATS = ("markdown", "text")

#: The first line of the text when the safety net fired (a machine far slower than a healthy
#: one): what follows is the page's text without its layout (no headings, lists, tables or
#: link URLs).
OUT_OF_TIME_NOTE = "[This page took too long to lay out: its text follows without layout.]"

#: Bodies are cut here (the fetch layer already stops at 2 MiB of decoded body).
MAX_BODY_BYTES = 2 * 1024 * 1024
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: Shown as they are, after newline and control-character clean-up.
TEXT_TYPES = frozenset({"text/plain", "application/json"})


_PERMALINK = " \u00b6\u00a7#\u200b\U0001f517"


def _says_title(selection: Selection, title: str) -> bool:
    """Whether the main content's headline (its first ``<h1>``) says what the ``<title>``
    says (``Headline | Site``, ``Site: Headline``): the title line would repeat it, so it is
    left out.  A title that says more (``GitHub - octo/fastgrep: A fast grep``) stays."""
    stack = list(reversed(selection.roots))
    while stack:
        element = stack.pop()
        if element in selection.pruned or not isinstance(element.tag, str):
            continue
        name = element.tag.rpartition("}")[2]
        if name in SKIPPED or hidden(element):
            continue
        if name == "h1":
            # Without a permalink sign (Sphinx, MkDocs, Docusaurus), as the text shows it.
            headline = " ".join("".join(element.itertext()).split()).strip(_PERMALINK)
            headline = headline.casefold()
            said = " ".join(title.split()).casefold()
            # The title is the headline with the site's name before or after it.
            return bool(headline) and (said.startswith(headline) or said.endswith(headline))
        stack.extend(reversed(element))
    return False


def _media_type(value: str) -> tuple[str, str | None]:
    """The ``type/subtype`` of a Content-Type value, and its charset parameter if any."""
    kind, _, parameters = value.partition(";")
    charset = None
    for parameter in parameters.split(";"):
        key, _, item = parameter.partition("=")
        if key.strip().lower() == "charset":
            charset = item.strip().strip("\"'") or None
    return kind.strip().lower(), charset


#: Why the text is not what was asked for, as stable codes (``Extraction.reason``).
REASONS = {
    "main_not_found": "no main content was found convincingly: the whole page follows",
    "main_failed": "the main-content selection failed on this page: the whole page follows",
    "layout_failed": "the page could not be laid out: its text follows without layout",
    "not_parsed": "the page's markup is too deep or too costly to lay out: its text follows"
    " without layout",
    "main_from_scan": "the page is too deep or too costly to lay out whole: its main content,"
    " found by the linear pre-scan, follows",
    "out_of_time": "the safety-net time limit passed (a machine far slower than a healthy one):"
    " the page's text follows without layout",
    "no_text": "the page has no readable text",
}

_log = logging.getLogger("django_webfetch.text")


@dataclass(frozen=True)
class Extraction:
    """The text of a page and how it was read.

    ``mode`` is ``"main"`` when the text is the page's main content, ``"page"`` when it is
    the whole page (asked for, or the fallback when no main content was found convincingly),
    and ``"text"`` for a body that is not HTML.  ``reason`` is None, or a key of
    :data:`REASONS` saying why the text is not what was asked for (a fallback) or that
    there is none.

    ``text`` is the first part (at most ``MAX_TEXT_CHARS`` characters, with the definitions
    of the links it uses); ``document`` is the whole text, up to the ``max_chars`` asked
    for, to read in parts (:meth:`~.document.Document.part`).
    """

    text: str
    mode: str
    reason: str | None = None
    document: Document = Document("")


def extract_text(
    body: bytes,
    media_type: str = "text/html",
    charset: str | None = None,
    url: str | None = None,
    *,
    mode: str = "main",
    parser: str = "lexbor",
    time_limit: float = TIME_LIMIT,
    format: str = "markdown",
) -> str:
    """The readable text of a fetched body, at most ``MAX_TEXT_CHARS`` characters.

    ``mode="main"`` (the default) gives the page's main content, ``mode="page"`` the whole
    page; see :func:`extract`, which also says which mode was used.
    """
    return extract(
        body,
        media_type,
        charset,
        url,
        mode=mode,
        parser=parser,
        time_limit=time_limit,
        format=format,
    ).text


def extract(
    body: bytes,
    media_type: str = "text/html",
    charset: str | None = None,
    url: str | None = None,
    *,
    mode: str = "main",
    parser: str = "lexbor",
    time_limit: float = TIME_LIMIT,
    format: str = "markdown",
    max_chars: int = MAX_TEXT_CHARS,
) -> Extraction:
    """The readable text of a fetched body, and the mode that produced it.

    ``charset`` (from the Content-Type header) wins, then a byte order mark, then, for HTML,
    a ``<meta>`` charset in the first 1,024 bytes, then UTF-8.  Undecodable bytes become
    U+FFFD.  Raises :class:`~django_webfetch.net.errors.ExtractionError` only for a media
    type that is neither HTML nor text, and ``ValueError`` for an unknown ``mode`` or
    ``parser``: on any body the result is text, or empty text with ``reason="no_text"``.

    ``mode="main"``: the title, then the main content (:mod:`.main`); when none is found
    convincingly, the whole page, and the result says ``mode="page"`` and
    ``reason="main_not_found"`` (``"main_failed"`` if the selection itself failed, which
    is logged as a bug).  ``parser`` picks the HTML5 parser (``"lexbor"`` or
    ``"html5lib"``) for markup the pre-scan let through.

    Every bound on HTML counts work, so the same body gives the same result on any machine:
    the pre-scan's estimated parse cost, the parser input and depth (:mod:`.scan`), the
    parser's steps (``MAX_PARSE_STEPS``) and the renderer's (``MAX_RENDER_STEPS``).  A page
    over one of them is not laid out whole: with ``mode="main"`` its main content is found by
    a linear pass (:mod:`.region`) and laid out on its own (``reason="main_from_scan"``),
    otherwise its text follows without layout (``mode="page"``, ``reason="not_parsed"``).

    ``time_limit`` seconds (:class:`~.limits.Deadline`, ``TIME_LIMIT`` = 4 s by default) is
    only a far safety net: past it the tree is abandoned and the page's text is returned
    without layout (linear, no parser), under :data:`OUT_OF_TIME_NOTE`, with
    ``mode="page"`` and ``reason="out_of_time"``.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    if parser not in PARSERS:
        raise ValueError(f"unknown parser {parser!r}")
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}")
    limit = max(1, min(max_chars, MAX_STORED_CHARS))
    kind, parameter = _media_type(media_type)
    html = kind in HTML_TYPES
    if not html and kind not in TEXT_TYPES:
        # Imported here: importing django_webfetch.net loads the whole network core.
        from django_webfetch.net.errors import ExtractionError

        raise ExtractionError("this media type has no text to extract", detail=kind[:64])
    decoded = decode_body(bytes(body[:MAX_BODY_BYTES]), charset or parameter, html=html)
    if not html:
        return _done(Document(finish(decoded, limit)), "text", None)
    try:
        return _html(decoded, url, mode, parser, Deadline(time_limit), format, limit)
    except Exception:
        # A bug, never an answer: the page's text without layout, which needs no parser.
        _log.exception("laying out a page failed; its text follows without layout")
        return _linear(decoded, "layout_failed", note=False, limit=limit)


def _done(document: Document, mode: str, reason: str | None) -> Extraction:
    """The extraction of ``document``: its first part, ``reason="no_text"`` without text."""
    if not document.text:
        return Extraction("", mode, "no_text", document)
    part = document.part(1)
    assert part is not None  # a document always has a first part
    return Extraction(part.text, mode, reason, document)


def _html(
    decoded: str,
    url: str | None,
    mode: str,
    parser: str,
    deadline: Deadline,
    format: str,
    limit: int,
) -> Extraction:
    result = scan(decoded, deadline=deadline)
    if result.timed_out:
        return _linear(decoded, "out_of_time", note=True, limit=limit)
    if result.markup is not None:
        try:
            laid = _lay_out(
                result.markup,
                result.title,
                url,
                mode,
                parser,
                deadline,
                format,
                limit,
                cut=result.cut,
            )
        except DeadlinePassed:
            return _linear(decoded, "out_of_time", note=True, limit=limit)
        except OverBudget:
            pass
        else:
            if laid is not None:
                return laid
    return _over_budget(decoded, url, mode, parser, deadline, format, limit, result.title)


def _lay_out(
    markup: str,
    title: str,
    url: str | None,
    mode: str,
    parser: str,
    deadline: Deadline,
    format: str,
    limit: int,
    *,
    region: bool = False,
    cut: bool = False,
) -> Extraction | None:
    """Parse, select and render markup the pre-scan let through.

    ``region``: ``markup`` is the main content :func:`~.region.main_region` found; when the
    selection finds nothing convincing in it, all of it is the main content.  ``cut``:
    ``markup`` is the part of the page before a bound (the parser input); when it holds no
    main content, None (the article may be after it: a menu of text links filled the
    parser input)."""
    root = parse(markup, parser=parser, deadline=deadline)
    reason: str | None = None
    selection = None
    if mode == "main":
        try:
            selection = select(root)
        except Exception:
            # Never on any page we know (the fuzzer and the property tests search for
            # one): the whole page, saying so, and the bug in the log.
            _log.exception("main-content selection failed; the whole page follows")
            reason = "main_failed"
        else:
            reason = None if selection is not None else "main_not_found"
        if cut and reason == "main_not_found":
            return None
        if region and selection is None:
            selection = Selection([root], consent_notices(root), 0)
            reason = "main_from_scan"
        elif region:
            reason = "main_from_scan"
    if deadline.passed():
        raise DeadlinePassed
    markdown = format == "markdown"
    sink = Sink(limit, markdown=markdown)
    links = Links() if markdown else None
    used = _render(root, selection, title, url, deadline, sink, links)
    urls = tuple(links.urls) if links is not None else ()
    return _done(Document(finish(sink.getvalue(), limit), urls), used, reason)


def _over_budget(
    decoded: str,
    url: str | None,
    mode: str,
    parser: str,
    deadline: Deadline,
    format: str,
    limit: int,
    title: str,
) -> Extraction:
    """A page over a work budget: in ``main`` mode its main content, found by a linear pass
    (:mod:`.region`) and laid out on its own when it fits the budgets, else its text;
    otherwise the page's text without layout."""
    if mode == "main":
        # One strip of comments, scripts and styles for the search and the reduction.
        stripped, own_title = strip_special(reducible(decoded))
        title = title or title_line(own_title)
        region = main_region(stripped, stripped=True)
        if region is not None:
            result = scan(region, deadline=deadline)
            if result.timed_out:
                return _linear(decoded, "out_of_time", note=True, limit=limit)
            if result.markup is not None:
                try:
                    laid = _lay_out(
                        result.markup,
                        title,
                        url,
                        mode,
                        parser,
                        deadline,
                        format,
                        limit,
                        region=True,
                    )
                    assert laid is not None  # not cut: always an extraction
                    return laid
                except DeadlinePassed:
                    return _linear(decoded, "out_of_time", note=True, limit=limit)
                except OverBudget:
                    pass
            return _linear(region, "main_from_scan", note=False, limit=limit, title=title)
        return _linear(stripped, "not_parsed", note=False, limit=limit, title=title)
    return _linear(decoded, "not_parsed", note=False, limit=limit)


def _render(
    root: Element,
    selection: Selection | None,
    title: str,
    url: str | None,
    deadline: Deadline,
    sink: Sink,
    links: Links | None,
) -> str:
    """Render the selection (or the whole page) into ``sink``; returns the mode used."""
    if title and (selection is None or not _says_title(selection, title)):
        sink.text(title)
        sink.block(2)
    if selection is not None:
        render(
            selection.roots,
            sink,
            url,
            pruned=selection.pruned,
            main=True,
            deadline=deadline,
            links=links,
        )
        return "main"
    render(root, sink, url, pruned=consent_notices(root), deadline=deadline, links=links)
    return "page"


def _linear(
    decoded: str,
    reason: str | None,
    *,
    note: bool,
    limit: int,
    title: str | None = None,
) -> Extraction:
    """The page's text without layout (no parser, linear), under the out-of-time note.

    With ``title`` (the page's, for the markup of its main content), the text is the main
    content's (``mode="main"``)."""
    sink = Sink(limit)
    if note:
        sink.text(OUT_OF_TIME_NOTE)
        sink.block(2)
    text, own_title = reduce_to_text(decoded)
    if title is None:
        title = own_title
    if title:
        sink.text(title)
        sink.block(2)
    sink.preformatted(text)
    mode = "page" if reason != "main_from_scan" else "main"
    return _done(Document(finish(sink.getvalue(), limit)), mode, reason)
