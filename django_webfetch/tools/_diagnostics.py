"""Shared plumbing of the error-analysis tools (``probe_url``, ``get_last_exception``,
``read_source``, ``search_code``): guard, reader, reading, fencing."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from django_webfetch.conf import conf
from django_webfetch.diagnostics.logs import LogExceptionReader, LogFormatError, LogRecord
from django_webfetch.diagnostics.paths import (
    PathDenied,
    SourcePathGuard,
    redact_line,
    redact_lines,
    redact_text,
)
from django_webfetch.exceptions import WebFetchConfigurationError

from .base import ToolResult

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_LINE_CHARS",
    "denied_result",
    "fenced",
    "format_record",
    "log_reader",
    "read_window",
    "source_guard",
]

#: read_source reads at most this much of a file (a line past it is reported as cut).
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_LINE_CHARS = 500


def _static_roots() -> list[str]:
    roots: list[str] = []
    for name in ("MEDIA_ROOT", "STATIC_ROOT"):
        value = getattr(settings, name, None)
        if value:
            roots.append(os.fspath(value))
    for entry in getattr(settings, "STATICFILES_DIRS", ()) or ():
        path = entry[1] if isinstance(entry, (tuple, list)) and len(entry) == 2 else entry
        if isinstance(path, (str, os.PathLike)) and os.fspath(path):
            roots.append(os.fspath(path))
    return roots


def _private_paths() -> list[str]:
    """Paths the site's settings name for private data: the settings module itself (its
    file name can be anything: ``conf/production.py``), session files, file-based caches,
    upload temporaries and SQLite databases (whatever their suffix)."""
    paths: list[str] = []
    for module_name in {
        os.environ.get("DJANGO_SETTINGS_MODULE") or "",
        getattr(settings, "SETTINGS_MODULE", None) or "",
    }:
        module = sys.modules.get(module_name) if module_name else None
        filename = getattr(module, "__file__", None)
        if isinstance(filename, str) and filename:
            paths.append(filename)
    for name in ("SESSION_FILE_PATH", "FILE_UPLOAD_TEMP_DIR"):
        value = getattr(settings, name, None)
        if isinstance(value, (str, os.PathLike)) and os.fspath(value):
            paths.append(os.fspath(value))
    for cache in (getattr(settings, "CACHES", None) or {}).values():
        backend = str(cache.get("BACKEND", "")) if isinstance(cache, dict) else ""
        location = cache.get("LOCATION") if isinstance(cache, dict) else None
        if backend.endswith("FileBasedCache") and isinstance(location, (str, os.PathLike)):
            paths.append(os.fspath(location))
    for database in (getattr(settings, "DATABASES", None) or {}).values():
        if not isinstance(database, dict) or "sqlite" not in str(database.get("ENGINE", "")):
            continue
        db_name: Any = database.get("NAME")
        if isinstance(db_name, (str, os.PathLike)) and os.fspath(db_name):
            base = os.fspath(db_name)
            paths += [base, *(f"{base}-{suffix}" for suffix in ("wal", "shm", "journal"))]
    return [p for p in paths if os.path.isabs(p)]


def source_guard() -> SourcePathGuard:
    """The guard over ``WEBFETCH_PROJECT_ROOT``; ``PathDenied`` when there is no usable root."""
    try:
        root = conf.WEBFETCH_PROJECT_ROOT
    except WebFetchConfigurationError as exc:
        raise PathDenied("no_project_root", detail=str(exc)) from exc
    if root is None or not os.path.isdir(root):
        raise PathDenied("no_project_root")
    real = os.path.realpath(root)
    if os.path.dirname(real) == real:
        raise PathDenied("no_project_root", detail="the file-system root is refused")
    return SourcePathGuard(real, tuple(_static_roots()), tuple(_private_paths()))


def log_reader() -> LogExceptionReader:
    """The reader over ``WEBFETCH_LOG_FILES``; ``PathDenied`` when none is configured."""
    try:
        files = conf.WEBFETCH_LOG_FILES
        fmt = conf.WEBFETCH_LOG_FORMAT
    except WebFetchConfigurationError as exc:
        raise PathDenied("no_log_files", detail=str(exc)) from exc
    if not files:
        raise PathDenied("no_log_files")
    try:
        return LogExceptionReader(files, fmt)
    except LogFormatError as exc:
        raise PathDenied("log_format", detail=str(exc)) from exc


def denied_result(exc: PathDenied) -> ToolResult:
    """A refusal naming the rule only (never the path or what is there)."""
    messages = {
        "no_project_root": "No project root is configured (WEBFETCH_PROJECT_ROOT / BASE_DIR).",
        "no_log_files": "No log files are configured (WEBFETCH_LOG_FILES).",
        "log_format": "WEBFETCH_LOG_FORMAT cannot be parsed.",
    }
    text = messages.get(
        exc.reason, f"The path was refused by the source guard (rule: {exc.reason})."
    )
    return ToolResult.failure(exc.code, text, reason=exc.reason)


def _clip(line: str) -> str:
    line = line.rstrip("\r")
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " […]"


def read_window(
    guard: SourcePathGuard, real: str, start: int, count: int
) -> tuple[list[tuple[int, str]], int, bool]:
    """Lines ``start .. start+count-1`` (1-based) of a guarded file, redacted, with the total
    line count and whether the file was cut at ``MAX_FILE_BYTES``.  A private-key block is
    tracked from the first line, so a window inside one is blanked too."""
    with guard.open(real) as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    if b"\x00" in data[:8192]:
        raise PathDenied("binary_file")
    cut = len(data) > MAX_FILE_BYTES
    text = data[:MAX_FILE_BYTES].decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "" and not cut:
        lines.pop()
    window: list[tuple[int, str]] = []
    end = start + count - 1
    # Redacted from line 1 (a key block or a continued value may start above the window),
    # and before cutting long lines (a cut could split a DSN from its ``@``).
    for number, line in enumerate(redact_lines(lines[:end]), 1):
        if number >= start:
            window.append((number, _clip(line)))
    return window, len(lines), cut


def number_lines(window: Iterable[tuple[int, str]]) -> str:
    items = list(window)
    width = len(str(items[-1][0])) if items else 1
    return "\n".join(f"{number:>{width}} | {line}" for number, line in items)


def fenced(text: str, *, source: str, status_line: str) -> str:
    """Text from the installation's files or logs, inside the untrusted fence: logs carry
    request data an attacker chose, and code comments can be written by anyone who can
    commit."""
    from django_webfetch.text import fence

    return fence(text, source_url=source, status_line=status_line)


#: What ``meta`` keeps of text taken from a log (it travels outside the untrusted fence):
#: dotted names and space-free paths only; anything else is shown in the fenced content.
_NAME_SHAPE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,99}")
_PATH_SHAPE = re.compile(r"[A-Za-z0-9_./\-+@~<>]{1,300}")
NOT_SHOWN = "<see-content>"


def _meta_token(value: str, shape: re.Pattern[str]) -> str:
    return value if shape.fullmatch(value) else NOT_SHOWN


def format_record(
    record: LogRecord, guard: SourcePathGuard | None, *, context: int = 6, expand: int = 3
) -> dict[str, Any]:
    """A log record as text plus JSON meta: the traceback's frames, with ``±context`` lines
    of source around up to ``expand`` project-local frames (the innermost first)."""
    lines = [
        f"{record.timestamp.isoformat(sep=' ')} {record.level} {record.logger}",
        f"Message: {redact_text(record.message)}",
    ]
    flags = getattr(record, "flags", ())
    if "future" in flags:
        lines.insert(1, "Warning: this entry is dated in the future; its timestamp is not trusted.")
    elif "backwards" in flags:
        lines.insert(1, "Warning: this entry is dated before an entry above it in the file.")
    if record.exception:
        lines.append(f"Exception: {record.exception}: {redact_text(record.exception_message)}")
    expanded = 0
    frames_meta: list[dict[str, Any]] = []
    if record.frames:
        lines.append("Traceback (innermost last):")
    local: dict[int, tuple[str, str]] = {}
    if guard is not None:
        for index in range(len(record.frames) - 1, -1, -1):
            if expanded >= expand:
                break
            frame = record.frames[index]
            if "site-packages" in frame.file or "dist-packages" in frame.file:
                continue
            resolved = guard.resolve_absolute(frame.file)
            if resolved is not None:
                local[index] = resolved
                expanded += 1
    for index, frame in enumerate(record.frames):
        where = local[index][1] if index in local else frame.file
        kind = "project" if index in local else "library"
        lines.append(f'  File "{where}", line {frame.line}, in {frame.function} [{kind}]')
        frames_meta.append(
            {"file": _meta_token(where, _PATH_SHAPE), "line": frame.line, "project": index in local}
        )
        if index in local and guard is not None:
            start = max(frame.line - context, 1)
            try:
                window, _total, _cut = read_window(guard, local[index][0], start, 2 * context + 1)
            except PathDenied as exc:
                lines.append(f"    (source withheld: {exc.reason})")
                continue
            for number, text in window:
                marker = ">" if number == frame.line else " "
                lines.append(f"    {marker}{number:>5} | {text}")
        elif frame.code:
            lines.append(f"    {redact_line(frame.code)}")
    if not record.frames and record.text:
        lines.append(redact_text(record.text)[:4000])  # redact, then cut
    return {
        "text": "\n".join(lines),
        "meta": {
            "timestamp": record.timestamp.isoformat(),
            "level": record.level,
            "logger": _meta_token(record.logger, _NAME_SHAPE),
            "exception": _meta_token(record.exception, _NAME_SHAPE),
            "frames": frames_meta[-20:],
            "flags": list(flags),
        },
    }
