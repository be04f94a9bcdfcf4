"""``search_code``'s engine: ``path:line`` hits in project files under a hard budget.

Literal substring by default.  A regular expression is opt-in, at most
``MAX_PATTERN_CHARS`` long, and runs on the ``regex`` package, whose matching can be
interrupted (``timeout=``): Python's ``re`` cannot be, so a catastrophic pattern would
hold the worker.  The walk never follows a directory symlink, skips ``site-packages``,
``node_modules``, ``media``, ``static``, ``__pycache__`` and dot directories, and asks the
``SourcePathGuard`` about every directory and file (a symlinked file is resolved and must
stay inside the root like any other path).  The whole search stops at ``MAX_FILES`` files
or ``MAX_SECONDS`` and says which budget ran out.  Pure Python.
"""

from __future__ import annotations

import fnmatch
import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import regex

try:  # Python >= 3.11; sre_parse warns on import there
    from re import _constants as _sre_constants  # type: ignore[attr-defined]
    from re import _parser as _sre_parser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_constants
    import sre_parse as _sre_parser

from .paths import PathDenied, SourcePathGuard, redact_line

__all__ = [
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
MAX_SECONDS = 5.0
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
    #: ``None`` when the whole tree was searched; else ``"files"``, ``"time"`` or ``"hits"``.
    exhausted: str | None = None
    elapsed: float = 0.0


#: Upper bound of a pattern's expanded size (a counted repeat multiplies its body).
MAX_PATTERN_EXPANSION = 20_000


def _expanded(items: object, depth: int = 0) -> int:
    """The size a pattern's parse tree expands to: a repeat counts ``max`` (or ``min`` when
    unbounded) times its body.  Raises ``SearchRefused`` past the bound or 50 levels."""
    if depth > 50:
        raise SearchRefused("pattern_too_complex")
    total = 0
    for op, arg in items:  # type: ignore[attr-defined]
        name = str(op)
        if name in {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}:
            low, high, body = arg
            count = high if high != _sre_parser.MAXREPEAT else max(low, 1)
            total += max(count, 1) * _expanded(body, depth + 1)
        elif name == "SUBPATTERN":
            total += _expanded(arg[-1], depth + 1)
        elif name in {"ATOMIC_GROUP"}:
            total += _expanded(arg, depth + 1)
        elif name == "BRANCH":
            total += sum(_expanded(branch, depth + 1) for branch in arg[1])
        elif name in {"ASSERT", "ASSERT_NOT"}:
            total += _expanded(arg[1], depth + 1)
        elif name == "GROUPREF_EXISTS":
            total += sum(_expanded(part, depth + 1) for part in arg[1:] if part is not None)
        else:
            total += 1
        if total > MAX_PATTERN_EXPANSION:
            raise SearchRefused("pattern_too_complex")
    return total


def check_complexity(pattern: str) -> None:
    """Refuse a pattern that is not standard ``re`` syntax or expands past the bound."""
    try:
        tree = _sre_parser.parse(pattern)
    except (_sre_constants.error, OverflowError, RecursionError, ValueError) as exc:
        raise SearchRefused("invalid_pattern") from exc
    _expanded(list(tree))


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
        max_seconds: float = MAX_SECONDS,
        max_hits: int = MAX_HITS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.guard = guard
        self.max_files = min(max_files, MAX_FILES)
        self.max_seconds = min(max_seconds, MAX_SECONDS)
        self.max_hits = min(max_hits, MAX_HITS)
        self._clock = clock

    # -- the query --------------------------------------------------------------------------

    @staticmethod
    def compile(query: object, *, use_regex: bool) -> regex.Pattern[str] | str:
        if not isinstance(query, str) or not query or "\x00" in query or "\n" in query:
            raise SearchRefused("invalid_query")
        if not use_regex:
            if len(query) > 500:
                raise SearchRefused("invalid_query")
            return query
        if len(query) > MAX_PATTERN_CHARS:
            raise SearchRefused("pattern_too_long")
        # Compiling is not interruptible and nested counted repeats expand at compile time
        # ("(?:a{1000}){1000}" takes seconds and hundreds of MiB): bound the expansion
        # first, on the standard library's parse tree (which never expands anything).
        check_complexity(query)
        try:
            return regex.compile(query, regex.VERSION0)
        except (regex.error, OverflowError, RecursionError, ValueError) as exc:
            raise SearchRefused("invalid_pattern") from exc

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
        matcher: regex.Pattern[str] | str,
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
        matcher: regex.Pattern[str] | str,
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
        if len(data) > MAX_FILE_BYTES or b"\x00" in data[:8192]:
            outcome.files_skipped += 1
            return
        outcome.files_scanned += 1
        text = data.decode("utf-8", errors="replace")
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
                self._add(outcome, SearchHit(shown, number, redact_line(_clip(line))))

    def _regex(
        self,
        shown: str,
        text: str,
        pattern: regex.Pattern[str],
        outcome: SearchOutcome,
        deadline: float,
    ) -> None:
        last_line = 0
        try:
            for match in pattern.finditer(text, timeout=max(deadline - self._clock(), 0.001)):
                number = text.count("\n", 0, match.start()) + 1
                if number == last_line:
                    continue
                last_line = number
                begin = text.rfind("\n", 0, match.start()) + 1
                end = text.find("\n", match.start())
                line = text[begin : end if end != -1 else len(text)]
                self._add(outcome, SearchHit(shown, number, redact_line(_clip(line))))
        except TimeoutError as exc:
            raise _Stop("time") from exc
