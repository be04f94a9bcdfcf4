"""``extract_text``: a fetched body to bounded, readable text."""

from __future__ import annotations

from .charset import decode_body
from .limits import MAX_TEXT_CHARS
from .render import Sink, finish, parse, render
from .scan import reduce_to_text, scan

__all__ = ["HTML_TYPES", "MAX_BODY_BYTES", "TEXT_TYPES", "extract_text"]

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
) -> str:
    """The readable text of a fetched body, at most ``MAX_TEXT_CHARS`` characters.

    ``charset`` (from the Content-Type header) wins, then a byte order mark, then, for HTML,
    a ``<meta>`` charset in the first 1,024 bytes, then UTF-8.  Undecodable bytes become
    U+FFFD.  Raises :class:`~django_webfetch.net.errors.ExtractionError` only for a media
    type that is neither HTML nor text.
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
    result = scan(decoded)
    sink = Sink(MAX_TEXT_CHARS)
    if result.markup is None:
        text, title = reduce_to_text(decoded)
        if title:
            sink.text(title)
            sink.block(2)
        sink.preformatted(text)
    else:
        if result.title:
            sink.text(result.title)
            sink.block(2)
        render(parse(result.markup), sink, url)
    return finish(sink.getvalue())
