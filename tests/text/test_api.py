from __future__ import annotations

import subprocess
import sys

import django_webfetch.text as text


def test_exported_members():
    assert text.__all__ == sorted(text.__all__)
    assert {name for name in dir(text) if not name.startswith("_")} >= set(text.__all__)


def test_bounds():
    assert text.MAX_TEXT_CHARS == 20_000
    assert text.MAX_RESULT_BYTES == 48_000
    assert text.MAX_PARSER_INPUT == 256 * 1024
    assert text.MAX_DEPTH == 200
    # Work budgets decide what a user gets; the clock is a far safety net (10x the old 0.4 s).
    assert text.MAX_PARSE_STEPS == 120_000
    assert text.MAX_RENDER_STEPS == 160_000
    assert text.TIME_LIMIT == 4.0


def test_imports_neither_django_nor_the_network_core():
    code = (
        "import sys, django_webfetch.text as t\n"
        "t.fence(t.extract_text(b'<p>x'), source_url='https://e.org', status_line='HTTP 200')\n"
        "bad = [m for m in sys.modules if m == 'django' or m.startswith('django.')"
        " or m.startswith('django_webfetch.net')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
