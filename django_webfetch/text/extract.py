"""``extract_text``: a fetched body to bounded, readable text."""

from __future__ import annotations

from .charset import decode_body
from .limits import MAX_TEXT_CHARS, TIME_LIMIT, Deadline, DeadlinePassed
from .render import Sink, finish, parse, render
from .scan import reduce_to_text, scan

__all__ = ["HTML_TYPES", "MAX_BODY_BYTES", "OUT_OF_TIME_NOTE", "TEXT_TYPES", "extract_text"]

#: The first line of the text when the time limit passed: what follows is the page's text
#: without its layout (no headings, lists, tables or link URLs).
OUT_OF_TIME_NOTE = "[This page took too long to lay out: its text follows without layout.]"

#: Bodies are cut here (the fetch layer already stops at 2 MiB of decoded body).
MAX_BODY_BYTES = 2 * 1024 * 1024
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: Shown as they are, after newline and control-character clean-up.
TEXT_TYPES = frozenset({"text/plain", "application/json"})


def _media_type(value: str) -> tuple[str, str | None]:
    """The ``type/subtype`` of a Content-Type value, and its charset parameter if any."""
    kind, _, parameters = value.partition(";")
    charset = None
    for parameter in parameters.split(";"):
        key, _, item = parameter.partition("=")
        if key.strip().lower() == "charset":
            charset = item.strip().strip("\"'") or None
    return kind.strip().lower(), charset


def extract_text(
    body: bytes,
    media_type: str = "text/html",
    charset: str | None = None,
    url: str | None = None,
    *,
    time_limit: float = TIME_LIMIT,
) -> str:
    """The readable text of a fetched body, at most ``MAX_TEXT_CHARS`` characters.

    ``charset`` (from the Content-Type header) wins, then a byte order mark, then, for HTML,
    a ``<meta>`` charset in the first 1,024 bytes, then UTF-8.  Undecodable bytes become
    U+FFFD.  Raises :class:`~django_webfetch.net.errors.ExtractionError` only for a media
    type that is neither HTML nor text.

    HTML gets at most ``time_limit`` seconds of wall-clock time for the pre-scan, html5lib
    and the renderer; past it the tree is abandoned and the page's text is returned without
    layout (linear, no parser), under :data:`OUT_OF_TIME_NOTE`.
    """
    kind, parameter = _media_type(media_type)
    html = kind in HTML_TYPES
    if not html and kind not in TEXT_TYPES:
        # Imported here: importing django_webfetch.net loads the whole network core.
        from django_webfetch.net.errors import ExtractionError

        raise ExtractionError("this media type has no text to extract", detail=kind[:64])
    decoded = decode_body(bytes(body[:MAX_BODY_BYTES]), charset or parameter, html=html)
    if not html:
        return finish(decoded)
    deadline = Deadline(time_limit)
    result = scan(decoded, deadline=deadline)
    if result.markup is not None:
        sink = Sink(MAX_TEXT_CHARS)
        if result.title:
            sink.text(result.title)
            sink.block(2)
        try:
            render(parse(result.markup, deadline=deadline), sink, url, deadline=deadline)
        except DeadlinePassed:
            pass
        else:
            return finish(sink.getvalue())
    sink = Sink(MAX_TEXT_CHARS)
    if result.markup is not None or result.timed_out:
        sink.text(OUT_OF_TIME_NOTE)
        sink.block(2)
    text, title = reduce_to_text(decoded)
    if title:
        sink.text(title)
        sink.block(2)
    sink.preformatted(text)
    return finish(sink.getvalue())
