"""Mutated real-looking pages, for the fuzzer and the property tests of main-content selection.

A page of the quality set (``tests/text/pages/``) is split into tokens (tags and text runs),
and a mutation changes it the way real templates vary: a range deleted, duplicated, moved
or wrapped in many levels of ``<div>`` (the class of the issue 21 ``KeyError``: a selected
ancestor more than five levels above every paragraph, which has no score), a structural
token inserted (headlines, ``<article>``, ``<main>``, ``role=main``, boilerplate and
content class words, tables, forms, hidden elements, link lists), tags renamed, closing
tags dropped, text replaced by comma-rich prose or links, the page cut short, a range
spliced in from another page.

Every mutation is a tuple of integers (:data:`Mutation`), so hypothesis can draw and shrink
them and the fuzzer can draw them from a seeded ``random.Random``.
"""

from __future__ import annotations

import logging
import random
import re
from functools import cache
from pathlib import Path

PAGES = Path(__file__).resolve().parents[1] / "text" / "pages"
_TOKEN_RE = re.compile(r"<[^<>]*>|[^<]+|<")

#: (operation, position, length, parameter)
Mutation = tuple[int, int, int, int]

_PROSE = (
    "The council said on Tuesday that the work, which will cost more than expected, would"
    " start in spring, and that residents, shops and schools would be told in advance."
)
#: Tokens inserted by the "insert" operation.
STRUCTURE = [
    "<h1>Headline of the story</h1>",
    "<h2>Section</h2>",
    "<article>",
    "</article>",
    "<main>",
    "</main>",
    "<div role=main>",
    "<div role=article>",
    "<div class=content>",
    "<div class='article-body entry-content'>",
    "<div class=comments>",
    "<div id=cookie-banner>We use cookies. Accept all</div>",
    "<div class=related><ul><li><a href=/a>Another story here</a></li></ul></div>",
    "<aside>",
    "</aside>",
    "<section>",
    "</section>",
    "<div>",
    "</div>",
    "<p>",
    "</p>",
    f"<p>{_PROSE}</p>",
    "<ul><li>",
    "</li></ul>",
    "<table><tr><td>",
    "</td></tr></table>",
    "<td>",
    "<form>",
    "</form>",
    "<fieldset>",
    "<header>",
    "</header>",
    "<footer>",
    "<div hidden>",
    "<div aria-hidden=true>",
    "<a href='https://other.example/x'>",
    "</a>",
    "<a href=/internal>link</a>",
    "<pre>",
    "<blockquote>",
    "<br>",
    "<img alt='An image'>",
    "<nav>",
    "</nav>",
    "<svg><title>x</title></svg>",
    "<template>",
    "<noscript>",
    "<h1>",
    "</h1>",
    "<li>",
    "<dd>",
    "<font>",
    "<b>",
    "</b>",
]
_RENAMES = ["div", "article", "main", "section", "p", "li", "td", "span", "h1", "aside", "form"]
OPERATIONS = 12


@cache
def page_names() -> tuple[str, ...]:
    return tuple(sorted(path.name for path in PAGES.glob("*.html")))


@cache
def page_tokens(name: str) -> tuple[str, ...]:
    text = (PAGES / name).read_bytes().decode("utf-8", "replace")
    return tuple(_TOKEN_RE.findall(text))


