"""``LogExceptionReader``: error records of the site's Python logging files.

One parser, two consumers (``get_last_exception`` and ``probe_url``).  A record starts at a
line that matches the configured ``logging`` format (``%``-style, default
``%(asctime)s %(levelname)s %(name)s %(message)s``); the lines up to the next record are
its continuation (the traceback ``logging`` appends for ``exc_info``).  Only error levels
(``ERROR``, ``CRITICAL``, ``FATAL``) are kept, newest first, and at most the last 2 MiB of
each file is read, so the cost is bounded whatever the file size.  Pure Python.

A logged value is written by whoever sent the request, so the reader trusts no timestamp:
within a file, records are ordered by their position (append order), and a
record whose timestamp runs backwards (more than ``BACKWARDS_TOLERANCE`` before a record
above it) or into the future (more than ``FUTURE_TOLERANCE`` past the reader's clock) is
flagged (``LogRecord.flags``: ``"backwards"``, ``"future"``).  A future-dated record counts
as no newer than the record it follows, and is listed after it: a value with a newline and
a header dated 2099 cannot become the newest record.  Files are merged by the latest
unflagged timestamp seen so far in each.  Control characters in every field are shown
escaped (``\x1b``, ``\u202e``).  Every pattern runs on RE2 (linear time).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import re2

from django_webfetch.text.patterns import compile_pattern

from .paths import redact_lines, redact_text

__all__ = [
    "DEFAULT_LOG_FORMAT",
    "ERROR_LEVELS",
    "MAX_TAIL_BYTES",
    "Frame",
    "LogExceptionReader",
    "LogFormatError",
    "LogRecord",
    "compile_format",
]

DEFAULT_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
MAX_TAIL_BYTES = 2 * 1024 * 1024
#: Bounds of one parsed record (a traceback of a recursion error has ~3,000 frames).
MAX_LINE_CHARS = 2000
MAX_RECORD_LINES = 400
MAX_FRAMES = 60
#: The work is bounded by construction (the 2 MiB tail of each file, lines cut at
#: ``MAX_LINE_CHARS``, headers matched by RE2 in linear time), so what a reader returns
#: does not depend on how busy the machine is; this clock is only a far safety net that a
#: healthy machine never reaches (when it fires, ``problems`` says ``time``).
MAX_READ_SECONDS = 30.0
#: A record dated this much before one above it in the same file runs backwards; one dated
#: this much past the reader's clock is in the future.
BACKWARDS_TOLERANCE = dt.timedelta(seconds=60)
FUTURE_TOLERANCE = dt.timedelta(minutes=5)

#: ``%(name)[flags][width][.precision]type``
_FIELD = compile_pattern(r"%\((?P<name>\w+)\)[-#0 +]*\d*(?:\.\d+)?(?P<type>[sdifrxXeEgGc%])")
_ASCTIME = r"(?P<asctime>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,6})?)"
_PATTERNS = {
    "asctime": _ASCTIME,
    "levelname": r"(?P<levelname>[A-Z]{3,10})",
    "name": r"(?P<name>[^\s]+)",
    "message": r"(?P<message>.*)",
    "levelno": r"\d{1,3}",
    "process": r"\d+",
    "thread": r"\d+",
    "lineno": r"\d+",
}
_FRAME = compile_pattern(
    r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d{1,9}), in (?P<func>.{1,300})$'
)
_EXC_LINE = compile_pattern(r"^(?P<cls>[A-Za-z_][\w.]{0,200})(?::\s?(?P<msg>.*))?$")
#: Control characters (C0, C1, bidi overrides and isolates, line/paragraph separators).
_CONTROL = compile_pattern(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\x{200e}\x{200f}\x{2028}-\x{202e}\x{2066}-\x{2069}]"
)


def escape_controls(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` / ``\\uNNNN`` (tab kept)."""

    def escaped(match: Any) -> str:
        code = ord(match.group(0))
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return str(_CONTROL.sub(escaped, text))


_TRACEBACK = "Traceback (most recent call last):"


class LogFormatError(ValueError):
    """A ``WEBFETCH_LOG_FORMAT`` the reader cannot turn into a record pattern."""


