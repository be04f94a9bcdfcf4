from __future__ import annotations

import sys
from pathlib import Path
from xml.etree.ElementTree import Comment, Element, SubElement

import pytest

from django_webfetch.net.errors import ExtractionError
from django_webfetch.text import MAX_DEPTH, MAX_TEXT_CHARS
from django_webfetch.text.render import Sink, render
from tests.text.plain import extract_text

PAGES = Path(__file__).parent / "pages"
URL = "https://news.example/2025/03/bridge"


def page(name):
    return extract_text(
        (PAGES / name).read_bytes(), "text/html; charset=utf-8", url=URL, time_limit=60.0
    )


def test_article():
    text = page("article.html")
    # The <title> ("... \u2013 The Example Times") repeats the headline: the headline leads.
    assert text.splitlines()[0] == "# Harbour bridge approved after decade-long debate"
    # The byline (class="byline") is not the article's text.
    assert "By Jane Doe" not in text
    assert (
        "The city council voted 31 to 4 on Tuesday to approve the harbour bridge,"
        " ending a debate that began in 2014." in text
    )
    assert "published on the council website (https://news.example/docs/decision.pdf)" in text
    assert "budget annex (https://example.gov/budget?year=2025&part=2)" in text
    assert "## What happens next" in text
    assert "1. an environmental review,\n2. a public tender, and\n3. the final sign-off" in text
    assert "Residents can comment until 30 April.\nComments may be sent by post." in text
    for chrome in ("World", "Search", "Skip to content", "Share", "Related", "Privacy", "gtag"):
        assert chrome not in text
    assert "\n\n\n" not in text


def test_docs_page_with_sidebar():
    text = page("docs.html")
    assert text.startswith("Configuration \u2014 ExampleLib 2.1 documentation\n\n# Configuration\n")
    assert "Installation" not in text and "\u00b6" not in text
    assert "## Options" in text
    assert "timeout\nSeconds to wait for a reply. Default: 5." in text
    assert "[example]\ntimeout = 10\n    retries = 3" in text
    assert "Unknown keys are ignored." in text


def test_tables():
    text = page("tables.html")
    assert "Region | Q1 | Q2\nNorth | 1,200 | 1,350\nSouth | 980 | 1,020\n" in text
    assert "East (new) | | 410" in text
    assert "Metric | Value\nEmployees | 212" in text
    assert "Paris | Lyon" in text


def test_cookie_banner_and_chrome():
    text = extract_text((PAGES / "chrome.html").read_bytes(), "text/html", url=URL)
    assert text.startswith("Recipe: lemon cake\n\n# Lemon cake\n")
    assert "A simple cake for caf\u00e9 afternoons." in text
    assert "- 200 g flour\n- 150 g sugar\n  - or 120 g honey\n- 2 lemons" in text
    assert "180 \u00b0C, and print the recipe." in text
    for chrome in (
        "cookies",
        "Accept",
        "newsletter",
        "Home",
        "Advertisement",
        "SVG",
        "icon",
        "Template",
        "Canvas",
        "Option text",
        "Footer",
        "javascript",
    ):
        assert chrome not in text


def test_links():
    html = (
        b'<a href=" /rel\tative?a=1 ">rel</a> <a href="data:text/html,x">data</a>'
        b' <a href="http://[::1">bad</a> <a href="">empty</a> <a href="/x"></a>'
        b' <a href="https://a.example/' + b"x" * 3000 + b'">long</a> <a>plain</a>'
    )
    assert extract_text(html, url="https://e.example/dir/page") == (
        "rel (https://e.example/relative?a=1) data bad empty long plain"
    )
    assert extract_text(b'<a href="rel">x</a>') == "x (rel)"


def test_headings_breaks_and_whitespace():
    html = b"<h3>  Title\n here </h3>text   with\n\n spaces<br><br><br>after<hr>rule"
    assert extract_text(html) == "### Title here\n\ntext with spaces\nafter\n\nrule"


def test_hidden_header_footer_and_forms():
    html = (
        b"<header>Site</header><form><p>Search</p></form>"
        b"<form><main><section><header>Kept header</header><p>Body</p>"
        b"<footer>Kept footer</footer></section></main></form>"
        b"<div hidden>h</div><div aria-hidden=' TRUE '>a</div><div aria-hidden=false>shown</div>"
        b"<math><mi>x</mi></math><!-- comment -->"
    )
    assert extract_text(html) == "Kept header\n\nBody\n\nKept footer\nshown\nx"


def test_preformatted_and_textarea():
    html = b"<pre>\na\r\n  b\rc</pre><textarea>x &amp; <b>y</textarea><xmp><i>raw</i></xmp>"
    assert extract_text(html) == "a\n  b\nc\n\nx & <b>y\n\n<i>raw</i>"


def test_plaintext_element():
    assert extract_text(b"<p>a<plaintext><b>b</b>") == "a\n\n<b>b</b>"


def test_control_characters_are_removed():
    assert extract_text(b"<p>a\x01b\x7fc\td\x1b</p>") == "abc d"


def test_text_plain():
    body = b"line\r\none\rtwo\x00\x1b[31m\tend\n\n\n\nlast"
    assert extract_text(body, "text/plain") == "line\none\ntwo[31m\tend\n\nlast"


def test_json_is_text():
    assert extract_text(b'{"a": "<b>"}', "application/json") == '{"a": "<b>"}'


def test_charset_parameter_of_the_media_type():
    assert extract_text("caf\u00e9".encode("latin-1"), "text/plain; charset=latin1") == "caf\u00e9"
    assert (
        extract_text("caf\u00e9".encode("latin-1"), "text/plain; q=1; charset='x'") == "caf\ufffd"
    )
    assert extract_text(b"caf\xe9", "text/plain; charset=latin1", charset="utf-8") == "caf\ufffd"


def test_unsupported_media_type():
    with pytest.raises(ExtractionError) as info:
        extract_text(b"\x89PNG", "image/png")
    assert info.value.code == "extraction_error"


def test_text_is_capped():
    text = extract_text(b"<p>" + b"word " * 50_000)
    assert len(text) == MAX_TEXT_CHARS
    text = extract_text(b"x" * 3_000_000, "text/plain")
    assert len(text) == MAX_TEXT_CHARS


def test_reduced_page_keeps_title_and_text():
    body = b"<title>T</title>" + b"<div>" * 5_000 + b"deep &amp; text" + b"</div>" * 5_000
    assert extract_text(body) == "T\n\ndeep & text"


def test_reduced_page_without_title():
    assert extract_text(b"<b>" * 300 + b"x") == "x"


def test_deep_tree_is_rendered_iteratively():
    # Under the pre-scan's bound, but rendered with a recursion limit far below its depth.
    body = b"<span>" * 150 + b"deep" + b"</span>" * 150
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100)
    try:
        assert extract_text(body) == "deep"
    finally:
        sys.setrecursionlimit(limit)


def test_renderer_stops_at_the_depth_bound_and_skips_comments():
    root = Element("html")
    element = SubElement(root, "body")
    element.append(Comment("comment"))
    for depth in range(MAX_DEPTH + 5):
        element = SubElement(element, "span")
        element.text = f"{depth + 1} "
    sink = Sink()
    render(root, sink, None)
    words = sink.getvalue().split()
    assert words[0] == "1" and words[-1] == str(MAX_DEPTH)
