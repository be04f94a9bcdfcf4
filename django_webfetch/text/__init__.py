"""Page text: HTML to bounded text, and the untrusted-content fence.  Pure Python.

Never imports Django nor :mod:`django_webfetch.net` (except its Django-free error classes).
"""

from __future__ import annotations

from .document import Document, Part
from .extract import FORMATS, MODES, REASONS, Extraction, extract, extract_text
from .fence import fence, render_media_type, render_redirect_target, render_status
from .limits import (
    MAX_DEPTH,
    MAX_PARSE_STEPS,
    MAX_PARSER_INPUT,
    MAX_RENDER_STEPS,
    MAX_RESULT_BYTES,
    MAX_STORED_CHARS,
    MAX_TEXT_CHARS,
    TIME_LIMIT,
)

__all__ = [
    "Document",
    "Extraction",
    "FORMATS",
    "MAX_DEPTH",
    "MAX_PARSER_INPUT",
    "MAX_PARSE_STEPS",
    "MAX_RENDER_STEPS",
    "MAX_RESULT_BYTES",
    "MAX_STORED_CHARS",
    "MAX_TEXT_CHARS",
    "MODES",
    "Part",
    "REASONS",
    "TIME_LIMIT",
    "extract",
    "extract_text",
    "fence",
    "render_media_type",
    "render_redirect_target",
    "render_status",
]
