"""Issue 28: a page over a work budget keeps its main content.

A page whose chrome alone is over a bound of the pre-scan (a mega-menu larger than the
parser input, a huge footer or sidebar, thousands of nested divs, comment and script
floods, adoption-agency soup) is not laid out whole; with ``mode="main"`` its main content
is found by a linear pass (``django_webfetch/text/region.py``) and laid out on its own.
The shapes are a table (``tests/text/overbudget.py``) and a hypothesis strategy that
combines chrome before and after any wrapping of the article.
"""

from __future__ import annotations

import sys

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from django_webfetch.text import extract
from django_webfetch.text.region import WINDOW, main_region
from django_webfetch.text.scan import MAX_REDUCE_TOKENS, reduce_to_text, reducible, scan
from tests.text.overbudget import (
    HEADLINE,
    KEY_SENTENCES,
    KIB,
    MENU_WORD,
    SHAPES,
    article,
    chrome,
    page,
)


def over_budget(markup):
    """Whether the pre-scan stops the page at a bound (not parsed, or parsed in part)."""
    result = scan(markup)
    return result.markup is None or result.cut


def assert_keeps_the_article(markup):
    result = extract(markup.encode(), "text/html", url="https://example.org/", mode="main")
    assert result.mode == "main", (result.mode, result.reason, result.text[:300])
    for sentence in KEY_SENTENCES:
        assert sentence in result.text
    assert HEADLINE in result.text
    # The menu does not dominate: almost none of it is left.
    menu = result.text.count(MENU_WORD) * (len(MENU_WORD) + 6)
    assert menu <= 0.1 * len(result.text), result.text[:500]
    return result


@pytest.mark.unmeasured("pages over 256 KiB: the small region tests below cover these lines")
@pytest.mark.parametrize("name", list(SHAPES))
def test_an_over_budget_page_keeps_its_article(name):
    markup = SHAPES[name]()
    assert over_budget(markup)
    result = assert_keeps_the_article(markup)
    assert result.reason in (None, "main_from_scan")


@pytest.mark.unmeasured("a 330 KB page: the small region tests below cover these lines")
def test_the_held_out_mega_menu_before_main():
    # Issue 28's held-out failure: 6,000 links in <nav><ul> (about 330 KB), then the article.
    links = "".join(f'<li><a href="/category/{i}">{MENU_WORD} {i}</a></li>' for i in range(6000))
    markup = f"<title>T</title><nav><ul>{links}</ul></nav>{article('main')}"
    assert len(markup) > 256 * KIB and scan(markup).markup is None
    result = assert_keeps_the_article(markup)
    assert result.reason == "main_from_scan"
    # The whole page is still the whole page, in document order.
    whole = extract(markup.encode(), mode="page")
    assert whole.mode == "page" and whole.reason == "not_parsed"
    assert whole.text.count(MENU_WORD) > 1000


_CHROME = st.sampled_from(
    [None, "nav", "div-menu", "footer", "sidebar", "comments", "scripts", "formatting"]
)


@pytest.mark.unmeasured("pages up to 420 KiB: the small region tests below cover these lines")
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    # Each example is a page of up to 1 MiB: a failure is reported as drawn, not shrunk.
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    before=_CHROME,
    after=_CHROME,
    wrapper=st.sampled_from(["main", "article", "role", "div", "split"]),
    size=st.integers(300 * KIB, 420 * KIB),
)
def test_any_combination_of_chrome_keeps_the_article(before, after, wrapper, size):
    markup = page(before, after, wrapper, size)
    assert_keeps_the_article(markup)


def test_a_page_cut_at_the_depth_bound_before_its_article_keeps_the_article():
    # 40,000 characters of links, then nesting past the pre-scan's depth bound: the part
    # before the cut is parsed and holds no main content, so the article after it is found
    # by the linear pass (a small page: the pages above run unmeasured).
    links = "".join(f'<li><a href="/c/{i}">{MENU_WORD} {"word " * 18}</a></li>' for i in range(420))
    markup = f"<title>T</title><header><ul>{links}</ul></header>" + "<div>" * 210 + article()
    assert scan(markup).cut
    assert assert_keeps_the_article(markup).reason == "main_from_scan"


def test_a_short_main_is_main_content():
    # A user saw "whole page (no main content found)" on such a page.
    markup = (
        b"<title>Opening hours</title><header><nav><a href=/>Home</a> <a href=/a>About</a></nav>"
        b"</header><main><p>The library is open from nine to five on weekdays.</p>"
        b"<p>On Saturdays it closes at one o'clock.</p></main>"
        b"<footer><a href=/privacy>Privacy</a></footer>"
    )
    result = extract(markup)
    assert (result.mode, result.reason) == ("main", None)
    assert result.text == (
        "Opening hours\n\nThe library is open from nine to five on weekdays.\n\n"
        "On Saturdays it closes at one o'clock."
    )
    # One block, several <main> apart, or a main of links: the page says too little.
    for html in (
        b"<main><p>One line.</p></main><p>other</p>",
        b"<main><p>a</p><p>b</p></main><main><p>c</p><p>d</p></main>",
        b"<main><p><a href=/a>a link</a></p><p><a href=/b>another</a></p></main>",
    ):
        assert extract(html).reason == "main_not_found"
    # Nested <main> elements: the outermost.
    nested = extract(b"<nav>n</nav><main><p>a</p><main><p>b</p></main></main>")
    assert (nested.mode, nested.text) == ("main", "a\n\nb")


