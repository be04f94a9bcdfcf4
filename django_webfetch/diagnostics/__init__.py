"""Error analysis for admins: the source path guard, the log reader, the code search.

Pure Python (no Django import): the tools in ``django_webfetch.tools`` build these from the
settings and call them.
"""

from __future__ import annotations

from .logs import DEFAULT_LOG_FORMAT, Frame, LogExceptionReader, LogFormatError, LogRecord
from .paths import PathDenied, SourcePathGuard, redact_line, redact_text
from .search import CodeSearch, SearchHit, SearchOutcome, SearchRefused

__all__ = [
    "DEFAULT_LOG_FORMAT",
    "CodeSearch",
    "Frame",
    "LogExceptionReader",
    "LogFormatError",
    "LogRecord",
    "PathDenied",
    "SearchHit",
    "SearchOutcome",
    "SearchRefused",
    "SourcePathGuard",
    "redact_line",
    "redact_text",
]
