"""``extract_text``: a fetched body to bounded, readable text."""

from __future__ import annotations

from dataclasses import dataclass

from .charset import decode_body
from .limits import MAX_TEXT_CHARS
from .main import SKIPPED, Selection, consent_notices, hidden, select
from .render import PARSERS, Sink, finish, parse, render
from .scan import reduce_to_text, scan

__all__ = [
    "HTML_TYPES",
    "MAX_BODY_BYTES",
    "MODES",
    "TEXT_TYPES",
    "Extraction",
    "extract",
    "extract_text",
]

#: ``main``: the page's main content (falling back to ``page``); ``page``: the whole page.
MODES = ("main", "page")

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


@dataclass(frozen=True)
class Extraction:
    """The text of a page and how it was read.

    ``mode`` is ``"main"`` when the text is the page's main content, ``"page"`` when it is
    the whole page (asked for, or the fallback when no main content was found convincingly),
    and ``"text"`` for a body that is not HTML.
    """

    text: str
    mode: str


def extract_text(
    body: bytes,
    media_type: str = "text/html",
    charset: str | None = None,
    url: str | None = None,
    *,
    mode: str = "main",
    parser: str = "lexbor",
) -> str:
    """The readable text of a fetched body, at most ``MAX_TEXT_CHARS`` characters.

    ``mode="main"`` (the default) gives the page's main content, ``mode="page"`` the whole
    page; see :func:`extract`, which also says which mode was used.
    """
    return extract(body, media_type, charset, url, mode=mode, parser=parser).text


def extract(
    body: bytes,
    media_type: str = "text/html",
    charset: str | None = None,
    url: str | None = None,
    *,
    mode: str = "main",
    parser: str = "lexbor",
) -> Extraction:
    """The readable text of a fetched body, and the mode that produced it.

    ``charset`` (from the Content-Type header) wins, then a byte order mark, then, for HTML,
    a ``<meta>`` charset in the first 1,024 bytes, then UTF-8.  Undecodable bytes become
    U+FFFD.  Raises :class:`~django_webfetch.net.errors.ExtractionError` only for a media
    type that is neither HTML nor text.

    ``mode="main"``: the title, then the main content (:mod:`.main`); when none is found
    convincingly, the whole page, and the result says ``mode="page"``.  ``parser`` picks
    the HTML5 parser (``"lexbor"`` or ``"html5lib"``) for markup the pre-scan let through.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    if parser not in PARSERS:
        raise ValueError(f"unknown parser {parser!r}")
    kind, parameter = _media_type(media_type)
    html = kind in HTML_TYPES
    if not html and kind not in TEXT_TYPES:
        # Imported here: importing django_webfetch.net loads the whole network core.
        from django_webfetch.net.errors import ExtractionError

        raise ExtractionError("this media type has no text to extract", detail=kind[:64])
    decoded = decode_body(bytes(body[:MAX_BODY_BYTES]), charset or parameter, html=html)
    if not html:
        return Extraction(finish(decoded), "text")
    result = scan(decoded)
    sink = Sink(MAX_TEXT_CHARS)
    used = "page"
    if result.markup is None:
        text, title = reduce_to_text(decoded)
        if title:
            sink.text(title)
            sink.block(2)
        sink.preformatted(text)
    else:
        root = parse(result.markup, parser=parser)
        selection = select(root) if mode == "main" else None
        if result.title and (selection is None or not _says_title(selection, result.title)):
            sink.text(result.title)
            sink.block(2)
        if selection is not None:
            used = "main"
            render(selection.roots, sink, url, pruned=selection.pruned, main=True)
        else:
            render(root, sink, url, pruned=consent_notices(root))
    return Extraction(finish(sink.getvalue()), used)