def mutate(tokens: list[str], mutation: Mutation, donor: tuple[str, ...] = ()) -> list[str]:
    """``tokens`` with one mutation applied (positions are taken modulo the length)."""
    operation, position, length, parameter = mutation
    size = len(tokens)
    if not size:
        return [STRUCTURE[parameter % len(STRUCTURE)]]
    at = position % size
    span = tokens[at : at + 1 + length % 80]
    end = at + len(span)
    operation %= OPERATIONS
    if operation == 0:  # delete a range
        return tokens[:at] + tokens[end:]
    if operation == 1:  # duplicate a range
        return tokens[:end] + span * (1 + parameter % 4) + tokens[end:]
    if operation == 2:  # move a range
        rest = tokens[:at] + tokens[end:]
        to = parameter % (len(rest) + 1)
        return rest[:to] + span + rest[to:]
    if operation == 3:  # wrap a range in many levels of div (unscored wrappers)
        depth = 1 + parameter % 14
        return tokens[:at] + ["<div>"] * depth + span + ["</div>"] * depth + tokens[end:]
    if operation == 4:  # insert a structural token
        return tokens[:at] + [STRUCTURE[parameter % len(STRUCTURE)]] + tokens[at:]
    if operation == 5:  # rename the tags of a range
        name = _RENAMES[parameter % len(_RENAMES)]
        return (
            tokens[:at]
            + [re.sub(r"^<(/?)[A-Za-z][A-Za-z0-9]*", rf"<\g<1>{name}", token) for token in span]
            + tokens[end:]
        )
    if operation == 6:  # drop the closing tags of a range
        return tokens[:at] + [t for t in span if not t.startswith("</")] + tokens[end:]
    if operation == 7:  # replace the text of a range
        choice = parameter % 4
        replacement = [_PROSE, "", " x ", "<a href='https://other.example/'>" + _PROSE + "</a>"][
            choice
        ]
        return (
            tokens[:at]
            + [replacement if not token.startswith("<") else token for token in span]
            + tokens[end:]
        )
    if operation == 8:  # cut the page short
        return tokens[:at]
    if operation == 9:  # hide a range
        attribute = ["hidden", "aria-hidden=true", "role=navigation", "class=sidebar"][
            parameter % 4
        ]
        return tokens[:at] + [f"<div {attribute}>"] + span + ["</div>"] + tokens[end:]
    if operation == 10:  # splice in a range of another page
        if not donor:
            return tokens
        start = parameter % len(donor)
        return tokens[:at] + list(donor[start : start + 1 + length % 200]) + tokens[at:]
    # 11: many paragraphs alike (forum posts, a page of sections) in nested wrappers
    depth = parameter % 8
    post = ["<div>"] * depth + [f"<p>{_PROSE}</p>"] * (1 + length % 4) + ["</div>"] * depth
    return tokens[:at] + post * (2 + parameter % 5) + tokens[at:]


def mutated_page(name: str, mutations: list[Mutation], donor: str | None = None) -> bytes:
    tokens = list(page_tokens(name))
    donor_tokens = page_tokens(donor) if donor else ()
    for mutation in mutations:
        tokens = mutate(tokens, mutation, donor_tokens)
    return "".join(tokens).encode("utf-8", "replace")


def random_mutations(rng: random.Random, count: int) -> list[Mutation]:
    return [
        (
            rng.randrange(OPERATIONS),
            rng.randrange(1 << 20),
            rng.randrange(1 << 10),
            rng.randrange(1 << 10),
        )
        for _ in range(count)
    ]


class Failures(logging.Handler):
    """Collects what the text layer logs as a failure (its safety nets catch a bug, log it,
    and fall back): a finding, although ``extract`` returned text."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> Failures:
        logging.getLogger("django_webfetch.text").addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("django_webfetch.text").removeHandler(self)


def problems(body: bytes, parser: str = "lexbor") -> list[str]:
    """What is wrong with the extraction of ``body`` in both modes (empty when nothing).

    The selection is also run on its own, outside ``extract``'s safety net, so that a bug
    there is reported with its traceback rather than only as a fallback.
    """
    import traceback

    from django_webfetch.text import MAX_TEXT_CHARS
    from django_webfetch.text.extract import REASONS, extract
    from django_webfetch.text.main import select
    from django_webfetch.text.render import parse
    from django_webfetch.text.scan import scan

    found = []
    scanned = scan(body.decode("utf-8", "replace"))
    if scanned.markup is not None:
        try:
            select(parse(scanned.markup, parser=parser))
        except Exception:
            found.append(f"select raised:\n{traceback.format_exc()}")
    with Failures() as failures:
        for mode in ("main", "page"):
            try:
                # A generous time limit: a slow page is the time fuzzer's finding, not this one's.
                result = extract(
                    body,
                    "text/html",
                    url="https://example.org/a/b",
                    mode=mode,
                    parser=parser,
                    time_limit=30.0,
                )
            except Exception:
                found.append(f"extract(mode={mode!r}) raised:\n{traceback.format_exc()}")
                continue
            if not isinstance(result.text, str) or len(result.text) > MAX_TEXT_CHARS:
                found.append(f"mode={mode!r}: text is not bounded text")
            if result.reason is not None and result.reason not in REASONS:
                found.append(f"mode={mode!r}: unknown reason {result.reason!r}")
            if not result.text and result.reason != "no_text":
                found.append(f"mode={mode!r}: empty text without a reason")
            if mode == "main" and result.mode == "page" and result.reason is None:
                found.append("mode='main' fell back to the whole page without a reason")
    found.extend(f"logged: {record.getMessage()}" for record in failures.records)
    return found
