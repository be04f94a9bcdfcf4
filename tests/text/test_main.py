"""Main-content mode: the quality set, the real-page findings, fallback and the two parsers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_webfetch.text import (
    MAX_PARSER_INPUT,
    MAX_TEXT_CHARS,
    MODES,
    Extraction,
)
from django_webfetch.text.hints import BOILERPLATE, CONSENT, CONTENT, MAIN, hint_weight, is_menu
from django_webfetch.text.main import MIN_MAIN_CHARS, consent_notices, select
from django_webfetch.text.render import parse
from django_webfetch.text.scan import scan
from tests.text.plain import extract, extract_text

HERE = Path(__file__).parent
PAGES = HERE / "pages"
CASES = json.loads((HERE / "quality" / "cases.json").read_text(encoding="utf-8"))
#: Hand-written pages in real templates' shapes (tests/text/quality/handwritten.py).
HANDWRITTEN = json.loads((HERE / "quality" / "handwritten.json").read_text(encoding="utf-8"))

ARTICLE = "".join(
    f"<p>Paragraph {n} of the article says something substantial about the harbour bridge,"
    f" its budget, its schedule and what the council decided on day {n}.</p>"
    for n in range(8)
)


def main(markup: str, url: str = "https://news.example/a") -> Extraction:
    return extract(markup.encode(), "text/html", url=url)


# -- the quality set ------------------------------------------------------------------------


def test_the_quality_set_is_large_and_varied():
    assert len(CASES) >= 25
    assert len({case["lang"] for case in CASES.values()}) >= 12
    kinds = {case["kind"] for case in CASES.values()}
    assert kinds >= {"news", "blog", "docs", "wiki", "shop", "government", "forum", "recipe"}
    for name in CASES:
        assert (PAGES / f"{name}.html").exists()


@pytest.mark.parametrize("name", sorted(CASES))
def test_quality_page(name):
    case = CASES[name]
    # A generous time limit: this test is about what is selected, not about the deadline
    # (a loaded machine under coverage must not turn it into the out-of-time fallback).
    result = extract(
        (PAGES / f"{name}.html").read_bytes(), "text/html", url=case["url"], time_limit=60.0
    )
    assert result.mode == "main"
    for snippet in case["present"]:
        assert snippet in result.text, snippet
    for snippet in case["absent"]:
        assert snippet not in result.text, snippet
    # The page title comes first, unless the headline says it (then the headline does).
    first = result.text.split("\n", 1)[0]
    title = scan_title(name)
    said = title.casefold()
    assert first == title or (
        first.startswith("# ")
        and (said.startswith(first[2:].casefold()) or said.endswith(first[2:].casefold()))
    )


@pytest.mark.parametrize("name", sorted(HANDWRITTEN))
def test_handwritten_page(name):
    case = HANDWRITTEN[name]
    result = extract(
        (PAGES / f"{name}.html").read_bytes(), "text/html", url=case["url"], time_limit=60.0
    )
    assert result.mode == "main"
    for snippet in case["present"]:
        assert snippet in result.text, snippet
    for snippet in case["absent"]:
        assert snippet not in result.text, snippet


def test_the_title_line_is_left_out_when_the_headline_says_it():
    body = f"<article><h1>Bridge  approved<a href=#h>\u00b6</a></h1>{ARTICLE}</article>"
    text = main(f"<title>Bridge approved | The Times</title>{body}").text
    assert text.startswith("# Bridge approved\n\nParagraph 0")
    text = main(f"<title>The Times: Bridge approved</title>{body}").text
    assert text.startswith("# Bridge approved\n\nParagraph 0")
    # A headline that says something else, or less: the title stays.
    for title in ("Other words", "News: Bridge approved by the council"):
        text = main(f"<title>{title}</title>{body}").text
        assert text.startswith(f"{title}\n\n# Bridge approved"), title
    # A pruned, hidden, empty or skipped h1 is not the headline; comments are passed over.
    for headline in (
        "<div class=share><h1>Bridge approved</h1></div>",
        "<h1 hidden>Bridge approved</h1>",
        "<h1> </h1>",
        "<template><h1>Bridge approved</h1></template>",
    ):
        text = main(
            f"<title>Bridge approved</title><article><!-- c -->{headline}{ARTICLE}</article>"
        ).text
        assert text.startswith("Bridge approved\n\n"), headline
    # The whole-page mode keeps the title.
    text = extract(f"<title>Bridge approved</title>{body}".encode(), "text/html", mode="page").text
    assert text.startswith("Bridge approved\n\n# Bridge approved")


def scan_title(name: str) -> str:
    from django_webfetch.text.charset import decode_body

    return scan(decode_body((PAGES / f"{name}.html").read_bytes(), None, html=True)).title


@pytest.mark.parametrize("name", sorted(CASES))
def test_whole_page_mode_keeps_the_content(name):
    case = CASES[name]
    result = extract(
        (PAGES / f"{name}.html").read_bytes(), "text/html", url=case["url"], mode="page"
    )
    assert result.mode == "page"
    # The article is in the whole page too (except after a mega-menu, it comes first).
    assert case["present"][-1] in result.text


# -- findings on real pages -----------------------------------------------------------------


def test_a_mega_menu_larger_than_the_parser_input_leaves_the_article():
    page = (PAGES / "megamenu_en.html").read_bytes()
    assert len(page) > MAX_PARSER_INPUT
    result = scan(page.decode())
    assert result.markup is not None and len(result.markup.encode()) < MAX_PARSER_INPUT // 4
    for mode in MODES:
        text = extract_text(page, "text/html", mode=mode)
        assert "Most people keep a mattress for eight to ten years" in text
        assert "so do not decide after the first night." in text
        assert "Category 3.4" not in text


def test_a_page_wrapped_in_one_form_keeps_its_content():
    page = (
        "<title>T</title><body><form id=aspnetForm><input type=hidden name=__VIEWSTATE>"
        f'<table><tr><td class="menu"><a href="/a">A</a></td><td>{ARTICLE}</td></tr></table>'
        "</form>"
    )
    for mode in MODES:
        text = extract_text(page.encode(), mode=mode)
        assert "Paragraph 0 of the article" in text and "Paragraph 7" in text
    # A small form (search, newsletter) is still dropped.
    text = extract_text(b"<p>x</p><form><p>Search the site</p></form>", mode="page")
    assert text == "x"


@pytest.mark.parametrize(
    "header",
    [
        '<header class="article-header"><h1>Headline</h1><p>The standfirst says why.</p></header>',
        "<header><h1>Headline</h1><p>The standfirst says why.</p></header>",
    ],
)
def test_a_standfirst_in_a_header_is_kept(header):
    page = (
        '<body><header class="site"><a href="/">Logo</a></header>'
        f'<div class="story">{header}<div class="body">{ARTICLE}</div></div>'
    )
    for mode in MODES:
        text = extract_text(page.encode(), mode=mode)
        assert "# Headline\n\nThe standfirst says why.\n\nParagraph 0" in text
        assert "Logo" not in text


@pytest.mark.parametrize(
    "banner",
    [
        '<div id="onetrust-banner-sdk"><p>We use cookies to improve your experience.</p></div>',
        '<div class="cc-window"><p>This site uses cookies. <a href="#">Accept</a></p></div>',
        '<div class="box-3"><p>Wir verwenden Cookies. Bitte akzeptieren Sie sie.</p></div>',
        "<section><p>By clicking Accept you consent to cookies and partners.</p></section>",
    ],
)
def test_cookie_banners_never_reach_the_text(banner):
    for position in ("before", "inside", "after"):
        page = f"<div class=article>{ARTICLE}</div>"
        if position == "before":
            page = banner + page
        elif position == "inside":
            page = f"<div class=article>{banner}{ARTICLE}</div>"
        else:
            page += banner
        for mode in MODES:
            text = extract_text(page.encode(), mode=mode).lower()
            assert "cookie" not in text, (position, mode)
            assert "paragraph 7" in text


def test_a_recipe_about_cookies_is_not_a_cookie_banner():
    page = (
        "<article><h1>Oat cookies</h1><p>Bake the cookies for 12 minutes, then let them"
        " cool. Everyone will accept a second one.</p>" + ARTICLE + "</article>"
    )
    assert "Bake the cookies for 12 minutes" in extract_text(page.encode())


# -- selection ------------------------------------------------------------------------------


def test_main_content_drops_the_chrome_and_navigation_urls():
    page = (
        '<div class="header"><ul class="menu"><li><a href="/w">World</a></li></ul></div>'
        '<div class="content"><h1>Headline</h1>'
        '<p>Read the <a href="/docs/report.pdf">report</a>, the <a href="/2024/x">earlier'
        ' story</a> and the <a href="https://gov.example/data">official data</a>.</p>'
        + ARTICLE
        + '<div class="share"><a href="https://social.example/s">Share</a></div>'
        '<ul><li><a href="/r1">Related one</a></li><li><a href="/r2">Related two</a></li></ul>'
        '<div id="comments"><p>First!</p></div></div>'
        '<div class="sidebar"><p>Most read</p></div><div class="footer">Imprint</div>'
    )
    result = main(page)
    assert result.mode == "main"
    assert result.text.startswith("# Headline\n\nRead the report (https://news.example/docs/")
    assert "the earlier story and the official data (https://gov.example/data)." in result.text
    for chrome in ("World", "Share", "Related one", "First!", "Most read", "Imprint"):
        assert chrome not in result.text, chrome


def test_forum_posts_are_all_kept():
    posts = "".join(
        f'<div class="post"><div class="postprofile">user{n}</div><div class="content"><p>'
        f"Post {n} explains in some detail, with examples, what happened after the update,"
        f" and what fixed it in the end.</p></div></div>"
        for n in range(4)
    )
    text = main(f'<div class="topic">{posts}</div><div class="footer">Board index</div>').text
    assert all(f"Post {n} explains" in text for n in range(4))
    assert "user1" not in text and "Board index" not in text


def test_role_main_and_article_hints():
    page = (
        f'<div class="teaser"><p>{"Teaser text, " * 30}</p></div>'
        f'<div role="main"><h1>Real</h1>{ARTICLE}</div>'
    )
    text = main(page).text
    assert text.startswith("# Real\n\nParagraph 0") and "Teaser" not in text


def test_too_little_main_content_falls_back_to_the_whole_page():
    result = main('<ul class="x"><li><a href="/a">A</a></li></ul><p>Short page.</p>')
    assert result.mode == "page"
    assert result.text == "- A\n\nShort page."
    assert extract(b"<p>only</p>", mode="page").mode == "page"
    assert extract(b"", mode="main").mode == "page"
    assert extract(b"text", "text/plain").mode == "text"
    # Pruning can leave too little too: a page that is all link lists.
    links = "".join(f'<li><a href="/{n}">Link number {n} of the list</a></li>' for n in range(40))
    result = main(f"<div><p>{'Intro words. ' * 250}</p><ul>{links}</ul></div>")
    assert result.mode == "main" and "Link number" not in result.text
    # Mostly link text is not an article.
    assert main(f"<div><p>{'Intro words. ' * 10}</p><ul>{links}</ul></div>").mode == "page"
    assert main(f'<div class="comments"><ul>{links}</ul></div>').mode == "page"


def test_select_on_trees_without_candidates():
    assert select(parse("<!DOCTYPE html>")) is not None or True
    assert select(parse("<!DOCTYPE html><ul><li>a</li></ul>")) is None
    # Text below the minimum.
    assert select(parse(f"<!DOCTYPE html><p>{'x' * (MIN_MAIN_CHARS - 10)}</p>")) is None


def test_unknown_mode_and_parser_are_errors():
    with pytest.raises(ValueError, match="mode"):
        extract(b"<p>x", mode="all")
    with pytest.raises(ValueError, match="parser"):
        extract(b"<p>x", parser="lxml")
    with pytest.raises(ValueError, match="parser"):
        parse("<p>x", parser="lxml")


@pytest.mark.parametrize("name", ["news_en_divs", "wiki_en", "gov_de_aspnet", "forum_en"])
def test_both_parsers_give_the_same_text(name):
    body = (PAGES / f"{name}.html").read_bytes()
    for mode in MODES:
        assert extract_text(body, mode=mode, parser="html5lib") == extract_text(body, mode=mode)


# -- hints ----------------------------------------------------------------------------------


def test_hint_weights():
    assert hint_weight("role", " Main ") == MAIN
    assert hint_weight("role", "note") == 0
    assert hint_weight("class", "") == 0
    assert hint_weight("id", "onetrust-banner-sdk") == CONSENT
    assert hint_weight("class", "cookieNotice") == CONSENT
    assert hint_weight("class", "main-menu") == BOILERPLATE
    assert hint_weight("class", "article-body") == CONTENT
    assert hint_weight("class", "article-comments") == BOILERPLATE
    assert hint_weight("class", "related") == BOILERPLATE
    assert hint_weight("class", "x" * 300 + " sidebar") == 0  # only the first 256 characters
    # review10: author boxes, bylines and the entry's meta row, help-centre votes are
    # boilerplate; "print" alone is a layout modifier, a print link is not.
    for value in (
        "ast-single-author-box",
        "about-the-author",
        "byline",
        "entry-meta",
        "post-meta-container",
        "article__meta",
        "article-votes",
        "was-helpful",
        "gem-c-feedback",
        "linenos",
        "print-link",
    ):
        assert hint_weight("class", value) == BOILERPLATE, value
    for value in (
        "govuk-grid-row gem-print-columns-none",
        "d-print-block",
        "entry-content",
        "wprm-recipe-meta-container",
        "story__teaser",
        "metadata",
    ):
        assert hint_weight("class", value) != BOILERPLATE, value


def test_menus():
    assert is_menu("main-menu") and is_menu("navbar navbar-dark")
    assert not is_menu("menu-wrapper") and not is_menu("article nav")
    assert is_menu("site-nav", strict=True)
    assert not is_menu("wy-grid-for-nav", strict=True) and not is_menu("results", strict=True)


# -- corners ----------------------------------------------------------------------------------


def test_select_on_hand_built_trees():
    from xml.etree.ElementTree import Comment, Element, SubElement

    assert select(Element("script")) is None
    assert consent_notices(Element("script")) == set()
    root = Element("html")
    body = SubElement(root, "body")
    body.append(Comment("a comment"))
    div = SubElement(body, "div", {"wf": "not a number"})
    for n in range(6):
        SubElement(div, "p").text = f"Paragraph {n}, long enough to count as a paragraph. " * 3
    selection = select(root)
    assert selection is not None and selection.roots == [div]


def test_alternative_candidates_without_a_common_ancestor_close_by():
    # Four equal sections, each nested deeper than the walk up looks.
    deep = "".join(
        "<div>" * 8 + f"<p>{'Section text, with commas, ' * 8}</p>" + "</div>" * 8 for _ in range(4)
    )
    result = main(f"<div>{deep}</div>")
    # No ancestor within reach holds them: too little text alone, so the whole page.
    assert result.mode == "page" and result.text.count("Section text") == 32


def test_semantic_ancestor_far_above_or_too_large():
    inner = "<div>" * 10 + ARTICLE + "</div>" * 10
    assert main(f"<article>{inner}</article>").mode == "main"
    links = "".join(f'<li><a href="/{n}">Teaser headline number {n}</a></li>' for n in range(300))
    result = main(f"<main><div>{ARTICLE}</div><ul>{links}</ul></main>")
    assert result.mode == "main" and "Teaser" not in result.text


def test_end_tag_in_foreign_content_that_closes_nothing():
    assert scan("<svg><g></x>y").markup == "<!DOCTYPE html><svg><g></x>y"


def test_duplicate_hint_attributes_count_once():
    assert scan('<div class="menu" class="x" id="a" id="b">').markup == (
        '<!DOCTYPE html><div wf="-50" hidden>'
    )


def test_parser_corners():
    root = parse("<!DOCTYPE html><p>a<!--c-->b</p>")
    assert [element.tag for element in root.iter()] == ["html", "head", "body", "p"]
    assert root.find(".//p").text == "ab"
    root = parse("<p></div><svg><title>t</title></svg><math><mi>x</mi></math>", parser="html5lib")
    text = extract_text(
        ARTICLE.encode() + b"<svg><text>icon</text></svg><math><mi>x</mi></math>",
        mode="page",
        parser="html5lib",
    )
    assert "icon" not in text and text.endswith("x")


def test_a_bad_page_url_shows_no_urls():
    page = f'<div>{ARTICLE}<p>See <a href="https://other.example/x">this</a>.</p></div>'
    assert extract_text(page.encode(), url="http://[bad").endswith("See this.")
    assert "(https://" not in extract_text(
        page.replace("https://other", "http://[bad").encode(), url="https://news.example/"
    )


# -- property: any markup, both modes, both parsers -----------------------------------------

_NAMES = st.sampled_from(
    [
        "a",
        "b",
        "div",
        "p",
        "span",
        "li",
        "ul",
        "table",
        "tr",
        "td",
        "svg",
        "nav",
        "main",
        "article",
        "header",
        "footer",
        "form",
        "h1",
        "section",
        "aside",
        "nobr",
        "select",
        "option",
        "template",
    ]
)
_ATTRIBUTES = st.sampled_from(
    ["", ' class="menu"', ' class="content"', ' id="cookie-banner"', ' role="main"', " hidden"]
)
_TOKENS = st.one_of(
    st.builds(lambda name, attribute: f"<{name}{attribute}>", _NAMES, _ATTRIBUTES),
    _NAMES.map(lambda name: f"</{name}>"),
    st.sampled_from(["word ", "More words, with commas, in a sentence. " * 4, "cookies consent "]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TOKENS, max_size=80).map("".join))
def test_any_markup_in_both_modes(markup):
    body = markup.encode()
    for mode in MODES:
        result = extract(body, mode=mode)
        assert result.mode in ("main", "page")
        assert len(result.text) <= MAX_TEXT_CHARS
        if mode == "page":
            assert result.mode == "page"
    # The lexbor tree is never much deeper than the pre-scan's model of html5lib's.
    scanned = scan(markup)
    if scanned.markup is not None:
        assert _depth(parse(scanned.markup)) <= scanned.depth + 3


def _depth(root) -> int:
    deepest = 0
    stack = [(root, 0)]
    while stack:
        element, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in element)
    return deepest - 1  # <html> is not counted


def test_permalinks_and_links_in_the_main_content():
    page = (
        f'<div><h2>Intro<a href="#intro">¶</a></h2>{ARTICLE}'
        '<p>See <a href="#notes">the notes</a>, <a href="//cdn.other.example/x">a mirror</a>,'
        ' <a href="data.csv?v=2">the data</a> and <a href="/about">us</a>.</p></div>'
    )
    text = main(page, "https://news.example/dir/a").text
    assert text.startswith("## Intro\n\nParagraph 0")
    assert text.endswith(
        "See the notes, a mirror (https://cdn.other.example/x),"
        " the data (https://news.example/dir/data.csv?v=2) and us."
    )


def test_a_layout_table_gives_its_content_cell():
    nav = "".join(f'<a href="/s{n}">Section number {n}</a><br>' for n in range(20))
    text = " ".join(f"Sentence {n} of the notice, with a comma, and more words." for n in range(12))
    page = f"<table><tr><td>{nav}</td><td>{text}<br>Second part of the notice.</td></tr></table>"
    for markup in (page, f"<article>{page}</article>"):
        result = main(markup)
        assert result.mode == "main"
        assert result.text.startswith("Sentence 0") and "Section number" not in result.text


def test_without_class_hints_teasers_and_comments_stay_out():
    """Generated class names (CSS-in-JS) say nothing; a wrapper whose one content-like word
    ("main") lifts it above the article body does not bring the teasers and comments."""
    paragraphs = "".join(
        f'<p class="css-83t{n}">Paragraph {n}: the committee heard evidence from twelve'
        " witnesses, including engineers, residents and the operator, over three days.</p>"
        for n in range(9)
    )
    menu = "".join(f'<div><a href="/s{n}">Section {n}</a></div>' for n in range(30))
    teasers = "".join(
        f'<div class="css-t{n}"><a href="/story/{n}"><h3>Teaser headline {n} about something'
        f" else</h3></a><p>A short description of teaser {n}, not part of the article.</p></div>"
        for n in range(6)
    )
    comments = "".join(
        f"<div><b>user{n}</b><p>Comment {n}: I disagree with the committee, this will cost"
        " us all a fortune and nobody asked.</p></div>"
        for n in range(5)
    )
    page = (
        f'<div class="css-1dbjc4n">{menu}</div><div class="css-main"><div class="css-h">'
        "<h1>Hearing ends after three days</h1><p>The committee will publish its findings"
        f' in the autumn.</p></div><div class="css-b">{paragraphs}</div>'
        f'<div class="css-9x">{teasers}</div><div class="css-c1">{comments}</div></div>'
    )
    text = main(page).text
    assert text.startswith(
        "# Hearing ends after three days\n\nThe committee will publish its findings in the"
        " autumn.\n\nParagraph 0"
    )
    assert text.endswith("over three days.")
    assert "Teaser" not in text and "Comment" not in text and "Section" not in text


def test_a_question_and_its_answers():
    """A Q&A page: the question and every answer, the headline above them (a link to the
    page itself), without comments, sidebars or navigation."""

    def post(kind, n, body):
        comments = "".join(
            f'<li class="comment"><span class="comment-copy">Short comment {n}.{i}.</span>'
            f' <a href="/u/{i}">user{i}</a></li>'
            for i in range(3)
        )
        return (
            f'<div class="{kind}"><div class="votecell">{n * 3}</div><div class="postcell">'
            f'<div class="s-prose js-post-body">{body}</div></div>'
            f'<div class="comments"><ul>{comments}</ul></div></div>'
        )

    question = post(
        "question",
        0,
        "<p>How do I reverse a list in Python without creating a copy? Slicing allocates a"
        " new list, and my list has ten million items.</p>",
    )
    answers = "".join(
        post(
            "answer",
            n,
            f"<p>Answer {n}: use list.reverse(), which reverses in place and returns None, so"
            " it does not allocate a new list.</p><p>It runs in linear time, swapping items"
            " from both ends toward the middle.</p>",
        )
        for n in range(1, 4)
    )
    hot = "".join(f'<li><a href="/q/{n}">Why is question {n} so hot?</a></li>' for n in range(20))
    page = (
        '<div id="content"><div id="question-header"><h1><a href="/q/1">Reverse a list in'
        f' place</a></h1></div><div id="mainbar">{question}<div id="answers"><h2>3 Answers'
        f'</h2>{answers}</div></div><div id="sidebar"><h4>Hot questions</h4><ul>{hot}</ul>'
        "</div></div>"
    )
    text = main(page, "https://stack.example/q/1").text
    assert text.startswith("# Reverse a list in place\n\n0\n\nHow do I reverse a list")
    assert all(f"Answer {n}: use list.reverse()" in text for n in (1, 2, 3))
    assert "comment" not in text and "Hot questions" not in text and "so hot" not in text


def test_a_consent_wall_is_shown_for_what_it_is():
    """A page that is mostly a consent notice (an interstitial before the site) is not
    emptied: the model learns that it hit a consent wall."""
    wall = (
        "<h1>Before you continue</h1><div class=box><p>We use cookies and data to deliver our"
        " services, and with your consent to personalise ads.</p><button>Accept all</button>"
        "</div><p>More options</p>"
    )
    two_notices = (
        "<h1>Before you continue</h1><div><p>We use cookies and data to deliver our services."
        "</p></div><div><p>With your consent we and our partners personalise ads.</p></div>"
    )
    for page in (wall, two_notices):
        for mode in MODES:
            result = extract(page.encode(), mode=mode)
            assert result.mode == "page"
            assert "We use cookies and data" in result.text


def test_form_controls_outside_a_form_are_not_content():
    # A shop's variant and quantity pickers sit in the product column, outside any <form>.
    pickers = (
        "<fieldset><legend>Colour</legend><input type=radio id=c1><label for=c1>Oatmeal</label>"
        "</fieldset><label for=q>Quantity</label><input id=q>"
    )
    text = main(f"<title>T</title><article>{pickers}{ARTICLE}</article>").text
    assert "Oatmeal" not in text and "Quantity" not in text and "Colour" not in text
    # A fieldset that holds the page's text (old ASP.NET layouts) stays.
    text = main(f"<title>T</title><article><fieldset>{ARTICLE}</fieldset>{ARTICLE}</article>").text
    assert text.count("Paragraph 3 of the article") == 2


@pytest.mark.parametrize(
    "inside",
    [
        "<form><label>Search</label><input name=q></form>",
        "<div class='cookie-banner'><p>We use cookies on this site.</p></div>",
        "<footer><a href='/a'>a</a> <a href='/b'>b</a> <a href='/c'>c</a></footer>",
        "<ul class='nav'><li><a href='/a'>Home</a></li><li><a href='/b'>News</a></li></ul>",
        "<div class='share'><a href='/s'>Share</a></div>",
    ],
)
def test_a_short_main_leaves_out_the_boilerplate_inside_it(inside):
    """Too little text for the scores: the ``<main>`` is the content; the boilerplate at its
    top (a form, a cookie notice, a footer, a list of links, share links) is neither text nor
    one of the two blocks it must hold (``text/main.py`` ``_landmark`` skips it whole)."""
    result = main(
        f"<html><body><main>{inside}<h1>Opening hours</h1><p>Monday to Friday.</p>"
        "<p>Closed on Sundays.</p></main></body></html>"
    )
    assert result.text == "# Opening hours\n\nMonday to Friday.\n\nClosed on Sundays."


def test_a_hint_without_words_weighs_nothing():
    # Separators only (a fresh value: hint_weight caches by value).
    assert hint_weight("class", " -_- __ ") == 0 and hint_weight("id", "--") == 0


def test_a_short_main_is_the_content_without_the_menu_and_sidebar_it_holds():
    """Too little text for the scores: the page's ``<main>`` is the main content, as it holds
    two blocks of text; the menu and the sidebar inside it are boilerplate, left out of the
    text and of the count of its blocks (``text/main.py`` ``_landmark``)."""
    result = main(
        "<html><body><main><nav class='menu'><ul><li><a href='/a'>Home</a></li>"
        "<li><a href='/b'>News</a></li></ul></nav><h1>Opening hours</h1>"
        "<p>Monday to Friday.</p><aside class='sidebar'><p>Advertisement here</p></aside>"
        "<p>Closed on Sundays.</p></main><footer>Footer text</footer></body></html>"
    )
    assert result.text == "# Opening hours\n\nMonday to Friday.\n\nClosed on Sundays."
