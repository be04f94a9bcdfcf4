"""``search_code``'s engine: ``path:line`` hits in project files under a hard budget.

Literal substring by default.  A regular expression is opt-in, at most
``MAX_PATTERN_CHARS`` long, and runs on RE2 (``text.patterns.compile_untrusted``: linear
time in the text searched, compiled program and DFA memory bounded), because the model
that writes it is steerable by every page it reads: no pattern can make a search
backtrack.
The walk never follows a directory symlink, skips ``site-packages``,
``node_modules``, ``media``, ``static``, ``__pycache__`` and dot directories, and asks the
``SourcePathGuard`` about every directory and file (a symlinked file is resolved and must
stay inside the root like any other path).  The whole search stops at ``MAX_FILES`` files,
``MAX_ENTRIES`` directory entries looked at or ``MAX_BYTES`` read, and says which budget ran
out: budgets of work, so one tree gives the same answer on a quiet machine and a busy one.
``MAX_SECONDS`` of wall time is only a far safety net that a healthy machine never reaches
(when it fires, the answer says ``time``).  Pure Python.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django_webfetch.text.patterns import PatternError, compile_untrusted

from .paths import PathDenied, SourcePathGuard, redact_text

__all__ = [
    "MAX_BYTES",
    "MAX_ENTRIES",
    "MAX_FILES",
    "MAX_HITS",
    "MAX_PATTERN_CHARS",
    "MAX_SECONDS",
    "SKIPPED_DIRS",
    "CodeSearch",
    "SearchHit",
    "SearchOutcome",
    "SearchRefused",
]

MAX_FILES = 20_000
#: Directory entries looked at (files, directories, links, skipped or not).
MAX_ENTRIES = 200_000
#: Bytes read from files, all files together.
MAX_BYTES = 64 * 1024 * 1024
#: The far safety net: far beyond what the work budgets take on a healthy machine.
MAX_SECONDS = 30.0
MAX_HITS = 100
MAX_PATTERN_CHARS = 200
MAX_FILE_BYTES = 1024 * 1024
MAX_HIT_CHARS = 240
SKIPPED_DIRS = frozenset({"site-packages", "node_modules", "media", "static", "__pycache__"})


class SearchRefused(PathDenied):
    """The query or glob was refused (``reason``: ``invalid_query``, ``invalid_pattern``,
    ``pattern_too_long``, ``invalid_glob``)."""

    code = "search_refused"


@dataclass(frozen=True)
class SearchHit:
    path: str
    line: int
    text: str


@dataclass
class SearchOutcome:
    hits: list[SearchHit] = field(default_factory=list)
    files_scanned: int = 0
    files_skipped: int = 0
    entries_seen: int = 0
    bytes_read: int = 0
    #: ``None`` when the whole tree was searched; else the budget that ran out: ``"files"``,
    #: ``"entries"``, ``"bytes"``, ``"hits"`` or (the far safety net) ``"time"``.
    exhausted: str | None = None
    elapsed: float = 0.0


#: ``text.patterns`` refusals in ``search_code``'s own codes.
_REFUSALS = {
    "pattern_too_long": "pattern_too_long",
    "pattern_too_large": "pattern_too_complex",
    "pattern_syntax": "invalid_pattern",
    "pattern_type": "invalid_query",
}


class _Stop(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


def _clip(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MAX_HIT_CHARS else line[:MAX_HIT_CHARS] + " […]"


class CodeSearch:
    def __init__(
        self,
        guard: SourcePathGuard,
        *,
        max_files: int = MAX_FILES,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
        max_seconds: float = MAX_SECONDS,
        max_hits: int = MAX_HITS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.guard = guard
        self.max_files = min(max_files, MAX_FILES)
        self.max_entries = min(max_entries, MAX_ENTRIES)
        self.max_bytes = min(max_bytes, MAX_BYTES)
        self.max_seconds = min(max_seconds, MAX_SECONDS)
        self.max_hits = min(max_hits, MAX_HITS)
        self._clock = clock

    # -- the query --------------------------------------------------------------------------

    @staticmethod
    def compile(query: object, *, use_regex: bool) -> Any:
        if not isinstance(query, str) or not query or "\x00" in query or "\n" in query:
            raise SearchRefused("invalid_query")
        if not use_regex:
            if len(query) > 500:
                raise SearchRefused("invalid_query")
            return query
        if len(query) > MAX_PATTERN_CHARS:
            raise SearchRefused("pattern_too_long")
        # RE2 bounds the compiled program and its memory (a nested counted repeat such as
        # "(?:a{1000}){1000}" is refused at compile time, never expanded).
        try:
            return compile_untrusted(query)
        except PatternError as exc:
            raise SearchRefused(_REFUSALS.get(exc.reason, "invalid_pattern")) from exc

    @staticmethod
    def check_glob(glob: object) -> str | None:
        if glob is None:
            return None
        if not isinstance(glob, str) or not glob or len(glob) > 200 or "\x00" in glob:
            raise SearchRefused("invalid_glob")
        return glob

    # -- the walk ---------------------------------------------------------------------------

    def search(
        self, query: str, *, use_regex: bool = False, glob: str | None = None
    ) -> SearchOutcome:
        matcher = self.compile(query, use_regex=use_regex)
        glob = self.check_glob(glob)
        outcome = SearchOutcome()
        start = self._clock()
        deadline = start + self.max_seconds
        try:
            self._walk(matcher, glob, outcome, deadline)
        except _Stop as stop:
            outcome.exhausted = stop.why
        outcome.elapsed = self._clock() - start
        return outcome

    def _walk(
        self,
        matcher: Any,
        glob: str | None,
        outcome: SearchOutcome,
        deadline: float,
    ) -> None:
        root = self.guard.root
        stack = [root]
        while stack:
            directory = stack.pop()
            try:
                # At most a budget's worth of entries per directory: a directory of a
                # million files is not listed whole before the budget is checked.
                with os.scandir(directory) as listing:
                    entries = sorted(
                        itertools.islice(listing, self.max_files + 1),
                        key=lambda e: e.name,
                        reverse=True,
                    )
            except OSError:
                continue
            subdirs: list[str] = []
            for entry in reversed(entries):
                outcome.entries_seen += 1
                if outcome.entries_seen > self.max_entries:
                    raise _Stop("entries")
                if self._clock() >= deadline:
                    raise _Stop("time")
                name = entry.name
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    is_link = entry.is_symlink()
                except OSError:
                    continue
                if is_dir:
                    if name.startswith(".") or name.casefold() in SKIPPED_DIRS:
                        continue
                    if self.guard.allows_dir(entry.path):
                        subdirs.append(entry.path)
                    continue
                if outcome.files_scanned + outcome.files_skipped >= self.max_files:
                    raise _Stop("files")
                self._file(entry.path, is_link, matcher, glob, outcome, deadline)
            stack.extend(reversed(subdirs))

    def _file(
        self,
        path: str,
        is_link: bool,
        matcher: Any,
        glob: str | None,
        outcome: SearchOutcome,
        deadline: float,
    ) -> None:
        try:
            real = os.path.realpath(path) if is_link else path
            self.guard.check_real(real)
        except (PathDenied, OSError, ValueError):
            outcome.files_skipped += 1
            return
        root = self.guard.root
        shown = path[len(root) if root.endswith(os.sep) else len(root) + 1 :]
        if glob is not None and not (
            fnmatch.fnmatchcase(shown, glob)
            or ("/" not in glob and fnmatch.fnmatchcase(os.path.basename(shown), glob))
        ):
            outcome.files_skipped += 1
            return
        try:
            with self.guard.open(real) as fh:
                data = fh.read(MAX_FILE_BYTES + 1)
        except (PathDenied, OSError):
            outcome.files_skipped += 1
            return
        outcome.bytes_read += len(data)
        if outcome.bytes_read > self.max_bytes:
            raise _Stop("bytes")
        if len(data) > MAX_FILE_BYTES or b"\x00" in data[:8192]:
            outcome.files_skipped += 1
            return
        outcome.files_scanned += 1
        # The search runs on the redacted view of the file, the same text read_source shows:
        # matching the raw text would make every hit / no-hit an oracle on redacted values.
        text = redact_text(data.decode("utf-8", errors="replace"))
        if isinstance(matcher, str):
            self._literal(shown, text, matcher, outcome)
        else:
            self._regex(shown, text, matcher, outcome, deadline)

    def _add(self, outcome: SearchOutcome, hit: SearchHit) -> None:
        if len(outcome.hits) >= self.max_hits:
            raise _Stop("hits")
        outcome.hits.append(hit)

    def _literal(self, shown: str, text: str, needle: str, outcome: SearchOutcome) -> None:
        if needle not in text:
            return
        for number, line in enumerate(text.split("\n"), 1):
            if needle in line:
                self._add(outcome, SearchHit(shown, number, _clip(line)))

    def _regex(
        self,
        shown: str,
        text: str,
        pattern: Any,
        outcome: SearchOutcome,
        deadline: float,
    ) -> None:
        last_line = 0
        try:
            for match in pattern.finditer(text):
                if self._clock() > deadline:
                    raise TimeoutError
                number = text.count("\n", 0, match.start()) + 1
                if number == last_line:
                    continue
                last_line = number
                begin = text.rfind("\n", 0, match.start()) + 1
                end = text.find("\n", match.start())
                line = text[begin : end if end != -1 else len(text)]
                self._add(outcome, SearchHit(shown, number, _clip(line)))
        except TimeoutError as exc:
            raise _Stop("time") from exc
