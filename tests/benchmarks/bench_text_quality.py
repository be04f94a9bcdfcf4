"""Main-content quality and speed: ``python -m tests.benchmarks.bench_text_quality``.

By default on the development set (``tests/text/devset/``, issue 21: real documentation
pages shipped in Debian and PyPI packages, and hand-written articles with page furniture in
14 languages; see docs/text.rst), scored as words with link targets not counted, on the
whole text a fetch keeps (``max_chars=MAX_STORED_CHARS``, Markdown, the tools' format).
``--set all|core|handwritten`` runs the older quality set instead.

For every page of the quality set (``tests/text/quality/cases.json`` and
``handwritten.json``, pages in ``tests/text/pages/``) prints token-level precision, recall
and F1 against the page's gold main text, and the milliseconds per page, for
``extract_text`` (main-content mode, and the whole-page mode for reference) and, when it is
installed (``pip install --group bench``), trafilatura, side by side in the same run.
Then the mean P/R/F1, the median and worst
milliseconds, the pages where a must-have snippet is missing or a must-not snippet
(cookie banners, menus, related links...) leaks, and the speed ratios.

Tokens: words (``\\w+``), and single characters in scripts written without spaces (CJK), so
Markdown markers and punctuation do not count; the URLs a link shows do.  Options:
``--repeat N`` (timing runs per page, default 5; the median run counts), ``--pages DIR``
with ``--gold DIR`` to run on another set (``<name>.html`` and ``<name>.txt``).
Not collected by pytest.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from django_webfetch.text import MAX_STORED_CHARS, extract
from django_webfetch.text.document import LINKS_HEADING

ROOT = Path(__file__).resolve().parents[1] / "text"
DEVSET = ROOT / "devset"
#: A reference the Markdown text carries ("[text][3]", " [link][3]") and inline URLs of the
#: plain text (" (https://...)"): link targets, not counted.
_REFERENCE_RE = re.compile(r" \[link\]\[\d+\]|\]\[\d+\]")
_INLINE_URL_RE = re.compile(r" \((?:https?|mailto|ftp):[^)\s]*\)")


def without_link_targets(text: str) -> str:
    """``text`` without link definitions, reference numbers or inline URLs."""
    text = text.split(f"\n\n{LINKS_HEADING}\n\n", 1)[0]
    text = _REFERENCE_RE.sub(lambda match: "" if match.group().startswith(" ") else "]", text)
    return _INLINE_URL_RE.sub("", text)


_TOKEN_RE = re.compile(
    r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]|[^\W\u3040-\u30ff\u3400-\u9fff]+"
)
_COOKIE_RE = re.compile(r"cookie|consent", re.IGNORECASE)


def tokens(text: str) -> Counter[str]:
    return Counter(token.lower() for token in _TOKEN_RE.findall(text))


def score(text: str, gold: str) -> tuple[float, float, float]:
    got, want = tokens(text), tokens(gold)
    common = sum((got & want).values())
    precision = common / max(sum(got.values()), 1)
    recall = common / max(sum(want.values()), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def load_devset() -> list[dict]:
    cases = []
    for source in ("real.json", "furniture.json"):
        manifest = json.loads((DEVSET / source).read_text(encoding="utf-8"))
        for name, case in manifest.items():
            html = gzip.decompress((DEVSET / "pages" / f"{name}.html.gz").read_bytes())
            url = f"https://{name.split('_')[1]}.example/{name}"
            cases.append(
                {
                    "name": name,
                    "html": html,
                    "url": url,
                    "gold": case["gold"],
                    "present": [],
                    "absent": [],
                }
            )
    return cases


def load(
    pages: Path | None, gold: Path | None, sets: tuple[str, ...] = ("cases.json",)
) -> list[dict]:
    if pages is not None and gold is not None:
        return [
            {
                "name": path.stem,
                "html": path.read_bytes(),
                "url": None,
                "gold": (gold / f"{path.stem}.txt").read_text(encoding="utf-8"),
                "present": [],
                "absent": [],
            }
            for path in sorted(pages.glob("*.html"))
            if (gold / f"{path.stem}.txt").exists()
        ]
    cases = {}
    for source in sets:
        cases.update(json.loads((ROOT / "quality" / source).read_text(encoding="utf-8")))
    return [
        {"name": name, "html": (ROOT / "pages" / f"{name}.html").read_bytes(), **case}
        for name, case in cases.items()
    ]


def _ours(mode: str, whole: bool = False, targets: bool = False) -> Callable[[dict], str]:
    """Our text: the first part (``whole=False``, the older quality set) or the whole kept
    text; without link targets unless ``targets``."""

    def run(case: dict) -> str:
        if not whole:
            return extract(
                case["html"], "text/html", url=case["url"], mode=mode, format="text"
            ).text
        document = extract(
            case["html"], "text/html", url=case["url"], mode=mode, max_chars=MAX_STORED_CHARS
        ).document
        if not targets:
            return document.text
        return document.render(0, len(document.text))

    return run


def _trafilatura() -> Callable[[dict], str] | None:
    try:
        import trafilatura
    except ImportError:
        return None

    def run(case: dict) -> str:
        return trafilatura.extract(case["html"], url=case["url"]) or ""

    return run


def measure(run: Callable[[dict], str], case: dict, repeat: int) -> tuple[str, float]:
    times = []
    text = ""
    for _ in range(repeat):
        start = time.perf_counter()
        text = run(case)
        times.append((time.perf_counter() - start) * 1000)
    return text, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--pages", type=Path)
    parser.add_argument("--gold", type=Path)
    parser.add_argument("--show", help="print the texts of this page")
    parser.add_argument(
        "--set",
        choices=("dev", "all", "core", "handwritten"),
        default="dev",
        help="dev: the development set (tests/text/devset, default); core: the generated"
        " pages (cases.json); handwritten: the hand-written pages in real templates' shapes"
        " (handwritten.json); all: core and handwritten",
    )
    args = parser.parse_args()
    dev = args.set == "dev" and args.pages is None
    if dev:
        cases = load_devset()
        extractors: dict[str, Callable[[dict], str]] = {
            "main": _ours("main", whole=True),
            "main+urls": _ours("main", whole=True, targets=True),
            "page": _ours("page", whole=True),
        }
    else:
        sets = {
            "all": ("cases.json", "handwritten.json"),
            "dev": ("cases.json", "handwritten.json"),
            "core": ("cases.json",),
            "handwritten": ("handwritten.json",),
        }[args.set]
        cases = load(args.pages, args.gold, sets)
        extractors = {"main": _ours("main"), "page": _ours("page")}
    other = _trafilatura()
    if other is not None:
        extractors["trafilatura"] = other
    names = list(extractors)
    header = f"{'page':24}" + "".join(f" | {name:>11} P    R    F1    ms" for name in names)
    print(header)
    results: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in names}
    misses: dict[str, list[str]] = {name: [] for name in names}
    leaks: dict[str, int] = dict.fromkeys(names, 0)
    fallbacks = 0
    for case in cases:
        row = f"{case['name'][:24]:24}"
        for name, run in extractors.items():
            text, ms = measure(run, case, args.repeat)
            p, r, f = score(
                text if name == "main+urls" else without_link_targets(text), case["gold"]
            )
            results[name].append((p, r, f, ms))
            row += f" | {'':>11} {p:.2f} {r:.2f} {f:.2f} {ms:5.1f}"
            missing = [s for s in case["present"] if s not in text]
            leaked = [s for s in case["absent"] if s in text]
            if missing or leaked:
                misses[name].append(f"{case['name']}: missing {missing} leaked {leaked}")
            if _COOKIE_RE.search(text) and not _COOKIE_RE.search(case["gold"]):
                leaks[name] += 1
            if args.show == case["name"]:
                print(f"----- {name}\n{text}\n-----")
        if extract(case["html"], "text/html", url=case["url"]).mode != "main":
            fallbacks += 1
        print(row)
    print()
    print(
        f"{'extractor':12} {'P':>5} {'R':>5} {'F1':>5} {'median ms':>10} {'worst ms':>9}"
        f" {'cookie leaks':>13} {'snippet misses':>15}"
    )
    medians = {}
    worsts = {}
    for name in names:
        rows = results[name]
        p = statistics.mean(row[0] for row in rows)
        r = statistics.mean(row[1] for row in rows)
        f = statistics.mean(row[2] for row in rows)
        medians[name] = statistics.median(row[3] for row in rows)
        worsts[name] = max(row[3] for row in rows)
        print(
            f"{name:12} {p:5.3f} {r:5.3f} {f:5.3f} {medians[name]:10.1f} {worsts[name]:9.1f}"
            f" {leaks[name]:13} {len(misses[name]):15}"
        )
    print(f"\n{len(cases)} pages; main mode fell back to the whole page on {fallbacks}.")
    if "trafilatura" in medians:
        print(
            f"speed ratio main/trafilatura: median {medians['main'] / medians['trafilatura']:.2f},"
            f" worst {worsts['main'] / worsts['trafilatura']:.2f} (<= 1 is the target)"
        )
    for name in names:
        for line in misses[name]:
            print(f"[{name}] {line}")


if __name__ == "__main__":
    main()
