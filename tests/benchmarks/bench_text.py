"""Benchmark of django_webfetch.text: ``python -m tests.benchmarks.bench_text``.

For realistic pages (50 KiB, 256 KiB, 2 MiB) and each adversarial shape, prints the
milliseconds ``extract_text`` takes, which path it took (html5lib parse or reduction to text),
and the ratio against html5lib parsing the same input (capped at 256 KiB) directly.  The
html5lib baseline runs in a subprocess with a 15 s timeout.  Not collected by pytest.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Callable

KIB = 1024
BASELINE_TIMEOUT = 15.0

_TEXT = (
    "the of and to in a is that for it as was with be by on not he this are or his from at"
    " which but have an they you were her she there been one all we their river council"
    " budget library museum report season engineers bridge schedule weather station"
    " harbour researchers announced quarterly volunteers festival proposal"
)
_WORDS = _TEXT.split(" ")


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(_WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def _paragraph(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(3, 6)):
        sentence = _sentence(rng, rng.randint(8, 22))
        roll = rng.random()
        if roll < 0.25:
            sentence += (
                f' See <a href="/news/{rng.randint(1, 9999)}" class="inline-link"'
                f' data-track="body-link">{_sentence(rng, 3)[:-1]}</a>.'
            )
        elif roll < 0.4:
            sentence = f"<strong>{sentence}</strong>"
        elif roll < 0.5:
            sentence = f"<em>{sentence}</em>"
        parts.append(sentence)
    return f'<p class="article__paragraph">{" ".join(parts)}</p>\n'


_ICON = (
    '<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path d="M12 2L2 7l10 5 10-5-10-5z'
    ' M2 17l10 5 10-5M2 12l10 5 10-5" fill="none" stroke="currentColor"/></svg>'
)


def _chrome_head(rng: random.Random) -> str:
    script = "".join(
        f"window.__cfg{index} = {{id: {index}, label: 'x<y', items: [1, 2, 3]}};\n"
        for index in range(80)
    )
    style = "".join(
        f".c{index} {{ margin: {index}px; color: #{index:06x}; }}\n" for index in range(150)
    )
    nav = "".join(
        f'<li class="nav__item"><a class="nav__link" href="/section/{index}"'
        f' data-analytics="nav-{index}">{_ICON}Section {index}</a></li>'
        for index in range(25)
    )
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        "<title>City council approves the new harbour bridge budget | The Example Times</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="stylesheet" href="/static/site.css">'
        f"<style>{style}</style><script>{script}</script>"
        '<script type="application/ld+json">{"@type": "NewsArticle", "headline": "x"}</script>'
        "</head><body class=article-page>"
        '<div class="cookie-banner" role="dialog" aria-hidden="true"><p>We use cookies.</p>'
        "<button>Accept all</button></div>"
        f'<header class="site-header"><nav class="main-nav"><ul>{nav}</ul></nav></header>'
        '<main id="content"><article class="article">'
        "<header><h1>City council approves the new harbour bridge budget</h1>"
        f'<p class="byline">By A. Reporter, {rng.randint(1, 28)} March</p></header>\n'
    )


def _chrome_tail(rng: random.Random) -> str:
    related = "".join(
        f'<li><a href="/related/{index}">{_sentence(rng, 6)}</a></li>' for index in range(15)
    )
    footer = "".join(
        f'<a class="footer__link" href="/about/{index}">About {index}</a> ' for index in range(40)
    )
    return (
        "</article></main>"
        f'<aside class="related"><h2>Related</h2><ul>{related}</ul></aside>'
        f'<footer class="site-footer"><nav>{footer}</nav><p>&copy; Example Times</p></footer>'
        "<script>document.querySelectorAll('a').forEach(function (a) { a.x = 1; });</script>"
        "</body></html>\n"
    )


def realistic_page(size: int, seed: int = 1) -> str:
    """A news article page with chrome, scripts, styles, icons, figures and a table."""
    rng = random.Random(seed)
    parts = [_chrome_head(rng)]
    tail = _chrome_tail(rng)
    total = len(parts[0]) + len(tail)
    section = 0
    while total < size:
        section += 1
        block = [f'<h2 id="s{section}">{_sentence(rng, 5)[:-1]}</h2>\n']
        block.extend(_paragraph(rng) for _ in range(rng.randint(2, 5)))
        roll = rng.random()
        if roll < 0.3:
            block.append(
                f'<figure class="figure"><img src="/img/{section}.jpg" alt="{_sentence(rng, 4)}"'
                f' srcset="/img/{section}-2x.jpg 2x" loading="lazy" width="800" height="450">'
                f"<figcaption>{_sentence(rng, 9)}</figcaption></figure>\n"
            )
        elif roll < 0.5:
            items = "".join(f"<li>{_sentence(rng, 7)}</li>" for _ in range(rng.randint(3, 6)))
            block.append(f'<ul class="list">{items}</ul>\n')
        elif roll < 0.65:
            rows = "".join(
                f"<tr><td>{_sentence(rng, 2)}</td><td>{rng.randint(1, 999)}</td>"
                f"<td>{rng.randint(1, 99)}%</td></tr>"
                for _ in range(rng.randint(4, 10))
            )
            block.append(
                f'<table class="data"><thead><tr><th>Item</th><th>Count</th><th>Share</th>'
                f"</tr></thead><tbody>{rows}</tbody></table>\n"
            )
        elif roll < 0.75:
            block.append(f"<blockquote><p>{_sentence(rng, 15)}</p></blockquote>\n")
        elif roll < 0.85:
            block.append(
                f'<div class="ad-slot" data-slot="{section}"><script>loadAd({section});</script>'
                f"<!-- advert {section} --></div>\n"
            )
        piece = "".join(block)
        parts.append(piece)
        total += len(piece)
    parts.append(tail)
    return "".join(parts)


def _repeat(unit: str, size: int) -> str:
    return unit * (size // len(unit))


def adversarial_shapes() -> dict[str, str]:
    size = 256 * KIB
    many_attributes = "<span " + " ".join(f"data-a{index}=v" for index in range(300)) + ">x</span>"
    return {
        "40,000 nested <div>": "<div>" * 40_000 + "x" + "</div>" * 40_000,
        "repeated <a>": _repeat("<a>", size),
        "unclosed <b><i>": _repeat("<b><i>", size),
        "attribute bomb": "<div " + _repeat("a=b ", size - 6) + ">x",
        "blocks 200 deep, repeated": _repeat("<div>" * 200 + "x" + "</div>" * 200, size),
        "unclosed <p>": _repeat("<p>x", size),
        "nested <a>": _repeat('<a href="/n">x<div>', size),
        "hundreds of attributes": _repeat(many_attributes, size),
        "<b><div>x</b>": _repeat("<b><div>x</b>", size),
    }


def _time(function: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best * 1000


_BASELINE = """
import sys, time, html5lib
data = sys.stdin.read()
start = time.perf_counter()
html5lib.parse(data, treebuilder="etree", namespaceHTMLElements=False)
print((time.perf_counter() - start) * 1000)
"""


def html5lib_baseline(markup: str) -> float | None:
    """Milliseconds html5lib takes on ``markup`` cut to 256 KiB; None past the timeout."""
    from django_webfetch.text import MAX_PARSER_INPUT

    capped = markup.encode("utf-8")[:MAX_PARSER_INPUT].decode("utf-8", "ignore")
    try:
        result = subprocess.run(
            [sys.executable, "-c", _BASELINE],
            input=capped,
            capture_output=True,
            text=True,
            timeout=BASELINE_TIMEOUT,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return None
    return float(result.stdout)


def main() -> None:
    from django_webfetch.text import extract_text
    from django_webfetch.text.charset import decode_body
    from django_webfetch.text.scan import scan

    cases: list[tuple[str, str, float | None]] = [
        (f"realistic {size // KIB} KiB", realistic_page(size), 100.0 if size == 256 * KIB else None)
        for size in (50 * KIB, 256 * KIB, 2048 * KIB)
    ]
    for name, markup in adversarial_shapes().items():
        cases.append(
            (f"{name} ({len(markup) // KIB} KiB)", markup, 50.0 if "40,000" in name else 500.0)
        )
    print(f"{'input':<38} {'path':<8} {'text ms':>8} {'html5lib ms':>12} {'ratio':>7}  target")
    failures = 0
    for name, markup, target in cases:
        body = markup.encode("utf-8")
        elapsed = _time(
            lambda body=body: extract_text(body, "text/html", url="https://example.org/")
        )
        path = "parse" if scan(decode_body(body, None, html=True)).markup is not None else "reduce"
        baseline = html5lib_baseline(markup)
        shown = "> 15 s" if baseline is None else f"{baseline:.0f}"
        ratio = "-" if baseline is None else f"{elapsed / baseline:.2f}"
        verdict = ""
        if target is not None:
            ok = elapsed <= target
            failures += not ok
            verdict = f"<= {target:.0f} ms {'ok' if ok else 'MISSED'}"
        print(f"{name:<38} {path:<8} {elapsed:8.1f} {shown:>12} {ratio:>7}  {verdict}", flush=True)
    if failures:
        print(f"{failures} target(s) missed")


if __name__ == "__main__":
    main()
