"""Issue 28: the same page gives the same text on any machine, busy or not.

Every bound that decides what a user gets counts work (the pre-scan's estimated parse cost,
the parser input, the depth, the parser's and the renderer's steps, the tokens the
reduction reads), so loading the CPU changes nothing; the clock is only a far safety net
(``TIME_LIMIT``), which a healthy machine never reaches.  The load here is real: busy-loop
child processes, never a slowed clock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from django_webfetch.text import TIME_LIMIT, extract
from django_webfetch.text.extract import OUT_OF_TIME_NOTE
from tests.benchmarks.bench_text import realistic_page
from tests.benchmarks.fuzz_text import REGRESSION_CASES
from tests.text.overbudget import SHAPES

KIB = 1024
MIB = 1024 * KIB
PAGES = Path(__file__).parent / "pages"
#: Busy children: one per core (each keeps a core busy all along), bounded.
LOAD_PROCESSES = min(8, os.cpu_count() or 1)
#: A child stops by itself after this many seconds if the test process dies (it is
#: terminated at the end of the test): far beyond any run of the test, even on a machine
#: loaded fifteen times over its cores.
SPIN_SECONDS = 900.0


def large_pages() -> dict[str, bytes]:
    pages = {
        "realistic 2 MiB": realistic_page(2 * MIB).encode(),
        "mega-menu (tests/text/pages)": (PAGES / "megamenu_en.html").read_bytes(),
        "repeated <a>, 2 MiB": b"<a>" * (2 * MIB // 3),
        "<b><div>x</b>, 1 MiB": b"<b><div>x</b>" * (MIB // 13),
        "blocks 190 deep with text": (b"<div>" * 190 + b"word " * 400 + b"</div>" * 190) * 20,
    }
    for name in ("mega-menu in nav before <main>", "huge sidebar before a plain div"):
        pages[name] = SHAPES[name]().encode()
    for name in sorted(REGRESSION_CASES)[:2]:
        pages[name] = REGRESSION_CASES[name]()
    return pages


def extract_all(pages: dict[str, bytes]) -> dict[str, tuple[object, ...]]:
    results = {}
    for name, body in pages.items():
        for mode in ("main", "page"):
            result = extract(body, "text/html", url="https://example.org/", mode=mode)
            results[f"{name} ({mode})"] = (result.text, result.mode, result.reason, result.document)
    return results


@pytest.fixture(scope="session")
def quiet() -> tuple[dict[str, bytes], dict[str, tuple[object, ...]]]:
    """The large pages and their texts on a quiet machine, extracted once for both tests
    (session scope: the long test runs first, away from its module, tests/conftest.py)."""
    pages = large_pages()
    return pages, extract_all(pages)


@pytest.mark.unmeasured("large pages: the other tests of text/ cover these lines")
def test_the_same_input_twice_gives_identical_output(quiet):
    pages, first = quiet
    assert extract_all(pages) == first
    for text, _, reason, _ in first.values():
        assert reason != "out_of_time" and not text.startswith(OUT_OF_TIME_NOTE)


#: A busy loop (a child process of its own, a bare interpreter): real load on a core.  It
#: says it runs (one byte on its stdout) before it spins.
SPIN = (
    "import sys, time\n"
    "sys.stdout.write('x'); sys.stdout.flush()\n"
    "end = time.monotonic() + float(sys.argv[1])\n"
    "while time.monotonic() < end:\n"
    "    pass\n"
)


@pytest.mark.long
@pytest.mark.unmeasured("large pages: the other tests of text/ cover these lines")
def test_large_pages_give_the_same_text_under_cpu_load(quiet):
    pages, texts = quiet
    children = []
    try:
        for _ in range(LOAD_PROCESSES):
            children.append(
                subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", SPIN, str(SPIN_SECONDS)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                )
            )
        for child in children:  # every child is spinning
            assert child.stdout is not None and child.stdout.read(1) == b"x"
        loaded = extract_all(pages)
        # The load was there all along.
        assert all(child.poll() is None for child in children)
    finally:
        for child in children:
            child.terminate()
        for child in children:
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover - terminate is enough
                child.kill()
                child.wait(5)
            if child.stdout is not None:
                child.stdout.close()
    assert loaded == texts
    # The safety net, far away, did not decide anything.
    for text, _, reason, _ in loaded.values():
        assert reason != "out_of_time" and not text.startswith(OUT_OF_TIME_NOTE)


@pytest.mark.parametrize("mode", ["main", "page"])
def test_the_safety_net_says_so(mode):
    # The far wall-clock safety net (TIME_LIMIT seconds) is the only clock; when it fires
    # (here at once) the result says so with its own reason, which callers record.
    assert TIME_LIMIT == 4.0
    body = realistic_page(64 * KIB).encode()
    result = extract(body, "text/html", mode=mode, time_limit=0.0)
    assert (result.mode, result.reason) == ("page", "out_of_time")
    assert result.text.startswith(OUT_OF_TIME_NOTE)
    assert extract(body, "text/html", mode=mode).reason != "out_of_time"


@pytest.mark.unmeasured(
    "64 KiB pages, each parsed four times: the other tests of text/ cover these lines"
)
@pytest.mark.parametrize("constant", ["MAX_PARSE_STEPS", "MAX_RENDER_STEPS"])
@pytest.mark.parametrize("parser", ["lexbor", "html5lib"])
def test_a_page_over_the_parse_or_render_budget_takes_the_over_budget_path(
    monkeypatch, constant, parser
):
    # No page the pre-scan lets through comes near these budgets (the cost model keeps it far
    # below, bench_worst_case measures it); lowered here, they decide as they would.
    from django_webfetch.text import render as render_module

    body = realistic_page(64 * KIB).encode()
    normal = extract(body, parser=parser)
    assert (normal.mode, normal.reason) == ("main", None)
    monkeypatch.setattr(render_module, constant, 300)
    results = [extract(body, parser=parser) for _ in range(2)]
    assert results[0] == results[1]
    result = results[0]
    # The main content, without layout (it is over the lowered budget too), no navigation.
    assert (result.mode, result.reason) == ("main", "main_from_scan")
    assert "City council approves the new harbour bridge budget" in result.text
    assert "Section 3" not in result.text and "About 3" not in result.text
    whole = extract(body, parser=parser, mode="page")
    assert (whole.mode, whole.reason) == ("page", "not_parsed")
    assert "Section 3" in whole.text


@pytest.mark.parametrize("constant", ["MAX_PARSE_STEPS", "MAX_RENDER_STEPS"])
@pytest.mark.parametrize("parser", ["lexbor", "html5lib"])
def test_a_small_page_over_a_lowered_budget_keeps_its_main_content(monkeypatch, constant, parser):
    # The test above on a 5 KB page (that one runs unmeasured): over the lowered budget the
    # page is not laid out whole; its main content is laid out alone, or reduced to its text
    # when it is over the budget too; the whole page is its text without layout.
    from django_webfetch.text import render as render_module
    from tests.text.overbudget import HEADLINE, paragraphs

    links = " ".join(f'<a href="/{i}">Section {i}</a>' for i in range(20))
    body = (
        f"<title>T</title><nav>{links}</nav><main><h1>{HEADLINE}</h1>{paragraphs() * 3}</main>"
        f"<footer>{links}</footer>"
    ).encode()
    assert extract(body, parser=parser).reason is None
    monkeypatch.setattr(render_module, constant, 20)
    result = extract(body, parser=parser)
    assert (result.mode, result.reason) == ("main", "main_from_scan")
    assert HEADLINE in result.text and "Section 3" not in result.text
    whole = extract(body, parser=parser, mode="page")
    assert (whole.mode, whole.reason) == ("page", "not_parsed")
    assert "Section 3" in whole.text


def test_a_page_too_deep_to_parse_is_its_text_in_page_mode():
    result = extract(("<div>" * 300 + "<p>A paragraph of text.</p>").encode(), mode="page")
    assert (result.mode, result.reason, result.text) == (
        "page",
        "not_parsed",
        "A paragraph of text.",
    )


@pytest.mark.parametrize("paragraphs", [100, 300])
def test_the_safety_net_in_the_over_budget_path(paragraphs):
    # Too deep: the pre-scan stops within its first 512 tokens, before it looks at the clock.
    # The main content's own pre-scan (300 paragraphs) or its parse (100) sees the safety net.
    body = (
        "<div>" * 300 + "<main>" + "<p>A paragraph of text.</p>" * paragraphs + "</main>"
    ).encode()
    assert extract(body).reason == "main_from_scan"
    result = extract(body, time_limit=0.0)
    assert (result.mode, result.reason) == ("page", "out_of_time")
    assert result.text.startswith(OUT_OF_TIME_NOTE)


@pytest.mark.unmeasured("a large page: test_markdown.py cuts a small page of links by bisection")
def test_a_page_of_links_is_cut_in_parts_of_a_useful_size():
    # Found by bench_worst_case: when the link definitions of a part took more room than its
    # text, a part was cut to one character, and each of the next 20,000 parts rendered the
    # same 20,000 characters again (28 s of CPU for a 40 KB menu column).
    from tests.text.overbudget import table_layout

    body = table_layout(120 * KIB).encode()
    document = extract(body, mode="page", url="https://example.org/", max_chars=100_000).document
    bounds = document.boundaries()
    assert len(document.text) > 50_000 and len(document.links) > 1000
    assert len(bounds) <= len(document.text) // 2_000
    for number, (start, end) in enumerate(bounds, 1):
        part = document.part(number)
        assert part is not None and len(part.text) <= 20_000
        assert end - start >= 2_000 or number == len(bounds)
