"""The main-content pass (``django_webfetch/text/region.py``) on RE2 and string searches
gives what its former ``re`` version (``tests/text/region_reference.py``) gave,
on pages built from the pieces its patterns look at; and it reads element names as HTML
does: ASCII letters in either case, no other character folded to one (DESIGN.md §1).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.text import region
from django_webfetch.text.patterns import is_linear
from tests.text import region_reference as reference

#: Pieces of markup around what the patterns look for: tag names with each delimiter, in
#: both cases, cut short, inside text and attributes, links, lone ``<`` and ``>``, NUL,
#: non-ASCII text.
_PIECES = [
    "<", ">", "/", "=", '"', "'", "\t", "\n", "\f", "\r", " ", "\x00", "é", "中",
    "a", "A", "<a", "<a>", "<A href=x>", "<a/>", "<a\x00>", "<ab>", "</a>",
    "main", "mainframe", "<main", "<main>", "<MAIN ", "<main/>", "</main", "</Main>", "<mainx",
    " role=main", ' role="main"', " ROLE='Main'", "role = main>", " role=mainly",
    "<div", "<DIV ", "</div", "</div>", "<div role=main>", "<section role=main>",
    "<SECTION>", "</section>", "</Section ", "<s", "<x<y>",
    "<article>", "</article>", "<ARTICLE ", "<p>", "</p>", "word ", "text " * 20,
]  # fmt: skip
_PAGES = st.lists(st.sampled_from(_PIECES), max_size=80).map("".join)
_LONG = st.tuples(_PAGES, st.integers(1, 60)).map(lambda t: t[0] * t[1])


@pytest.mark.unmeasured("a property: test_over_budget.py's region tests cover these lines")
@settings(max_examples=400, deadline=None)
@given(st.one_of(_PAGES, _LONG))
def test_the_region_and_its_steps_are_those_of_the_re_version(page):
    assert region.main_region(page, stripped=True) == reference.main_region(page, stripped=True)
    assert region._chars(page) == reference._chars(page)
    assert region._role_main(page) == reference._role_main(page)
    assert region._tokens(page, 0, len(page)) == reference._tokens(page, 0, len(page))


def test_every_pattern_of_the_pass_is_re2():
    """The ``role="main"`` search and the element name are RE2; the rest is string searches
    (no ``re`` at all, no pattern compiled per page)."""
    patterns = [value for value in vars(region).values() if hasattr(value, "pattern")]
    assert len(patterns) == 2 and all(is_linear(p) for p in patterns)
    assert "re" not in vars(region) and "compile_pattern(" not in _function_bodies()


def _function_bodies() -> str:
    import inspect

    return "".join(
        inspect.getsource(value)
        for value in vars(region).values()
        if inspect.isfunction(value) and value.__module__ == region.__name__
    )


def test_element_names_are_ascii_case_insensitive_only():
    filler = "<p>" + "Words of the article. " * 20 + "</p>"
    assert region.main_region(f"<MaIn>{filler}</MAIN><p>after</p>") == f"<MaIn>{filler}"
    # U+0130 and U+0131 are no "i", U+017F no "s", U+212A no "k" in a tag name (Python's
    # re.IGNORECASE folded them; the HTML tokenizer lowercases ASCII letters only).
    for name in ("maİn", "maın"):
        assert region._semantic(f"<{name}>{filler}</{name}>") is None, name
    for name, other in (("section", "ſection"), ("kbd", "\u212abd")):
        page = f"<{name} role=main>{filler}</{other}>{filler}</{name}><p>after</p>"
        assert region.main_region(page) == f"<{name} role=main>{filler}</{other}>{filler}"
        assert reference.main_region(page) == f"<{name} role=main>{filler}", "folded"
    assert reference._semantic(f"<maİn>{filler}</maİn>") is not None, "folded"


def test_a_tag_whose_name_only_begins_with_main_is_no_main_element():
    filler = "<p>" + "Words of the article. " * 20 + "</p>"
    page = f"<mainmenu>{filler}</mainmenu><main>{filler}</main><p>after</p>"
    assert region.main_region(page) == f"<main>{filler}"


def test_a_lone_lt_is_text_of_the_densest_run():
    # No <main>, role=main or <article>: the densest run of text, whose "<" starts no tag.
    page = (
        "<div><a href=/>menu</a></div><div>"
        + "<p>If a < b the words of the article go on.</p>" * 10
        + "</div>"
    )
    found = region.main_region(page)
    assert found is not None and found.startswith("<div><p>If a < b the words")


@pytest.mark.parametrize(
    "page",
    [
        '<p>x</p><div role="main"><p>a < b and more words</p></div><p>after</p>',
        "<div>menu</div><p>" + "if a < b the words go on. " * 10 + "</p>",
        "<p>role=main in text</p><section ROLE='Main'>x</section>",
    ],
)
def test_the_steps_are_those_of_the_re_version_on_written_out_pages(page):
    # The property above on a few pages, measured (it runs with the tracer stopped).
    assert region._role_main(page) == reference._role_main(page)
    assert region._tokens(page, 0, len(page)) == reference._tokens(page, 0, len(page))
    assert region.main_region(page, stripped=True) == reference.main_region(page, stripped=True)
