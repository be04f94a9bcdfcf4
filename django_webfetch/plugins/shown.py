"""How every value a plugin distribution controls is shown to an operator.

A distribution's METADATA ``Name`` and ``Version``, its dependencies' names, versions and
directories, where its code is, and every refusal that quotes them reach the operator's
terminal (``webfetch plugin list|install|bind|upgrade|trust|check``), the admin's pages
(the plugin instance's fields, the trust confirmation page, its messages) and the system
check messages (W030-W034, E030, E035).  Each goes through ``shown``: a terminal escape
(``ESC [1A``), a bidirectional override (U+202E), a line break or any other character that
is not printable, renders blank, is a combining mark with nothing to combine with or is
past ``MAX_MARKS`` (3) marks on one character is written as ``\\uXXXX``, so the text can
neither rewrite, reorder nor draw over what is printed around it
(tests/plugins/test_shown.py, tests/plugins/test_bounded_reads_and_shown_metadata.py).  HTML
surfaces escape the result on top of that.
"""

from __future__ import annotations

from django_webfetch.tools.display import visible_text

__all__ = ["shown"]


def shown(value: object) -> str:
    """``str(value)`` with every character that could hide or forge text escaped."""
    return visible_text(str(value))
