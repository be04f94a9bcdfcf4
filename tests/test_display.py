"""Approval surfaces show every argument so that nothing in it can hide (``tools.display``).

Property tests over the classes of characters that render as nothing or as blank space:
whatever a value or a name holds, none of them reaches the card unescaped, and two
different names never render alike.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_webfetch.tools.display import argument_rows, visible_name, visible_text

FILLERS = [0x3164, 0x115F, 0x1160, 0xFFA0, 0x2800]
#: The Hangul fillers (category Lo) and the Braille blank (So): "printable" to
#: ``str.isprintable`` yet rendered as blank space.
BLANKS = ["\u3164", "\u115f", "\u1160", "\uffa0", "\u2800"]
SELECTORS = [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]
IGNORABLE = [0x034F, *range(0x180B, 0x1810), *range(0xE0000, 0xE0080)]
FORMAT = [c for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
HIDDEN = sorted({*FILLERS, *SELECTORS, *IGNORABLE, *FORMAT})
COMBINING = list(range(0x300, 0x370))

hidden_chars = st.sampled_from(HIDDEN).map(chr)
text_with_hidden = st.lists(
    st.one_of(hidden_chars, st.characters(codec="utf-8")), min_size=1, max_size=30
).map("".join)


@given(text_with_hidden)
def test_no_hidden_character_is_shown_raw(text):
    shown = visible_text(text)
    assert not any(ord(c) in set(HIDDEN) for c in shown)
    assert all(c.isprintable() for c in shown)


@given(st.sampled_from(COMBINING).map(chr), st.text(max_size=10))
def test_a_combining_mark_at_the_start_is_escaped(mark, rest):
    assert visible_text(mark + rest).startswith(f"\\u{ord(mark):04x}")
    value = argument_rows({"q": mark + rest})[0][1]
    assert value.startswith(f'"\\u{ord(mark):04x}')  # not merged into the quote


def test_a_combining_mark_on_a_letter_is_kept():
    assert visible_text("cafe\u0301") == "cafe\u0301"


@given(st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8), hidden_chars)
def test_two_names_that_differ_by_a_hidden_character_render_differently(name, char):
    rows = argument_rows({name: 1, name + char: 2})
    assert rows[0][0] != rows[1][0]
    assert "[unusual name]" in rows[1][0]


def test_an_identifier_name_is_not_flagged_and_others_are():
    assert visible_name("url") == "url"
    assert visible_name("url\u3164") == "url\\u3164 [unusual name]"
    assert visible_name("ur\u0406") == "ur\u0406 [unusual name]"  # a Cyrillic look-alike


@pytest.mark.parametrize("char", BLANKS, ids=[f"U+{ord(c):04X}" for c in BLANKS])
def test_a_blank_rendering_character_is_shown_escaped(char):
    # A run of fillers would push the rest of a value (``&ssn=...``) out of sight on one line.
    assert char not in visible_text(f"https://allowed.example/?q=x{char * 50}&ssn=123")


def test_two_argument_names_never_render_alike():
    # ``url`` and ``url`` + U+3164: the approver would read one ``url`` twice.
    rows = argument_rows({"url": "https://allowed.example/", "url\u3164": "https://x.example/"})
    names = [name for name, _ in rows]
    assert len(set(names)) == 2
    assert all(name.isascii() or "\\u" in name for name in names)


def _one_character_at_a_time(text: str) -> str:
    """The rule of ``visible_text`` as written in its docstring, one character at a time
    (no run copied whole, no cached class): the fast path must agree with it."""
    from django_webfetch.tools.display import _BLANK_RANGES, MAX_MARKS

    out: list[str] = []
    previous: str | None = None
    marks = 0
    for char in text:
        code = ord(char)
        mark = unicodedata.category(char).startswith("M")
        hidden = (
            not char.isprintable()
            or any(low <= code <= high for low, high in _BLANK_RANGES)
            or unicodedata.category(char) == "Cf"
            or (mark and (previous is None or not previous.isalnum() or marks >= MAX_MARKS))
        )
        if hidden:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
            previous = None
        else:
            out.append(char)
            previous, marks = (previous, marks + 1) if mark else (char, 0)
    return "".join(out)


@given(
    st.lists(
        st.one_of(
            st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8),
            hidden_chars,
            st.sampled_from(COMBINING).map(chr),
            st.characters(codec="utf-8"),
        ),
        max_size=40,
    ).map("".join)
)
def test_the_fast_path_escapes_exactly_what_one_character_at_a_time_does(text):
    """ASCII runs copied whole and cached classes change nothing: a mark after an ASCII
    run, after an escape or at the start, hidden and blank characters anywhere."""
    assert visible_text(text) == _one_character_at_a_time(text)