def compile_format(fmt: object) -> Any:
    """A regular expression matching the first line of a record written with ``fmt``.

    ``asctime`` and ``levelname`` are required (records are filtered by them).  Other fields
    match lazily.  The pattern runs on RE2: a line an attacker shaped against a format with
    several lazy fields is still matched in linear time.
    """
    if not isinstance(fmt, str) or not fmt or len(fmt) > 500:
        raise LogFormatError("the log format must be a non-empty string of at most 500 chars")
    pieces: list[str] = []
    seen: set[str] = set()
    pos = 0
    for match in _FIELD.finditer(fmt):
        pieces.append(re2.escape(fmt[pos : match.start()]))
        pos = match.end()
        name = match.group("name")
        if name in seen:
            raise LogFormatError(f"the log format names %({name}) twice")
        seen.add(name)
        pattern = _PATTERNS.get(name, r".*?")
        if any(ch.isdigit() for ch in match.group(0)):
            # A width (``%(levelname)-8s``) pads with spaces.
            pattern = rf"\s*{pattern}\s*"
        pieces.append(pattern)
    tail = fmt[pos:]
    if "%(" in tail:
        raise LogFormatError("the log format has a field the reader does not understand")
    pieces.append(re2.escape(tail))
    for required in ("asctime", "levelname"):
        if required not in seen:
            raise LogFormatError(f"the log format must contain %({required})s")
    return compile_pattern("^" + "".join(pieces) + "$")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    code: str = ""


@dataclass(frozen=True)
class LogRecord:
    timestamp: dt.datetime
    level: str
    logger: str
    message: str
    #: The continuation lines as written (traceback), bounded.
    text: str = ""
    exception: str = ""
    exception_message: str = ""
    frames: tuple[Frame, ...] = ()
    source: str = field(default="", compare=False)
    #: ``"backwards"`` / ``"future"``: the timestamp is not to be trusted (module docstring).
    flags: tuple[str, ...] = ()


def _parse_time(value: str) -> dt.datetime | None:
    """``YYYY-MM-DD HH:MM:SS[,fff]`` (the shape the record pattern already matched)."""
    fraction = value[20:]
    try:
        return dt.datetime(
            int(value[0:4]),
            int(value[5:7]),
            int(value[8:10]),
            int(value[11:13]),
            int(value[14:16]),
            int(value[17:19]),
            int(fraction.ljust(6, "0")[:6]) if fraction else 0,
        )
    except ValueError:
        return None


@dataclass(frozen=True)
class _Raw:
    """A record header and its continuation lines, not parsed further yet."""

    timestamp: dt.datetime
    level: str
    logger: str
    message: str
    body: tuple[str, ...]
    source: str
    flags: tuple[str, ...] = ()
    #: The latest unflagged timestamp up to this record in its file (what orders files).
    effective: dt.datetime = dt.datetime.min

    def matches(self, folded: str) -> bool:
        """On the redacted text, the text a tool shows: matching the raw lines would make
        the match count an oracle on redacted values."""
        return (
            folded in redact_text(self.message).casefold()
            or folded in self.logger.casefold()
            or folded in redact_text("\n".join(self.body)).casefold()
        )

    def build(self) -> LogRecord:
        exception, message, frames = parse_traceback(list(self.body))
        return LogRecord(
            timestamp=self.timestamp,
            level=self.level,
            logger=_clip(escape_controls(self.logger)),
            # Redacted before they are cut: a cut can split a DSN from its "@".
            message=_clip(escape_controls(redact_text(self.message))),
            text="\n".join(
                _clip(escape_controls(line)) for line in redact_lines(self.body)
            ).rstrip(),
            exception=exception,
            exception_message=_clip(escape_controls(redact_text(message))),
            frames=tuple(
                Frame(
                    escape_controls(f.file),
                    f.line,
                    escape_controls(f.function),
                    escape_controls(f.code),
                )
                for f in frames
            ),
            source=self.source,
            flags=self.flags,
        )


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " […]"


def parse_traceback(lines: list[str]) -> tuple[str, str, tuple[Frame, ...]]:
    """``(exception class, message, frames)`` of the last traceback in ``lines``."""
    start = None
    for index, line in enumerate(lines):
        if line.strip() == _TRACEBACK:
            start = index
    if start is None:
        return "", "", ()
    frames: list[Frame] = []
    exception = message = ""
    index = start + 1
    while index < len(lines):
        line = lines[index]
        frame = _FRAME.match(line)
        if frame is not None:
            code = ""
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if following.startswith("    ") and not _FRAME.match(following):
                code = following.strip()
                index += 1
            frames.append(
                Frame(frame.group("file"), int(frame.group("line")), frame.group("func"), code)
            )
        elif not line.startswith(" ") and line.strip():
            exc = _EXC_LINE.match(line)
            if exc is not None:
                exception, message = exc.group("cls"), exc.group("msg") or ""
            break
        index += 1
    if len(frames) > MAX_FRAMES:
        frames = frames[:5] + frames[-(MAX_FRAMES - 5) :]
    return exception, message, tuple(frames)


