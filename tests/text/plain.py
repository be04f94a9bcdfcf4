"""``extract`` and ``extract_text`` in the plain-text format, for the tests that pin it.

The default format is Markdown (``tests/text/test_markdown.py``); these tests were written
for the plain-text rendering, which ``format="text"`` keeps.
"""

from __future__ import annotations

from typing import Any

from django_webfetch.text import Extraction
from django_webfetch.text import extract as _extract
from django_webfetch.text import extract_text as _extract_text


def extract(*args: Any, **kwargs: Any) -> Extraction:
    kwargs.setdefault("format", "text")
    return _extract(*args, **kwargs)


def extract_text(*args: Any, **kwargs: Any) -> str:
    kwargs.setdefault("format", "text")
    return _extract_text(*args, **kwargs)
