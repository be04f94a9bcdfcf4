"""Issue 8: a worst-case bound for every input, not only the shapes we know.

Each finding of the review is a regression test here; the inputs the fuzzer
(``python -m tests.benchmarks fuzz_text``) found slowest are kept below too.  These tests
assert what the bound is made of (every token charged, the pre-scan stopping at the budget,
the deadline's fallback bounded, fenced and marked), never a time.
"""

from __future__ import annotations

import re

import pytest

from django_webfetch.text import MAX_PARSER_INPUT, MAX_RESULT_BYTES, MAX_TEXT_CHARS, extract_text
from django_webfetch.text.extract import OUT_OF_TIME_NOTE
from django_webfetch.text.fence import fence, marker_like
from django_webfetch.text.limits import (
    CLOCK_EVERY,
    MAX_PARSE_STEPS,
    Deadline,
    DeadlinePassed,
    Meter,
    OverBudget,
)
from django_webfetch.text.render import Sink, parse, render
from django_webfetch.text.scan import (
    ATTRIBUTE_COST,
    COST_BUDGET,
    MAX_NAME_CHARS,
    REFERENCE_COST,
    TOKEN_COST,
    scan,
)
from tests.benchmarks.bench_text import realistic_page
from tests.benchmarks.fuzz_text import REGRESSION_CASES

KIB = 1024
MIB = 1024 * KIB
MARKER_RE = re.compile(r"<<<(BEGIN|END) UNTRUSTED EXTERNAL WEB CONTENT nonce=([0-9a-f]{32})>>>")
#: The most one token can add to the cost after the last check of the budget.
ONE_TOKEN = TOKEN_COST + REFERENCE_COST + 64 * ATTRIBUTE_COST + 200 * 8


def assert_fenced(text):
    """The text sits inside exactly one well-formed fence, under the byte bound."""
    result = fence(text, source_url="https://example.org/", status_line="HTTP 200")
    assert len(result.encode("utf-8")) < MAX_RESULT_BYTES
    markers = list(MARKER_RE.finditer(result))
    assert [m.group(1) for m in markers] == ["BEGIN", "END"]
    assert markers[0].group(2) == markers[1].group(2)
    inside = result[markers[0].end() : markers[1].start()]
    assert not marker_like(inside)
    return inside


def assert_bounded_scan(markup):
    result = scan(markup)
    if result.markup is not None:
        assert len(result.markup.encode("utf-8")) <= MAX_PARSER_INPUT
        assert result.cost <= COST_BUDGET + ONE_TOKEN or len(result.markup) < len(markup)
    return result


# -- finding 1: a body of only "<" ------------------------------------------------------------


@pytest.mark.parametrize("size", [256 * KIB, 2 * MIB])
def test_a_body_of_only_lt_is_charged_and_reduced(size):
    body = "<" * size
    result = assert_bounded_scan(body)
    # Each lone "<" is a character reference to html5lib: the budget runs out long before
    # the parser input bound, and the page is reduced to text.
    assert result.markup is None
    text = extract_text(body.encode(), "text/html")
    assert text == "<" * MAX_TEXT_CHARS
    assert_fenced(text)


def test_a_lone_lt_counts_against_the_parser_input_bound():
    result = scan("x" * (MAX_PARSER_INPUT - len("<!DOCTYPE html>") - 10) + "<" * 10)
    assert result.markup is not None
    assert len(result.markup.encode()) <= MAX_PARSER_INPUT
    assert result.markup.endswith("x&lt;&lt;")


# -- finding 2: character references ----------------------------------------------------------