class LogExceptionReader:
    """Read error records from ``files`` written with ``fmt``; see the module docstring."""

    def __init__(
        self,
        files: Iterable[str],
        fmt: str = DEFAULT_LOG_FORMAT,
        *,
        max_tail_bytes: int = MAX_TAIL_BYTES,
        max_seconds: float = MAX_READ_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], dt.datetime] = dt.datetime.now,
    ) -> None:
        self.files = tuple(files)
        self.pattern = compile_format(fmt)
        # A cheap pre-filter: the literal text before the first field, and whether that
        # field is the timestamp (a digit must follow).  Traceback lines fail it at once.
        first = _FIELD.search(str(fmt))
        self._lead = str(fmt)[: first.start()] if first else str(fmt)
        self._digit = (
            first is not None
            and first.group("name") == "asctime"
            and not any(ch.isdigit() for ch in first.group(0))  # no width padding
        )
        self.max_tail_bytes = min(int(max_tail_bytes), MAX_TAIL_BYTES)
        self.max_seconds = min(float(max_seconds), MAX_READ_SECONDS)
        self._clock = clock
        self._now = now
        self._deadline = 0.0
        #: How many records matched on the last ``records()`` call.
        self.matched = 0
        #: Files that could not be read on the last ``records()`` call (path, reason).
        self.problems: list[tuple[str, str]] = []

    def _tail(self, path: str) -> list[str]:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            start = max(size - self.max_tail_bytes, 0)
            fh.seek(start)
            data = fh.read(self.max_tail_bytes)
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if start > 0 and lines:
            lines = lines[1:]  # the first line is cut: it belongs to an older record
        return lines

    def _header(self, line: str) -> Any:
        if not line.startswith(self._lead):
            return None
        if self._digit and not line[len(self._lead) : len(self._lead) + 1].isdigit():
            return None
        return self.pattern.match(line[: MAX_LINE_CHARS * 4])

    def _records_of(self, path: str) -> Iterator[_Raw]:
        lines = self._tail(path)
        header: Any = None
        body: list[str] = []
        future = self._now() + FUTURE_TOLERANCE
        latest: dt.datetime | None = None  # the latest unflagged timestamp so far

        def flush() -> _Raw | None:
            nonlocal latest
            if header is None:
                return None
            stamp = _parse_time(header.group("asctime"))
            if stamp is None:
                return None
            # Every record, error or not, moves the file's clock; only errors are kept.
            flags: tuple[str, ...] = ()
            if stamp > future:
                flags = ("future",)
            elif latest is not None and stamp < latest - BACKWARDS_TOLERANCE:
                flags = ("backwards",)
            else:
                latest = stamp if latest is None else max(latest, stamp)
            if header.group("levelname") not in ERROR_LEVELS:
                return None
            groups = header.groupdict()
            return _Raw(
                timestamp=stamp,
                level=header.group("levelname"),
                logger=groups.get("name") or "",
                message=groups.get("message") or "",
                body=tuple(body[:MAX_RECORD_LINES]),
                source=path,
                flags=flags,
                effective=latest or dt.datetime.min,
            )

        for raw in lines:
            if self._clock() >= self._deadline:
                record = flush()  # the record being read is complete enough to keep
                if record is not None:
                    yield record
                raise TimeoutError("the log read budget ran out")
            line = raw.rstrip("\r")
            match = self._header(line)
            if match is not None:
                record = flush()
                if record is not None:
                    yield record
                header, body = match, []
            elif header is not None and len(body) < MAX_RECORD_LINES:
                body.append(line)
        record = flush()
        if record is not None:
            yield record

    def records(
        self,
        *,
        search: str | None = None,
        limit: int | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
    ) -> list[LogRecord]:
        """The error records of every file, newest first: append order within a file,
        files merged by their latest unflagged timestamp (file order breaks ties).

        ``search`` keeps records whose message, logger or traceback contains the text (any
        case); ``since``/``until`` bound the timestamp.  Only the first ``limit`` are parsed
        further (traceback, frames); ``matched`` is set to how many matched in all.
        """
        self.problems = []
        self._deadline = self._clock() + self.max_seconds
        folded = search.casefold() if search else None
        found: list[tuple[dt.datetime, int, int, int, _Raw]] = []
        for file_index, path in enumerate(self.files):
            try:
                for position, record in enumerate(self._records_of(path)):
                    if folded is not None and not record.matches(folded):
                        continue
                    if (since is not None and record.timestamp < since) or (
                        until is not None and record.timestamp > until
                    ):
                        continue
                    # A future-dated record is no newer than the one it follows.
                    trusted = 0 if "future" in record.flags else 1
                    found.append((record.effective, trusted, -file_index, position, record))
            except TimeoutError:
                # Keep what was read; say that the rest was not.
                self.problems.append((path, "time"))
                break
            except OSError as exc:
                self.problems.append((path, type(exc).__name__))
        found.sort(key=lambda item: item[:4], reverse=True)
        self.matched = len(found)
        selected = found if limit is None else found[: max(limit, 0)]
        return [item[4].build() for item in selected]
