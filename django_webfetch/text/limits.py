"""Hard bounds of the text layer (DESIGN.md section 5)."""

from __future__ import annotations

__all__ = ["MAX_DEPTH", "MAX_PARSER_INPUT", "MAX_RESULT_BYTES", "MAX_TEXT_CHARS"]

#: Characters of page text kept by :func:`~django_webfetch.text.extract_text`.
MAX_TEXT_CHARS = 20_000

#: The whole fenced result (preamble, markers, status line, source URL, text) stays below this
#: many bytes of UTF-8.
MAX_RESULT_BYTES = 48_000

#: html5lib never sees more than this many bytes (UTF-8) of markup.
MAX_PARSER_INPUT = 256 * 1024

#: Open elements deeper than this are neither parsed nor rendered.
MAX_DEPTH = 200
