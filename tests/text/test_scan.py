from __future__ import annotations

import time

import html5lib
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_webfetch.text import MAX_DEPTH, MAX_PARSER_INPUT
from django_webfetch.text import scan as scan_module
from django_webfetch.text.scan import COST_BUDGET, reduce_to_text, scan


def html5lib_depth(markup):
    """Depth of html5lib's tree below <body> (what the pre-scan's stack models)."""
    root = html5lib.parse(markup, treebuilder="etree", namespaceHTMLElements=False)
    deepest = 0
    stack = [(root, -1)]  # html5lib returns <html>; <body> is at depth 0
    while stack:
        element, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in element if isinstance(child.tag, str))
    return deepest


@pytest.mark.parametrize(
    ("markup", "depth"),
    [
        ("<div><div><p>x</div></div>", 3),
        ("<p>a<p>b<p>c", 1),
        ("<b><div>x</b>" * 10, 11),
        ("<b><i>" * 10 + "x", 20),
        ("<p><b>x</p>" * 5 + "<p>y", 5),
        ("<a>1<a>2<a>3", 1),
        ('<a href="1"><div><a href="2">x', 2),
        ("<ul><li>a<li>b<ul><li>c<li>d</ul><li>e</ul>", 4),
        ("<dl><dt>a<dd>b<dt>c</dl>", 2),
        ("<h1>a<h2>b</h1>c", 1),
        ("<table><tr><td>a<td>b<tr><td>c</table>", 4),
        ("<table><td>a</td></table><tr><td>x", 4),
        ("<table><tbody><tr><th>a</th></tr></tbody><caption>c</caption></table>", 4),
        ("<table><colgroup><col></colgroup><tr><td><b>x</td><td>y</table>z", 5),
        ("<td>x<tr>y<tbody>z<caption>w", 0),
        ("<svg><g><path/><circle></circle></g><rect/></svg>", 3),
        ("<svg><g><p>x", 2),
        ("<math><mi>x</mi><foo>y</foo></math>", 2),
        ("<nobr>a<nobr>b", 1),
        ("<button>a<button>b", 1),
        ("<select><option>a<option>b<optgroup>c</select>", 2),
        ("<span><em>x</span></em>", 2),
        ("<div>a</p>b</br>c</span>d</body>e</html>f</tbody>", 2),
        ("<template><b>x</template><b>y", 2),
        ("<object><b>x</object>y", 2),
        ("<p><b><i><u><s>x<div>y</b>z", 5),
        ("<b><b><b><b>x<p>y", 5),
        ('<b id=1><p>x</p><p>y</p><b id="2"><p>z', 3),
        ("<br/><img><hr><input><div/>x", 1),
        ("<html><head><meta charset=x><title>t</title></head><body><p>x</body></html>", 1),
        ("<p>x<head><body><html><frameset>y<image>", 2),
        ("<p><b><i>x</p>y", 3),
        ("<b><p><i>x</p>y", 3),
        ("<a>x<table><tr><td><a>y", 6),
        ("<b>" + "<div>" * 9 + "x</b>", 10),
        ("<div><svg></div>x", 2),
        ("<svg/><p>x", 1),
        ("<table><tbody><td>x", 4),
        ("<svg><td>x</svg>y", 2),
        ("<div>" * 199 + "<br>", 200),
        ("<svg></br><a><a><a>", 4),
        ("<math></br></p><b>x", 2),
    ],
)
def test_depth_model_matches_html5lib(markup, depth):
    result = scan(markup)
    assert result.markup is not None
    assert result.depth == html5lib_depth(result.markup) == depth


@pytest.mark.parametrize(
    ("markup", "depth"),
    [
        # The adoption agency algorithm's inner loop, modelled to within one level.
        ("<a>" + "<div>" * 9 + "x<a>y", 11),
        ("<b><i><span><u><s><em><div>x</b>y", 6),
        ("<b><i><i><i><i><div>x</b>y", 5),
    ],
)
def test_depth_model_is_close_to_html5lib(markup, depth):
    result = scan(markup)
    assert result.markup is not None
    assert html5lib_depth(result.markup) == depth
    assert abs(result.depth - depth) <= 1


