"""Hard bounds of the text layer (DESIGN.md section 5).

Every bound that decides what a user gets counts work (bytes, tokens, elements, nodes, the
pre-scan's estimated parse cost), never seconds, so the same page gives the same text on a
busy machine as on an idle one.  The only clock left is :class:`Deadline`, a far safety net
that a healthy machine never reaches (ten times the old time limit): when it fires, the
result says so (``reason="out_of_time"``).
"""

from __future__ import annotations

import time

__all__ = [
    "MAX_DEPTH",
    "MAX_PARSER_INPUT",
    "MAX_PARSE_STEPS",
    "MAX_RENDER_STEPS",
    "MAX_RESULT_BYTES",
    "MAX_STORED_CHARS",
    "MAX_TEXT_CHARS",
    "TIME_LIMIT",
    "Deadline",
    "DeadlinePassed",
    "Meter",
    "OverBudget",
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

#: Steps the parser may take on the markup the pre-scan let through: html5lib's tokens plus
#: the elements its tree builder creates, or the nodes of Lexbor's tree copied.  The
#: pre-scan's cost budget already keeps every page it lets through far below (at most about
#: 13,000 tags and 20,000 re-opened formatting elements, 40,000 text tokens): this bound
#: holds even where the cost model were wrong.
MAX_PARSE_STEPS = 120_000

#: Nodes (elements and pieces of text) the renderer may visit.  A tree the parse budget let
#: through has fewer.
MAX_RENDER_STEPS = 160_000

#: Seconds of the far safety net (:class:`Deadline`): ten times the time limit the text layer
#: had before its bounds counted work (0.4 s).  No page the work budgets let through comes
#: near it on a healthy machine (``python -m tests.benchmarks bench_worst_case``).
TIME_LIMIT = 4.0


class Deadline:
    """The far wall-clock safety net of one extraction.

    It has passed once ``seconds`` of wall-clock time have gone by and this thread has used
    as many seconds of CPU time, or in any case after fifteen times ``seconds`` of wall-clock
    time.  The work budgets decide what a user gets; this only stops a machine so slow or
    so stalled that the bounded work takes many times what it takes here.  CPU time is what
    the first condition counts, because other processes on a busy machine inflate
    wall-clock time but not this thread's CPU time (issue 28: under coverage tracing and a
    load of 10 on 2 cores, a 400 KB page passed four times 4 s of wall-clock time).
    """

    __slots__ = ("_cpu", "_cpu_budget", "_hard", "_soft")

    def __init__(self, seconds: float) -> None:
        now = time.monotonic()
        self._soft = now + seconds
        self._hard = now + 15 * seconds
        self._cpu = time.thread_time()
        self._cpu_budget = seconds

    def passed(self) -> bool:
        now = time.monotonic()
        if now <= self._soft:
            return False
        return now > self._hard or time.thread_time() - self._cpu >= self._cpu_budget


class DeadlinePassed(Exception):
    """The safety net of one extraction fired (raised inside the parse or render)."""


class OverBudget(Exception):
    """A work budget of one extraction ran out (raised inside the parse or render).

    Counted in steps, so it happens on the same pages on every machine."""


#: Steps between two looks at the safety net's clock.
CLOCK_EVERY = 64


class Meter:
    """Counts the steps of one stage (the parse, the render) against its budget, and looks
    at the safety net every :data:`CLOCK_EVERY` steps."""

    __slots__ = ("budget", "clock", "deadline", "steps")

    def __init__(self, budget: int, deadline: Deadline | None = None) -> None:
        self.budget = budget
        self.deadline = deadline
        self.steps = 0
        self.clock = CLOCK_EVERY

    def step(self) -> None:
        """One step: raises :class:`OverBudget` past the budget, :class:`DeadlinePassed`
        once the safety net has fired."""
        self.steps += 1
        if self.steps > self.budget:
            raise OverBudget
        self.clock -= 1
        if not self.clock:
            self.clock = CLOCK_EVERY
            if self.deadline is not None and self.deadline.passed():
                raise DeadlinePassed
