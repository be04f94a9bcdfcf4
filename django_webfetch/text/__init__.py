"""Page text: HTML to bounded text, and the untrusted-content fence.  Pure Python.

Never imports Django nor :mod:`django_webfetch.net` (except its Django-free error classes).
"""

from __future__ import annotations

from .extract import MODES, Extraction, extract, extract_text
from .fence import fence, render_media_type, render_redirect_target, render_status
from .limits import MAX_DEPTH, MAX_PARSER_INPUT, MAX_RESULT_BYTES, MAX_TEXT_CHARS

__all__ = [
    "Extraction",
    "MAX_DEPTH",
    "MAX_PARSER_INPUT",
    "MAX_RESULT_BYTES",
    "MAX_TEXT_CHARS",
    "MODES",
    "extract",
    "extract_text",
    "fence",
    "render_media_type",
    "render_redirect_target",
    "render_status",
]