tags = st.sampled_from(
    [
        "a",
        "b",
        "i",
        "div",
        "p",
        "span",
        "li",
        "ul",
        "table",
        "tr",
        "td",
        "svg",
        "g",
        "nobr",
        "button",
        "h1",
        "dd",
        "template",
        "option",
        "select",
        "em",
        "br",
        "img",
    ]
)
token = st.one_of(
    tags.map(lambda name: f"<{name}>"),
    tags.map(lambda name: f"</{name}>"),
    st.just("x"),
)


@pytest.mark.unmeasured("a property: the example tests of this module cover these lines")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(token, max_size=60).map("".join))
def test_depth_model_never_underestimates_much(markup):
    result = scan(markup)
    assert result.markup is not None
    assert html5lib_depth(result.markup) <= result.depth + 2


def test_normalised_markup():
    result = scan(
        '<!-- c --><DIV Class="x" ID=y HIDDEN data-x="1">t&amp;<A HREF=\'/a"b\' onclick="x"'
        ' href="/dup">l</a></div><?pi x><!doctype html><![CDATA[x]]><br/><svg><path/></svg>'
        '<p aria-hidden="true">q<script>var a = "</p>";</script><style>p{}</style>'
        "<noscript><p>n</p></noscript><iframe><p>i</iframe>< 3 </> </3 x> <\u00e9"
    )
    # What is hidden reaches the parser as bare tags (see test_hidden_and_menus_are_pruned).
    assert result.markup == (
        "<!DOCTYPE html><div hidden><a></a></div><br/><svg><path/></svg>"
        '<p aria-hidden="true" hidden>'
    )
    result = scan(
        '<DIV Class="x" ID=y data-x="1">t&amp;<A HREF=\'/a"b\' onclick="x" href="/dup">l</a>'
        "</div>< 3 </> </3 x> <\u00e9"
    )
    assert result.markup == (
        '<!DOCTYPE html><div wk="c1683">t&amp;<a href="/a&quot;b">l</a></div>&lt; 3   &lt;\u00e9'
    )
    # The class list becomes a short key (class_key): elements of one kind share it.


def test_hidden_and_menus_are_pruned():
    """Content no mode shows reaches the parser as bare tags: the tree keeps its shape (the
    cost model stays right), and a mega-menu cannot fill the parser input."""
    result = scan(
        '<nav><ul><li><a href="/a">A</a><b>x</ul></nav><p>kept'
        '<ul class="main-menu"><li><a href="/b">B</a></li></ul>'
        '<div class="mega-menu"><a href="/c">C</a></div>'
        '<div class="grid-for-nav">wrapper kept</div>'
        '<ul class="results">list kept</ul>'
        "<div hidden>h<textarea>t</textarea><plaintext>p"
    )
    assert result.markup == (
        "<!DOCTYPE html><nav hidden><ul><li><a></a><b></ul></nav><p>kept"
        '<ul wf="-50" hidden><li><a></a></li></ul>'
        '<div wf="-50" hidden><a></a></div>'
        '<div wk="84896" wf="-50">wrapper kept</div>'
        '<ul wk="3e414">list kept</ul>'
        "<div hidden><textarea></textarea><plaintext>"
    )


@pytest.mark.parametrize(
    "markup",
    [
        "<p>x<div",
        "<p>x<div class='y",
        "<p>x<div a=",
        '<p>x<a href="',
        "<p>x<",
    ],
)
def test_a_tag_cut_off_by_the_end_is_dropped(markup):
    assert scan(markup).markup in ("<!DOCTYPE html><p>x", "<!DOCTYPE html><p>x&lt;")


def test_comments():
    result = scan("a<!-->b<!--->c<!-- x --!>d<!-- never closed")
    assert result.markup == "<!DOCTYPE html>abcd"


def test_raw_text_never_closed():
    assert scan("a<script>b").markup == "<!DOCTYPE html>a"
    assert scan("a<textarea>b").markup == "<!DOCTYPE html>a<textarea>b</textarea>"
    assert scan("a<title>b</title x=1>c<title>d</title").markup == "<!DOCTYPE html>ac"
    assert scan("<title>a &amp; b</title><title>c</title>").title == "a & b"
    assert scan("<script>x</script ").markup == "<!DOCTYPE html>"


