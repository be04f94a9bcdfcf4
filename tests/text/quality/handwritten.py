# ruff: noqa: E501
"""Hand-written pages of the quality set, in the shapes of real templates (review10).

Each page is written whole, modelled on one real template or platform (Next.js div soup with
``__NEXT_DATA__``, Ghost/Casper, Substack, a live blog, WP Recipe Maker, Discourse, Shopify,
MkDocs Material, Docusaurus, GOV.UK, Astra with Jetpack related posts, MediaWiki with
references, ...), with the consent banners of real CMPs (OneTrust, Cookiebot, Didomi,
Quantcast) in their real ids and classes.  The annotator's main text is marked in the page
with ``<!--G-->`` ... ``<!--/G-->`` (several regions allowed), and text inside a region that
the annotator leaves out with ``<!--X-->`` ... ``<!--/X-->``; the markers are removed from the
written page.  The gold text is the marked regions' text, block by block, the way the
field's annotations are made: headings, paragraphs, lists, tables, captions, footnotes.

``python -m tests.text.quality.handwritten`` writes ``tests/text/pages/<name>.html`` and
``handwritten.json`` (same format as ``cases.json``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .handwritten_pages import PAGES

HERE = Path(__file__).parent
_REGION_RE = re.compile(r"<!--G-->(.*?)<!--/G-->", re.S)
_EXCLUDE_RE = re.compile(r"<!--X-->.*?<!--/X-->", re.S)
_MARK_RE = re.compile(r"<!--/?[GX]-->")
_BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "table",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "figcaption",
    "figure",
    "blockquote",
    "pre",
    "summary",
    "details",
    "header",
    "footer",
    "main",
    "aside",
    "br",
    "caption",
    "hr",
}


def gold_text(page: str) -> str:
    import lxml.html

    parts: list[str] = []
    for region in _REGION_RE.findall(page):
        region = _EXCLUDE_RE.sub("", region)
        root = lxml.html.fragment_fromstring(region, create_parent="div")
        for bad in root.xpath("//script|//style|//template|//noscript"):
            bad.drop_tree()
        chunks: list[str] = []

        def walk(el, chunks: list[str] = chunks) -> None:  # noqa: ANN001
            if not isinstance(el.tag, str):
                if el.tail:
                    chunks.append(el.tail)
                return
            block = el.tag in _BLOCKS
            if block:
                chunks.append("\n")
            if el.tag in ("td", "th"):
                chunks.append(" ")
            if el.text:
                chunks.append(el.text)
            for child in el:
                walk(child)
            if block:
                chunks.append("\n")
            if el.tail:
                chunks.append(el.tail)

        walk(root)
        text = "".join(chunks)
        lines = [" ".join(line.split()) for line in text.split("\n")]
        parts.append("\n".join(line for line in lines if line))
    return "\n".join(parts)


def main() -> None:
    cases = {}
    for page in PAGES:
        markup = page["html"]
        (HERE.parent / "pages" / f"{page['name']}.html").write_text(
            _MARK_RE.sub("", markup), encoding="utf-8"
        )
        cases[page["name"]] = {
            "url": page["url"],
            "kind": page["kind"],
            "lang": page["lang"],
            "gold": gold_text(markup),
            "present": page["present"],
            "absent": page["absent"],
        }
    (HERE / "handwritten.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
