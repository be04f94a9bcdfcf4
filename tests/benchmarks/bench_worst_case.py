"""Page text's worst case under its work budgets: ``python -m tests.benchmarks bench_worst_case``.

Issue 28: every bound that decides what a user gets counts work (the pre-scan's estimated
parse cost, the parser's and the renderer's steps), and the clock is only a far safety net
(``TIME_LIMIT``, 4 s).  The work budgets must keep every worst-case shape well under the old
time limit (0.4 s) on this machine.  For each shape at up to 2 MiB (the adversarial shapes
of ``bench_text`` at 2 MiB, the fuzzer's finds, a realistic page, the slowest markup that is
still parsed, and the over-budget pages of ``tests/text/overbudget.py`` through the new
main-content path), it prints:

* the milliseconds of this thread's CPU time ``extract`` takes (``mode="main"``, Lexbor;
  best of 3), their share of the old time limit, and the wall-clock milliseconds (which a
  busy machine inflates; CPU time much less so);
* the ratio against an in-process baseline on the same input: one linear pass that strips
  the tags with a regular expression and decodes the character references, run in the
  same process in alternating rounds (CPU time too), so that load on the machine hits
  both alike;
* the work each bound counted, as a share of its budget: the pre-scan's cost, the parse
  steps, the render steps (``-`` when the stage did not run);
* the reason and mode of the result.

``--html5lib`` measures with ``parser="html5lib"``.  Not collected by pytest.
"""

from __future__ import annotations

import html
import re
import sys
import time
from collections.abc import Callable

KIB = 1024
MIB = 1024 * KIB
OLD_TIME_LIMIT_MS = 400.0
_TAG_RE = re.compile(r"<[^<>]*>")


def baseline(text: str) -> str:
    """A linear reference pass: tags stripped by one regular expression, references decoded."""
    return html.unescape(_TAG_RE.sub(" ", text))


def _best(function: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def _deep_text_blocks() -> str:
    """The slowest input known that is still parsed: blocks 190 deep with 2,000 characters
    of text each (docs/text.rst)."""
    unit = "<div>" * 190 + "word " * 400 + "</div>" * 190
    return unit * (2 * MIB // len(unit))


def cases() -> dict[str, str]:
    from tests.benchmarks.bench_text import _repeat, realistic_page
    from tests.benchmarks.fuzz_text import REGRESSION_CASES
    from tests.text.overbudget import SHAPES

    many_attributes = "<span " + " ".join(f"data-a{index}=v" for index in range(300)) + ">x</span>"
    size = 2 * MIB
    shapes = {
        "realistic page": realistic_page(size),
        "40,000 nested <div>": "<div>" * 40_000 + "x" + "</div>" * 40_000,
        "repeated <a>": _repeat("<a>", size),
        "unclosed <b><i>": _repeat("<b><i>", size),
        "attribute bomb": "<div " + _repeat("a=b ", size - 6) + ">x",
        "blocks 200 deep, repeated": _repeat("<div>" * 200 + "x" + "</div>" * 200, size),
        "unclosed <p>": _repeat("<p>x", size),
        "nested <a>": _repeat('<a href="/n">x<div>', size),
        "hundreds of attributes": _repeat(many_attributes, size),
        "<b><div>x</b>": _repeat("<b><div>x</b>", size),
        "only <": "<" * size,
        "&lt; references": _repeat("&lt;", size),
        "comments <!---->": _repeat("<!---->", size),
        "empty <script></script>": _repeat("<script></script>", size),
        "blocks 190 deep, 2,000 chars each": _deep_text_blocks(),
    }
    for name, build in sorted(REGRESSION_CASES.items()):
        shapes[f"fuzzer: {name}"] = build().decode("utf-8", "replace")
    for name, build in SHAPES.items():
        shapes[f"over budget: {name}"] = build()
    return shapes


def measure(markup: str, parser: str) -> dict[str, object]:
    """One shape: times, work per stage, reason."""
    from django_webfetch.text.extract import extract
    from django_webfetch.text.render import Sink, parse, render
    from django_webfetch.text.scan import COST_BUDGET, scan

    try:
        from django_webfetch.text import MAX_PARSE_STEPS, MAX_RENDER_STEPS
        from django_webfetch.text.limits import Meter, OverBudget
    except ImportError:  # the code before issue 28 (for the "before" figures): no meters
        Meter = None  # type: ignore[assignment,misc]  # noqa: N806

    body = markup.encode("utf-8")
    ours: list[float] = []
    wall: list[float] = []
    base: list[float] = []
    result = None
    for _ in range(3):  # alternating rounds
        start, cpu = time.perf_counter(), time.thread_time()
        result = extract(body, "text/html", url="https://example.org/", parser=parser)
        ours.append(time.thread_time() - cpu)
        wall.append(time.perf_counter() - start)
        cpu = time.thread_time()
        baseline(markup)
        base.append(time.thread_time() - cpu)
    assert result is not None
    scanned = scan(markup)
    work = {"scan": scanned.cost / COST_BUDGET, "parse": None, "render": None}
    if scanned.markup is not None and Meter is not None:
        meter = Meter(10**9)
        try:
            root = parse(scanned.markup, parser=parser, meter=meter)
        except OverBudget:  # pragma: no cover - a finding
            root = None
        work["parse"] = meter.steps / MAX_PARSE_STEPS
        if root is not None:
            meter = Meter(10**9)
            render(root, Sink(), None, meter=meter)
            work["render"] = meter.steps / MAX_RENDER_STEPS
    return {
        "ms": min(ours) * 1000,
        "wall": min(wall) * 1000,
        "base": max(min(base), 1e-4) * 1000,
        "work": work,
        "reason": result.reason,
        "mode": result.mode,
    }


def _share(value: object) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(args: list[str] | None = None) -> None:
    args = sys.argv[1:] if args is None else args
    parser = "html5lib" if "--html5lib" in args else "lexbor"
    print(f"parser {parser}; old time limit {OLD_TIME_LIMIT_MS:.0f} ms; work: share of budget")
    print(
        f"{'input':<52} {'KiB':>5} {'cpu ms':>7} {'/0.4s':>6} {'wall':>7} {'base ms':>8}"
        f" {'ratio':>6} {'scan':>5} {'parse':>5} {'rend':>5}  result"
    )
    worst = 0.0
    for name, markup in cases().items():
        row = measure(markup, parser)
        ms = float(row["ms"])  # type: ignore[arg-type]
        base = float(row["base"])  # type: ignore[arg-type]
        work = row["work"]
        assert isinstance(work, dict)
        worst = max(worst, ms)
        print(
            f"{name[:52]:<52} {len(markup.encode()) // KIB:>5} {ms:7.1f}"
            f" {ms / OLD_TIME_LIMIT_MS:6.2f}"
            f" {float(row['wall']):7.1f}"  # type: ignore[arg-type]
            f" {base:8.1f} {ms / base:6.1f} {_share(work['scan']):>5} {_share(work['parse']):>5}"
            f" {_share(work['render']):>5}  {row['mode']}/{row['reason']}",
            flush=True,
        )
    print(f"slowest: {worst:.1f} ms of CPU = {worst / OLD_TIME_LIMIT_MS:.2f} of the old time limit")


if __name__ == "__main__":
    main()
