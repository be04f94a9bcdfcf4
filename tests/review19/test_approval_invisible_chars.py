"""Finding: approval surfaces (admin card, CMS card, e-mail: ``tools.display``) escape only
what ``str.isprintable`` calls unprintable.  Characters that are "printable" (letters or
symbols) but render as nothing or as blank space pass unescaped:

- U+3164 HANGUL FILLER, U+115F/U+1160 HANGUL CHOSEONG/JUNGSEONG FILLER, U+FFA0 HALFWIDTH
  HANGUL FILLER (category Lo) and U+2800 BRAILLE PATTERN BLANK (So).

So two different argument names show as the same name (``url`` and ``url`` + U+3164: the
approver reads one ``url`` twice, the plugin uses the other), and a run of fillers pushes
the rest of a value (``&ssn=…``) far out of sight on one line.  The safe behaviour: every
such character is shown as an escape, and distinct names never render alike.
"""

from __future__ import annotations

import pytest

from django_webfetch.tools.display import argument_rows, visible_text

BLANKS = ["\u3164", "\u115f", "\u1160", "\uffa0", "\u2800"]


@pytest.mark.parametrize("char", BLANKS, ids=[f"U+{ord(c):04X}" for c in BLANKS])
def test_a_blank_rendering_character_is_shown_escaped(char):
    assert char not in visible_text(f"https://allowed.example/?q=x{char * 50}&ssn=123")


def test_two_argument_names_never_render_alike():
    rows = argument_rows({"url": "https://allowed.example/", "url\u3164": "https://x.example/"})
    names = [name for name, _ in rows]
    assert len(set(names)) == 2
    assert all(name.isascii() or "\\u" in name for name in names)