def test_parser_input_is_capped():
    result = scan("<p>" + "word " * 60_000)
    assert result.markup is not None
    assert len(result.markup.encode()) <= MAX_PARSER_INPUT
    result = scan("<p>\u00e9" * 100_000)
    assert result.markup is None or len(result.markup.encode()) <= MAX_PARSER_INPUT
    result = scan("x" * (MAX_PARSER_INPUT - 30) + "<p>" * 100)
    assert result.markup is not None
    assert MAX_PARSER_INPUT - 3 < len(result.markup) <= MAX_PARSER_INPUT
    assert result.markup.endswith("<p>")
    result = scan("x" * 100 + "<p>" + "\u00e9" * 200_000)
    assert result.markup == "<!DOCTYPE html>" + "x" * 100 + "<p>"


@pytest.mark.parametrize(
    "markup",
    [
        "<div>" * (MAX_DEPTH + 1) + "x",
        "<div>" * MAX_DEPTH + "<br>",
        "<b><div>x</b>" * 250,
        "<b><i>" * 150,
        "<p>x" * 60_000,
        "<p>" * 30_000,
        "<table><tr><td>" * 70,
        "<svg>" + "<g>" * 300,
        "<a href=x><div>" * 300,
    ],
)
def test_over_the_bounds_is_reduced_to_text(markup):
    result = scan(markup)
    assert result.markup is None


def test_enough_text_before_deep_markup_is_parsed():
    prefix = "<p>" + "words " * 8_000
    result = scan(prefix + "<div>" * 300 + "deep")
    assert result.markup == "<!DOCTYPE html>" + prefix + "<div>" * MAX_DEPTH
    result = scan(prefix + "<div " + "a=1 " * 100 + ">")
    assert result.markup == "<!DOCTYPE html>" + prefix + "<div>"


def test_cost_budget_counts():
    result = scan("<p>x" * 10_000)
    assert result.markup is not None and 0 < result.cost < COST_BUDGET


def test_budget_trips_on_text_too(monkeypatch):
    monkeypatch.setattr(scan_module, "COST_BUDGET", 10)
    assert scan("<p>" + "x").markup is None
    assert scan("xxx").markup is None


def test_a_run_past_the_parser_input_is_charged_before_the_cut():
    # The run of text that would fill the parser input (a quarter of a MiB of character
    # references) is over the cost budget too: the page is reduced to text, not parsed in part.
    result = scan("&amp;" * 60_000)
    assert result.markup is None and result.cost > COST_BUDGET


@pytest.mark.parametrize(
    ("markup", "text", "title"),
    [
        ("<title>T &amp; U</title><p>a<b>b</b></p><div>c</div><br>d", "ab\nc\nd", "T & U"),
        ("a<script>x<y</script>b<style>s</style>c<!-- <p>x --><noscript>n</noscript>", "abc", ""),
        ("a<template><p>x<template>y</template>z</template>b", "ab", ""),
        ("a<template>never closed", "a", ""),
        ("a<textarea>t&lt;<b></textarea>b<xmp>1<2</xmp>", "a\nt<<b>\nb\n1<2", ""),
        ("a<plaintext><b>&amp;</b>", "a\n<b>&amp;</b>", ""),
        ("a<div class='x>y'>b", "a\ny'>b", ""),
        ("a<div", "a", ""),
        ("a <p> b < c </p", "a\nb < c", ""),
        ("a<script", "a", ""),
        ("x<title>t1</title><title>t2</title>", "x", "t1"),
        ("<DIV>a</DIV><Td>b<LI>c", "a\nb\nc", ""),
    ],
)
def test_reduce_to_text(markup, text, title):
    assert reduce_to_text(markup) == (text, title)


def test_reduce_to_text_is_linear_on_unclosed_tags():
    start = time.perf_counter()
    reduce_to_text("<div" * 100_000 + "<a" * 100_000 + ">" + "<b" * 100_000)
    assert time.perf_counter() - start < 1.0
