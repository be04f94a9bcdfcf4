"""Issue 21, precision: page furniture next to the article, and documents in many sections.

Each rule of ``django_webfetch/text/furniture.py`` with what it must catch and what it must
leave (article sentences that mention a price, a vote or a subscription), then whole pages
of the development set (``tests/text/devset``) in each layout and class style.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from django_webfetch.text import MAX_STORED_CHARS, extract
from django_webfetch.text.furniture import furniture_heading, furniture_line
from tests.text.devset.articles import ARTICLES, FURNITURE, TEASERS
from tests.text.devset.furniture import LAYOUTS, STYLES, page

DEVSET = Path(__file__).parent / "devset"
URL = "https://news.example/2026/03/story"


@pytest.mark.parametrize(
    "heading",
    [
        "Related stories",
        "Read more",
        "You may also like",
        "About the author",
        "3 comments",
        "12 Kommentare",
        "コメント3件",
        "3条评论",
        "Leave a reply",
        "Share this article",
        "Newsletter",
        "Tags:",
        "Key events",
        "Reviews (12)",
        "Das könnte Sie auch interessieren",
        "À lire aussi",
        "İlgili haberler",
        "أخبار ذات صلة",
    ],
)
def test_furniture_headings(heading):
    assert furniture_heading(heading)


@pytest.mark.parametrize(
    "heading",
    ["Comments", "Related work", "Author", "Options", "See also", "Reading the results", ""],
)
def test_headings_that_are_content(heading):
    assert not furniture_heading(heading)
    assert not furniture_heading("x" * 61)


@pytest.mark.parametrize(
    "line",
    [
        "Advertisement",
        "Anzeige",
        "Read more: Rail fares to rise by 4% in March",
        "Tags: transport, council, bridge",
        "Share this article Facebook X WhatsApp Email",
        "In stock · Free shipping on orders over € 50",
        "€ 49,90 € 59,90",
        "★★★★★ 4.8 from 212 votes · Rate this recipe · Print recipe",
        "Did you make this recipe? Leave a rating and tag us on Instagram.",
        "Get our morning newsletter in your inbox",
        "By Sam Rivera · 12 March 2026",
    ],
)
def test_furniture_lines(line):
    assert furniture_line(line)


@pytest.mark.parametrize(
    "line",
    [
        "The bridge will cost about £18 million, most of it from a regional fund.",
        "Budget: £1.2bn a year",
        "The council voted by 31 to 9 on Tuesday evening.",
        "By default, xsltproc looks for the catalog in 2024 places.",
        "Copy this line into your config file.",
        "Follow the signs to the museum.",
        "",
        "Share " * 60,
    ],
)
def test_lines_that_are_content(line):
    assert not furniture_line(line)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("style", STYLES)
def test_furniture_never_reaches_the_text(layout, style):
    article = ARTICLES[0]
    markup, gold = page(article, layout, style, "Example Times")
    result = extract(markup.encode(), url=URL, max_chars=MAX_STORED_CHARS)
    assert result.mode == "main"
    text = result.document.text
    for line in gold:
        assert line in text, line
    for furniture in (
        *FURNITURE["en"][:6],
        "Sam Rivera has covered",
        "reader1",
        "Rate this recipe",
        "Add to cart",
        "Free shipping",
        *TEASERS["en"][1:],
    ):
        if layout == "liveblog" and furniture in TEASERS["en"]:
            continue  # the key events list repeats the teasers; checked below
        assert furniture.format(n=3) not in text, furniture
    if layout == "liveblog":
        assert "Key events" not in text and "10:00" not in text


@pytest.mark.parametrize("number", range(len(ARTICLES)))
def test_furniture_in_every_language(number):
    article = ARTICLES[number]
    lang = article["lang"]
    markup, gold = page(article, "siblings", "generated", "Site")
    text = extract(markup.encode(), url=URL, max_chars=MAX_STORED_CHARS).document.text
    assert all(line in text for line in gold)
    related, _, author, comments, share, newsletter, *_ = FURNITURE[lang]
    for furniture in (related, author, comments.format(n=3), share, newsletter):
        assert furniture not in text, furniture


def _devset_page(name: str) -> tuple[str, str]:
    cases = json.loads((DEVSET / "real.json").read_text(encoding="utf-8"))
    html = gzip.decompress((DEVSET / "pages" / f"{name}.html.gz").read_bytes())
    return extract(
        html, url="https://docs.example/x", max_chars=MAX_STORED_CHARS
    ).document.text, cases[name]["gold"]


@pytest.mark.parametrize(
    ("name", "sections"),
    [
        # pydoc: every table.section (classes, functions, data), not only the biggest.
        ("real_pydoc_textwrap", ["class **TextWrapper**", "**dedent**(text)", "**__all__** = "]),
        # a manual page: every refsect1 under its h2.
        ("real_docbook_xsltproc", ["--maxdepth VALUE", "## SEE ALSO", "## Synopsis"]),
        # texinfo: every chapter, not only the longest.
        ("real_texinfo_time", ["Measuring Program Resource Use", "Setting the Output Format"]),
        # Node.js: code examples kept whole despite "hljs-comment" spans.
        ("real_node_path", ["// Returns: 'quux.html'", "The `node:path` module provides"]),
    ],
)
def test_documents_keep_all_their_sections(name, sections):
    text, _ = _devset_page(name)
    for section in sections:
        assert section in text, section


def test_a_short_chinese_article_is_main_content():
    article = ARTICLES[7]
    markup, gold = page(article, "siblings", "generated", "Site")
    result = extract(markup.encode(), url=URL)
    assert result.mode == "main" and all(line in result.text for line in gold)
