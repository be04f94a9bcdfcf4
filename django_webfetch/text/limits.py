"""Hard bounds of the text layer (DESIGN.md section 5)."""

from __future__ import annotations

import time

__all__ = [
    "MAX_DEPTH",
    "MAX_PARSER_INPUT",
    "MAX_RESULT_BYTES",
    "MAX_STORED_CHARS",
    "MAX_TEXT_CHARS",
    "TIME_LIMIT",
    "Deadline",
    "DeadlinePassed",
]

#: Characters of page text kept by :func:`~django_webfetch.text.extract_text`.
MAX_TEXT_CHARS = 20_000

#: Characters of a page's whole text kept for reading in parts of ``MAX_TEXT_CHARS``.
MAX_STORED_CHARS = 200_000

#: The whole fenced result (preamble, markers, status line, source URL, text) stays below this
#: many bytes of UTF-8.
MAX_RESULT_BYTES = 48_000

#: html5lib never sees more than this many bytes (UTF-8) of markup.
MAX_PARSER_INPUT = 256 * 1024

#: Open elements deeper than this are neither parsed nor rendered.
MAX_DEPTH = 200

#: Seconds ``extract_text`` may spend on the pre-scan, html5lib and the renderer together; past
#: them it abandons the tree and returns the page's text without layout, marked as such.
TIME_LIMIT = 0.4


class Deadline:
    """The time limit of one extraction.

    It has passed once ``seconds`` of wall-clock time have gone by and this thread has used
    as many seconds of CPU time, or in any case after four times ``seconds``.  The CPU
    condition keeps a busy machine (other processes on the same cores) from cutting short
    a page that does little work; the last condition is the hard wall-clock bound.
    """

    __slots__ = ("_cpu", "_cpu_budget", "_hard", "_soft")

    def __init__(self, seconds: float) -> None:
        now = time.monotonic()
        self._soft = now + seconds
        self._hard = now + 4 * seconds
        self._cpu = time.thread_time()
        self._cpu_budget = seconds

    def passed(self) -> bool:
        now = time.monotonic()
        if now <= self._soft:
            return False
        return now > self._hard or time.thread_time() - self._cpu >= self._cpu_budget


class DeadlinePassed(Exception):
    """The wall-clock deadline of one extraction passed (raised inside the parse or render)."""
