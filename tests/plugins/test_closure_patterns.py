"""The closure's patterns read a distribution author's metadata on RE2 (linear in the text)
and read it as the Python ``re`` patterns they replaced did: the same name, the same
extras, the same verdict, for every code point and for random requirement lines."""

from __future__ import annotations

import re
import sys

from hypothesis import example, given
from hypothesis import strategies as st

from django_webfetch.plugins import closure
from django_webfetch.text.patterns import compile_pattern, is_linear

#: The patterns closure.py had on Python's ``re`` (their meaning is the reference).
OLD_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
OLD_VALID_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
OLD_EXTRAS = re.compile(r"\s*[A-Za-z0-9._-]+\s*\[([^\]]*)\]")


def _old_normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_closure_pattern_is_on_re2():
    for name in ("_NAME", "_VALID_NAME", "_EXTRAS", "_SEPARATORS", "_VALID_VERSION"):
        assert is_linear(getattr(closure, name)), name


def test_the_space_class_is_pythons_whitespace_on_every_code_point():
    space = compile_pattern(closure._SPACE)
    differ = [
        hex(point)
        for point in range(sys.maxunicode + 1)
        if not 0xD800 <= point <= 0xDFFF
        and bool(space.fullmatch(chr(point))) != bool(re.fullmatch(r"\s", chr(point)))
    ]
    assert differ == []
    # The walk compared what it is about: Python's text whitespace is more than ASCII.
    assert space.fullmatch("\u3000") and space.fullmatch("\x1c") and not space.fullmatch("x")


_PIECES = st.sampled_from(
    [
        "a",
        "Z",
        "9",
        "-",
        "_",
        ".",
        " ",
        "\t",
        "\xa0",
        "\u2028",
        "\x1f",
        "[",
        "]",
        ",",
        ";",
        "(",
        ">",
        "=",
        "é",
        "\n",
        "extra",
        "requests",
    ]
)
LINES = st.lists(_PIECES, max_size=24).map("".join) | st.text(max_size=40)


def _match(pattern, text):
    found = pattern.match(text)
    return None if found is None else (found.group(0), found.groups())


@given(LINES)
@example(" \u3000name [x, y] ; extra == 'a'")
@example("\xa0requests[socks]")
@example("a" + "." * 2000)
@example("a..b__c--D")
def test_the_re2_patterns_read_a_line_as_the_re_patterns_did(line):
    assert _match(closure._NAME, line) == _match(OLD_NAME, line)
    assert _match(closure._EXTRAS, line) == _match(OLD_EXTRAS, line)
    assert bool(closure._VALID_NAME.fullmatch(line)) == bool(OLD_VALID_NAME.fullmatch(line))
    assert closure.normalized(line) == _old_normalized(line)
