"""A static check that a backtracking (``re``) pattern has no super-linear backtracking.

Moved here from ``plugins/manifest.py`` when plugin patterns moved to RE2 (issue 19); it now
backs ``tests/text/test_patterns.py``, which walks every pattern of the package.

``backtracking_cost`` walks the parsed pattern: consecutive variable-length items
(quantifiers, alternations) multiply their spans when the characters they can consume
overlap (the engine may split a run of text between them in every way: ``a*a*a*b`` is
cubic), a quantified item multiplies by its body's cost (``(a+)+`` is exponential), and a
fixed item that none of them can consume ends the run.  An unbounded quantifier counts as
``UNBOUNDED``.  A pattern whose cost stays within ``MAX_PATTERN_COST`` (one unbounded run
times a small constant) tries a number of ways per start position that is at most linear
in the text.  Conservative: case is ignored, classes it cannot read count as every
character, look-arounds and anything unknown count as the worst.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

UNBOUNDED = 4096

#: The worst factor a pattern may have: one unbounded quantifier times 8.
MAX_PATTERN_COST = UNBOUNDED * 8

_ASCII = 128  # bit 128 stands for every non-ASCII character
_ALL_CHARS = (1 << (_ASCII + 1)) - 1


def _bits(chars: Iterable[int]) -> int:
    bits = 0
    for code in chars:
        bits |= 1 << min(code, _ASCII)
    return bits


def _category_bits() -> dict[Any, int]:
    from re import _constants as c  # type: ignore[attr-defined]

    digit = _bits(range(48, 58)) | 1 << _ASCII
    word = _bits([*range(48, 58), *range(65, 91), *range(97, 123), 95]) | 1 << _ASCII
    space = _bits([9, 10, 11, 12, 13, 28, 29, 30, 31, 32]) | 1 << _ASCII
    table = {c.CATEGORY_DIGIT: digit, c.CATEGORY_WORD: word, c.CATEGORY_SPACE: space}
    for name in ("DIGIT", "WORD", "SPACE"):
        table[getattr(c, f"CATEGORY_NOT_{name}")] = _ALL_CHARS
    return table


def _folded(bits: int) -> int:
    """Both cases of every ASCII letter (a pattern may turn case-insensitive inline)."""
    for upper in range(65, 91):
        if bits & (1 << upper) or bits & (1 << (upper + 32)):
            bits |= 1 << upper | 1 << (upper + 32)
    return bits


def backtracking_cost(pattern: str) -> int:
    """An upper estimate of how many ways the stdlib engine may try per start position.

    Walks the parsed pattern: consecutive variable-length items (quantifiers,
    alternations) multiply their spans when the characters they can consume overlap (the
    engine may split a run of text between them in every way: ``a*a*a*b`` is cubic), and
    a fixed item that none of them can consume ends the run.  An unbounded quantifier
    counts as ``UNBOUNDED`` (the longest config string).  Conservative: case is
    ignored, classes it cannot read count as every character.
    """
    from re import _constants as c  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]

    categories = _category_bits()

    def item_bits(op: Any, av: Any) -> int:
        if op is c.LITERAL:
            return _bits([av])
        if op is c.NOT_LITERAL:
            return (_ALL_CHARS & ~_bits([av])) | 1 << _ASCII
        if op is c.IN:
            bits, negate = 0, False
            for kind, value in av:
                if kind is c.NEGATE:
                    negate = True
                elif kind is c.LITERAL:
                    bits |= _bits([value])
                elif kind is c.RANGE:
                    low, high = value
                    bits |= _bits(range(low, min(high, _ASCII) + 1))
                elif kind is c.CATEGORY:
                    bits |= categories.get(value, _ALL_CHARS)
                else:
                    bits = _ALL_CHARS
            return (_ALL_CHARS & ~bits) | 1 << _ASCII if negate else bits
        return _ALL_CHARS  # ANY, NOT_LITERAL, anything else

    def sequence(items: Any) -> tuple[int, int, int, bool]:
        """(cost, characters it can consume, characters it can start with, can be empty)"""
        worst, run, run_bits, seen, first, nullable = 1, 1, 0, 0, 0, True
        for op, av in items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
                low, high, sub = av
                inner, bits, starts, empty = sequence(sub)
                span = UNBOUNDED if high is c.MAXREPEAT else max(1, high - low + 1)
                factor, variable = min(span, UNBOUNDED) * inner, span > 1 or inner > 1
                empty = empty or low == 0
            elif op is c.SUBPATTERN or op is getattr(c, "ATOMIC_GROUP", None):
                factor, bits, starts, empty = sequence(av[-1] if op is c.SUBPATTERN else av)
                variable = factor > 1
            elif op is c.BRANCH:
                branches = [sequence(branch) for branch in av[1]]
                factor = sum(branch[0] for branch in branches)
                bits = starts = 0
                empty = False
                for _, branch_bits, branch_starts, branch_empty in branches:
                    bits, starts = bits | branch_bits, starts | branch_starts
                    empty = empty or branch_empty
                variable = True
            elif op is c.AT:
                continue  # zero width
            elif op in (c.LITERAL, c.NOT_LITERAL, c.IN, c.ANY):
                factor, variable, empty = 1, False, False
                bits = starts = item_bits(op, av)
            else:  # a conditional or anything else: counted as the worst
                factor, bits, starts, variable, empty = (
                    UNBOUNDED,
                    _ALL_CHARS,
                    _ALL_CHARS,
                    True,
                    True,
                )
            bits, starts = _folded(bits), _folded(starts)
            seen |= bits
            if nullable:
                first |= starts
                nullable = empty
            # The run so far and this item compete for the same text when this item can
            # start with a character the run can consume.
            overlaps = bool(starts & run_bits)
            if variable:
                if overlaps:
                    run *= factor
                    run_bits |= bits
                elif empty and run_bits:
                    # It may match nothing: the run goes on past it to the next item.
                    run, run_bits = max(run, factor), run_bits | bits
                else:
                    worst = max(worst, run)
                    run, run_bits = factor, bits
            elif not overlaps and not empty:
                worst = max(worst, run)
                run, run_bits = 1, 0
            if run > MAX_PATTERN_COST:
                break  # refused anyway; keeps the arithmetic small
        return max(worst, run), seen, first, nullable

    return sequence(_parser.parse(pattern))[0]