def test_the_region_is_the_main_element_role_main_or_the_articles():
    filler = "<p>" + "Words of the article. " * 20 + "</p>"
    assert main_region(f"<nav>x</nav><main>{filler}</main><footer>f</footer>") == (
        f"<main>{filler}"
    )
    role = f'<div>menu</div><div role="main"><div>{filler}</div></div><div>after</div>'
    assert main_region(role) == f'<div role="main"><div>{filler}</div>'
    # "role=main" in text is no element; an unclosed role=main element runs to the end.
    assert main_region(f"<p>a role=main</p><div role=main>{filler}") == f"<div role=main>{filler}"
    mentions = "<p>" + "the role=main attribute, " * 9 + "</p>"
    assert main_region(f"{mentions}<div role=main>{filler}") == f"{mentions}<div role=main>{filler}"
    assert main_region(f"<p>a role=main here</p><div role=main>{filler}") == (
        f"<div role=main>{filler}"
    )
    two = f"<article>{filler}</article><aside>ad</aside><article>{filler}</article>"
    assert main_region(f"<nav>x</nav>{two}<footer>f</footer>") == two.removesuffix("</article>")
    # An empty <main> (a script fills it) gives way to the densest text.
    loading = main_region(f"<main>Loading…</main><div>{filler}</div>")
    assert loading is not None and loading.startswith(f"<div>{filler[:30]}")
    # So does an <article> with too little text.
    assert main_region("<article>x</article>" + "<div>" * 100) is None
    # A <main> of links gives way to the densest text too.
    links = "".join(f"<a href=/{i}>link {i}</a>" for i in range(300))
    region = main_region(f"<main>{links}</main><div>{filler * 3}</div>")
    assert region is not None and "link 1 " not in region and "Words of the article" in region
    assert main_region("<div>" * 1000) is None
    assert main_region("") is None


def test_a_short_region_is_all_main_content():
    # The <main> of an over-budget page holds one paragraph (too little for the selection):
    # all of it is the main content.
    paragraph = "A single paragraph of the main content, " * 4
    body = ("<div>" * 300 + f"<main><p>{paragraph}</p></main>").encode()
    result = extract(body)
    assert (result.mode, result.reason) == ("main", "main_from_scan")
    assert result.text == paragraph.strip()


def test_the_end_of_a_role_main_element_is_searched_within_a_bound():
    from django_webfetch.text import region

    filler = "<p>" + "Words of the article. " * 20 + "</p>"
    deep = '<div role="main">' + "<div>" * (region.MAX_NESTING_TAGS + 5) + filler
    found = main_region(deep)
    assert found is not None and found.endswith(filler)


def test_the_region_search_reads_a_bounded_part_of_the_page():
    # The search and the reduction read up to MAX_REDUCE_TOKENS tags and references.
    flood = "<a>" * (MAX_REDUCE_TOKENS + 10) + "<p>after the flood</p>"
    assert reducible(flood) == "<a>" * MAX_REDUCE_TOKENS
    assert "after the flood" not in reduce_to_text(flood)[0]
    text = "&amp;" * 10 + "x" * (3 * WINDOW)
    assert reducible(text) == text


def _calls(function, *args):
    """Python-level function calls (and calls into C) made by ``function(*args)``: the work
    of the pass, counted, not timed."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        function(*args)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.unmeasured(
    "counts calls on pages up to 512 KiB: the small region tests cover these lines"
)
@pytest.mark.parametrize(
    "unit",
    [
        chrome("nav", 2 * KIB),
        chrome("sidebar", 2 * KIB),
        '<div role="main">x ' + "<div>" * 20,
        "role=main <a<a<a ",
        "<article><b><div>x</b>",
        "<!---->" * 10 + "<script>x</script>",
        "word " * 400,
    ],
)
def test_the_region_search_is_linear(unit):
    """The search is one pass: every step is a regular expression that repeats single
    character classes over a bounded piece (a window, a tag), a string search, or a loop
    over at most ``MAX_NESTING_TAGS`` matches or two windows of tokens.  So its Python-level
    work (counted here, not timed) grows at most linearly with the page."""
    small = unit * max(1, (64 * KIB) // len(unit))
    large = unit * max(1, (512 * KIB) // len(unit))
    assert _calls(main_region, large) <= 8 * _calls(main_region, small) + 5_000
