"""Issue 19 (4): the offline planner's patterns run on RE2 and find what they found on ``re``."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.assistant import planner
from django_webfetch.text.patterns import is_linear

# The patterns as they were on ``re`` (the path one backtracked exponentially).
_OLD_URL = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
_OLD_PATH = re.compile(r"(?<![\w/:.@-])(/(?:[A-Za-z0-9._~-]+/?)*)(?=[\s?!.,;:)]|$)")
_OLD_PAGES = re.compile(r"\b(?:which|what|list)\b.*\bpages\b", re.IGNORECASE | re.DOTALL)


def _old_path(text):
    for match in _OLD_PATH.finditer(_OLD_URL.sub(" ", text)):
        path = match.group(1).rstrip(".")
        if len(path) <= 500:
            return path
    return ""


def test_every_planner_pattern_is_re2():
    for name in ("_URL_RE", "_PATH_RE", "_PAGES_RE", "_PAGE_RE", "_LISTED_RE", "_WORD_RE"):
        assert is_linear(getattr(planner, name)), name


def test_a_39_character_message_finds_no_path_on_re2():
    """``/`` and 37 letters and a ``#``: 3-9 s on ``re``, each extra letter doubling it."""
    message = "/" + "a" * 37 + "#"
    assert len(message) == 39
    assert planner._path(message) == ""
    assert planner._path("/" + "ab/" * 5000 + "#") == ""  # 15 KB: still linear
    assert planner._path("read /about/ please") == "/about/"


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="/a.~ :@-?é\n\xa0)x_", max_size=14))
def test_the_path_port_finds_what_re_found(text):
    assert planner._path(text) == _old_path(text)


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.sampled_from(["which", "what", "list", "pages", "page", " ", "é", "x", "\n", "_"]),
        max_size=8,
    ).map("".join)
)
def test_the_pages_ports_decide_as_re_did(text):
    assert (planner._PAGES_RE.search(text) is None) == (_OLD_PAGES.search(text) is None)
    assert (planner._PAGE_RE.search(text) is None) == (
        re.search(r"\bpage\b", text, re.IGNORECASE) is None
    )


def test_listed_pages_and_urls_still_parse():
    listing = "[3] Opening hours - /opening-hours/\n[1] Home - / (home page)"
    assert planner._page_named("read the Opening hours page", listing) == "/opening-hours/"
    assert planner._urls("see https://a.example/x, then") == ["https://a.example/x"]