@pytest.mark.parametrize("unit", ["&lt;", "&lt", "&#60;", "&#x3c", "&amp;", "& ", "&notin;"])
def test_character_references_are_charged_one_by_one(unit):
    body = unit * (255 * KIB // len(unit))
    result = assert_bounded_scan(body)
    # 65,000 references (37,000 of the longest) are over the budget.
    assert result.markup is None or result.cost <= COST_BUDGET
    few = scan(unit * 100)
    assert few.markup is not None and few.cost >= 100 * REFERENCE_COST
    assert_fenced(extract_text(body.encode(), "text/html"))


def test_nul_characters_are_charged_and_dropped():
    result = scan("a\0b" * 10)
    assert result.markup == "<!DOCTYPE html>" + "ab" * 10
    assert scan("\0" * 200_000).markup is None


# -- finding 3: the fence's marker check is linear ---------------------------------------------


@pytest.mark.parametrize("char", ["<", "«", "\u2993", "\u140a", "\U0001f800", "＜"])
def test_fence_of_20000_brackets(char):
    text = char * 20_000
    inside = assert_fenced(text).strip("\n").removesuffix("\n[text cut to fit the size bound]")
    assert inside == text[: len(inside)]
    assert len(inside) > 10_000


def test_fence_of_many_near_markers():
    for text in (
        "<END UNTRUSTED" * 1500,
        ("end" + "<" * 16) * 1000,
        "<<<END UNTRUSTED nonce=" + "a" * 19_000,
        "<" * 10_000 + "BEGIN UNTRUSTED" + ">" * 5_000,
    ):
        inside = assert_fenced(text)
        assert "<END UNTRUSTED" not in inside and "<BEGIN UNTRUSTED" not in inside


# -- finding 4: 2 MiB of tiny tokens stop at the budget ----------------------------------------


@pytest.mark.unmeasured(
    "2 MiB of tokens: the smaller pages of test_scan.py and test_worst_case.py cover these lines"
)
@pytest.mark.parametrize(
    "unit",
    [
        "<!>",
        "<?>",
        "</>",
        "</3>",
        "<!---->",
        "<a>",
        "</a>",
        "<br/>",
        "<x a b c d e f g>",
        "<!DOCTYPE>",
    ],
)
def test_every_kind_of_token_is_charged(unit):
    body = unit * (2 * MIB // len(unit))
    result = assert_bounded_scan(body)
    # The pre-scan stopped at the budget, long before the end of the page.
    assert result.markup is None
    assert_fenced(extract_text(body.encode(), "text/html"))


# -- the pre-scan findings of issue 10 --------------------------------------------------------


@pytest.mark.parametrize(
    "element",
    ["<svg><title/>", "<svg><script/>", "<svg><style/>", "<math><style/>", "<svg><title>t</title>"],
)
def test_self_closed_raw_text_in_foreign_content_does_not_swallow_the_page(element):
    result = scan(f"<p>before{element}</svg></math><p>after the icon")
    assert result.markup is not None
    assert "after the icon" in result.markup
    text = extract_text(f"<p>before{element}</svg></math><p>after the icon".encode())
    assert text.endswith("after the icon")


def test_raw_text_at_an_html_integration_point_is_still_raw():
    result = scan("<svg><foreignObject><script>x<p>y</script></foreignObject></svg><p>z")
    assert result.markup is not None
    assert "x<p>y" not in result.markup and result.markup.endswith("<p>z")


@pytest.mark.parametrize("attribute", ["title", "href", "data-x", "style"])
def test_one_huge_attribute_does_not_reduce_the_page(attribute):
    huge = f'<p>Intro.</p><div {attribute}="{"x" * (64 * KIB)}">Body text.</div><p>End.</p>'
    result = assert_bounded_scan(huge)
    assert result.markup == "<!DOCTYPE html><p>Intro.</p><div>Body text.</div><p>End.</p>"
    assert extract_text(huge.encode()) == "Intro.\n\nBody text.\n\nEnd."


def test_many_attributes_are_dropped_not_fatal():
    markup = '<a href="/x" ' + " ".join(f"data-a{i}=v" for i in range(300)) + ">link</a>"
    result = assert_bounded_scan(markup)
    assert result.markup == '<!DOCTYPE html><a href="/x">link</a>'
    assert result.cost >= 300 * ATTRIBUTE_COST


def test_an_attribute_bomb_stops_at_the_budget():
    result = assert_bounded_scan("<div " + "a=b " * (2 * MIB // 4) + ">x")
    assert result.markup is None


# -- the deadline backstop ---------------------------------------------------------------------


@pytest.mark.parametrize("parser", ["html5lib", "lexbor"])
@pytest.mark.parametrize("time_limit", [0.0, 0.002, 0.005])
def test_the_deadline_forces_the_text_fallback(time_limit, parser):
    body = realistic_page(256 * KIB).encode()
    text = extract_text(
        body, "text/html", url="https://example.org/", time_limit=time_limit, parser=parser
    )
    assert text.startswith(OUT_OF_TIME_NOTE + "\n\n")
    assert "City council approves the new harbour bridge budget" in text
    assert "<script" not in text and "window.__cfg" not in text
    inside = assert_fenced(text)
    assert OUT_OF_TIME_NOTE in inside


def test_a_page_within_the_time_limit_is_not_marked():
    body = realistic_page(50 * KIB).encode()
    text = extract_text(body, "text/html", url="https://example.org/", time_limit=60.0)
    assert not text.startswith(OUT_OF_TIME_NOTE)
    # The title line, or the headline that repeats it (main mode drops the duplicate).
    assert text.lstrip("# ").startswith("City council approves")


@pytest.mark.parametrize("parser", ["html5lib", "lexbor"])
def test_the_parse_checks_the_deadline_between_tokens(parser):
    markup = scan(realistic_page(50 * KIB)).markup
    with pytest.raises(DeadlinePassed):
        parse(markup, parser=parser, deadline=Deadline(0.0))
    parse(markup, parser=parser, deadline=Deadline(60.0))


def test_the_tree_builder_counts_every_element_and_checks_the_safety_net():
    # One token that makes many elements: the reconstruction of 60 formatting elements.
    markup = "<b><i><u><s><em>" * 12 + "<p>x</p>" * 2
    from django_webfetch.text import render as render_module

    token = {"name": "b", "namespace": None, "data": {}}
    parser = render_module._Parser(Meter(10**6, Deadline(0.0)))
    with pytest.raises(DeadlinePassed):
        for _ in range(CLOCK_EVERY + 1):
            parser.tree.createElement(token)
    parser = render_module._Parser(Meter(10))
    for _ in range(10):
        parser.tree.createElement(token)
    with pytest.raises(OverBudget):
        parser.tree.createElement(token)
    assert parse(markup, deadline=None) is not None


@pytest.mark.parametrize("parser", ["html5lib", "lexbor"])
def test_the_parse_counts_its_steps(parser):
    markup = scan(realistic_page(50 * KIB)).markup
    with pytest.raises(OverBudget):
        parse(markup, parser=parser, budget=100)
    meter = Meter(MAX_PARSE_STEPS)
    root = parse(markup, parser=parser, meter=meter)
    elements = sum(1 for _ in root.iter())
    assert elements <= meter.steps + 1  # the root <html> is ours with Lexbor
    # Far under the budget: the pre-scan's cost budget keeps every tree it lets through small.
    assert meter.steps < MAX_PARSE_STEPS // 10


def test_the_renderer_counts_its_steps():
    root = parse(scan(realistic_page(50 * KIB)).markup)
    with pytest.raises(OverBudget):
        render(root, Sink(), None, budget=100)
    sink = Sink()
    meter = Meter(10**6)
    render(root, sink, None, meter=meter)
    assert sink.getvalue() and meter.steps > 100


def test_the_renderer_checks_the_deadline():
    root = parse(scan(realistic_page(50 * KIB)).markup)
    with pytest.raises(DeadlinePassed):
        render(root, Sink(), None, deadline=Deadline(0.0))


# -- the worst inputs the fuzzer found ---------------------------------------------------------


@pytest.mark.unmeasured("pages up to 2 MiB: the other tests of text/ cover these lines")
@pytest.mark.parametrize("name", sorted(REGRESSION_CASES))
def test_fuzzer_finds_are_bounded_and_well_formed(name):
    body = REGRESSION_CASES[name]()
    assert_bounded_scan(body.decode("utf-8", "replace"))
    text = extract_text(body, "text/html", url="https://example.org/")
    assert_fenced(text)


def test_a_deadline_passing_inside_the_parse_abandons_the_tree():
    # Fewer tokens than the pre-scan reads between two looks at the clock, more than html5lib
    # reads between two: the pre-scan finishes, the parse is cut short.
    body = ("<h2>Heading</h2><ul><li>item</li></ul>" * 40).encode()
    text = extract_text(body, "text/html", time_limit=0.0, parser="html5lib")
    assert text.startswith(OUT_OF_TIME_NOTE + "\n\n")
    text = extract_text(body, "text/html", time_limit=0.0)
    assert text.startswith(OUT_OF_TIME_NOTE + "\n\n")
    assert "# Heading" not in text and "Heading\nitem" in text
    assert_fenced(text)
    assert extract_text(body, "text/html", time_limit=60.0).startswith("## Heading\n\n- item")


def test_references_in_kept_attribute_values_are_charged():
    link = '<a href="' + "&lt;" * 1000 + '">x</a>'
    assert scan(link).cost >= 1000 * REFERENCE_COST
    assert assert_bounded_scan(link * 60).markup is None


def test_lt_in_raw_text_is_charged():
    assert scan("<textarea>" + "<" * 1000 + "</textarea>").cost >= 1000 * 50
    assert scan("<xmp>" + "<a" * 50_000 + "</xmp>").markup == "<!DOCTYPE html>"


def test_long_tag_names_are_cut():
    result = assert_bounded_scan("<" + "a" * 100_000 + " href=/x>x</" + "A" * 100_000 + ">y")
    name = "a" * MAX_NAME_CHARS
    assert result.markup == f'<!DOCTYPE html><{name} href="/x">x</{name}>y'


@pytest.mark.parametrize("parser", ["html5lib", "lexbor"])
def test_a_deadline_passing_before_the_renderer_abandons_the_tree(parser):
    # Too few tokens and nodes for a look at the clock inside the pre-scan, the parse and
    # the renderer: the look after the main-content selection catches it.
    body = b"<h2>Heading</h2><p>Some text.</p>"
    text = extract_text(body, "text/html", time_limit=0.0, parser=parser)
    assert text == OUT_OF_TIME_NOTE + "\n\nHeading\nSome text."
    assert_fenced(text)
