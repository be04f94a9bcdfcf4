"""Linear-time regular expressions (RE2) for text nobody here controls (DESIGN.md §1).

Every pattern that an outsider, an editor, a web page, a log line or a plugin author can
influence (by the pattern itself or by the text it runs over) runs on RE2 (``google-re2``):
an automaton, not a backtracking engine, so matching is linear in the text whatever the
pattern.  RE2 has no backreferences and no look-around; a pattern that needs them is not
RE2 syntax and is refused.

``compile_pattern`` is for the project's own patterns (a mistake is a bug: ``re2.error``
propagates).  ``compile_untrusted`` is for patterns someone else wrote (a plugin's JSON
Schema ``pattern``, a config field's ``pattern``): it adds explicit limits on top of
linear time, and refuses with a ``PatternError`` whose ``reason`` is stable:

====================  ===========================================================
``pattern_type``      not a string
``pattern_too_long``  more than ``MAX_UNTRUSTED_PATTERN_CHARS`` characters
``pattern_syntax``    not RE2 syntax (backreferences, look-around, ``\\Z``...)
``pattern_too_large`` the compiled program (forward or reverse) is over
                      ``MAX_PROGRAM_BYTES``, or does not fit ``MAX_MEMORY_BYTES``
====================  ===========================================================

``MAX_MEMORY_BYTES`` is RE2's ``max_mem`` for such a pattern: the budget of the compiled
programs and of the DFA state caches together.  A DFA that runs out of it falls back to
RE2's NFA, which is slower but still linear.  Pure Python: no Django import.
"""

from __future__ import annotations

from typing import Any

import re2

__all__ = [
    "ENGINE",
    "MAX_MEMORY_BYTES",
    "MAX_PROGRAM_BYTES",
    "MAX_UNTRUSTED_PATTERN_CHARS",
    "PatternError",
    "compile_pattern",
    "compile_untrusted",
    "is_linear",
    "program_bytes",
]

#: What ``is_linear`` recognises; tests assert it.
ENGINE = "re2"
MAX_PROGRAM_BYTES = 256 * 1024
MAX_MEMORY_BYTES = 1024 * 1024
MAX_UNTRUSTED_PATTERN_CHARS = 1000
#: ``sizeof(re2::Prog::Inst)``: RE2 reports program sizes in instructions.
_INSTRUCTION_BYTES = 8


class PatternError(ValueError):
    """A pattern refused by ``compile_untrusted``; ``reason`` is a stable code."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


def _options(*, max_mem: int | None = None) -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is our error to report, not RE2's log line
    if max_mem is not None:
        options.max_mem = max_mem
    return options


def compile_pattern(pattern: str | bytes) -> Any:
    """One of the project's own patterns, on RE2.  Flags go inline (``(?i)``, ``(?s)``,
    ``(?m)``); there is no verbose mode and no look-around."""
    return re2.compile(pattern, options=_options())


def compile_untrusted(pattern: object) -> Any:
    """A pattern someone else wrote, on RE2 under the limits above; ``PatternError``."""
    if not isinstance(pattern, str):
        raise PatternError("pattern_type", "a pattern must be a string")
    if len(pattern) > MAX_UNTRUSTED_PATTERN_CHARS:
        raise PatternError(
            "pattern_too_long",
            f"a pattern may have at most {MAX_UNTRUSTED_PATTERN_CHARS} characters",
        )
    try:
        compiled = re2.compile(pattern, options=_options(max_mem=MAX_MEMORY_BYTES))
    except re2.error as exc:
        text = str(exc)
        if any(word in text for word in ("too large", "too big", "repetition size", "nest")):
            raise PatternError(
                "pattern_too_large", "the pattern compiles past the size limit"
            ) from exc
        raise PatternError(
            "pattern_syntax",
            "the pattern is not RE2 syntax (no backreferences or look-around)",
        ) from exc
    sizes = (compiled.programsize, compiled.reverseprogramsize)
    if any(size < 0 or size * _INSTRUCTION_BYTES > MAX_PROGRAM_BYTES for size in sizes):
        raise PatternError(
            "pattern_too_large",
            f"the compiled pattern is over {MAX_PROGRAM_BYTES // 1024} KiB",
        )
    return compiled


def program_bytes(compiled: Any) -> int:
    """The bytes of ``compiled``'s forward and reverse programs (what RE2 built, in time
    linear in them): what a caller compiling many untrusted patterns sums to bound them."""
    return int(compiled.programsize + compiled.reverseprogramsize) * _INSTRUCTION_BYTES


def is_linear(compiled: object) -> bool:
    """Whether ``compiled`` is an RE2 pattern (matching linear in the text)."""
    return type(compiled).__module__.startswith("re2")
