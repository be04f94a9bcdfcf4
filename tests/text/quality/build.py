"""Writes the quality set: ``python -m tests.text.quality.build``.

Each page is one article (written here, in its language) inside the chrome of one kind of
site: a news CMS of nested divs, an HTML5 site with header/nav/main/aside/footer, a
WordPress theme, an ASP.NET page wrapped in one ``<form>``, a MediaWiki page, a docs site, a
shop, a forum thread, a recipe blog, a government page, a page whose mega-menu alone fills
the parser input.  The chrome carries what must not reach the model: cookie and consent
banners (in the page's language), menus, breadcrumbs, share bars, related links, comment
sections, newsletter boxes, ads, footers.

Written: ``tests/text/pages/<name>.html`` and ``cases.json`` (per page: the URL, the gold main text,
snippets that must be present and snippets that must be absent).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from .articles import ARTICLES

HERE = Path(__file__).parent

_LINK_RE = re.compile(r"\[([^\]]+)\]\(([^)]+)\)")


def _inline(text: str) -> str:
    out = []
    pos = 0
    for match in _LINK_RE.finditer(text):
        out.append(html.escape(text[pos : match.start()], quote=False))
        out.append(f'<a href="{html.escape(match.group(2))}">{html.escape(match.group(1))}</a>')
        pos = match.end()
    out.append(html.escape(text[pos:], quote=False))
    return "".join(out)


def _plain(text: str) -> str:
    return _LINK_RE.sub(lambda match: match.group(1), text)


def body_html(source: str) -> str:
    """Article markup from the small line format of articles.py."""
    blocks: list[str] = []
    lines = [line.rstrip() for line in source.strip().split("\n")]
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line:
            index += 1
            continue
        if line.startswith(("- ", "1. ")):
            ordered = line.startswith("1. ")
            items = []
            while index < len(lines) and lines[index].startswith(("- ", "1. ")):
                items.append(f"<li>{_inline(lines[index].split(' ', 1)[1])}</li>")
                index += 1
            tag = "ol" if ordered else "ul"
            blocks.append(f"<{tag}>{''.join(items)}</{tag}>")
            continue
        if line.startswith("| "):
            rows = []
            while index < len(lines) and lines[index].startswith("| "):
                cells = [cell.strip() for cell in lines[index].strip("| ").split(" | ")]
                tag = "th" if not rows else "td"
                rows.append(
                    "<tr>" + "".join(f"<{tag}>{_inline(c)}</{tag}>" for c in cells) + "</tr>"
                )
                index += 1
            blocks.append(f"<table><tbody>{''.join(rows)}</tbody></table>")
            continue
        if line == "---":
            blocks.append("<hr>")
        elif line.startswith("### "):
            blocks.append(f"<h3>{_inline(line[4:])}</h3>")
        elif line.startswith("## "):
            blocks.append(f"<h2>{_inline(line[3:])}</h2>")
        elif line.startswith("> "):
            blocks.append(f"<blockquote><p>{_inline(line[2:])}</p></blockquote>")
        elif line.startswith("```"):
            code = []
            index += 1
            while not lines[index].startswith("```"):
                code.append(lines[index])
                index += 1
            blocks.append("<pre><code>" + html.escape("\n".join(code)) + "</code></pre>")
        else:
            blocks.append(f"<p>{_inline(line)}</p>")
        index += 1
    return "\n".join(blocks)


def gold_text(article: dict) -> str:
    parts = [article["headline"]]
    if article.get("standfirst"):
        parts.append(article["standfirst"])
    for line in article["body"].strip().split("\n"):
        line = line.strip()
        if not line or line.startswith("```") or line == "---":
            continue
        line = line.lstrip("#>-| ").replace(" | ", " ").rstrip("|")
        if line[:3] == "1. ":
            line = line[3:]
        parts.append(_plain(line))
    return "\n".join(parts)


def main() -> None:
    from .skeletons import CHROME, SKELETONS

    cases = {}
    for article in ARTICLES:
        skeleton = SKELETONS[article["skeleton"]]
        page = skeleton(article, body_html(article["body"]))
        name = article["name"]
        chrome = CHROME[article["lang"]]
        # Whatever of the chrome's text is on the page must not reach the model.
        absent = list(article["absent"])
        for text in (
            chrome["cookie"][:40],
            chrome["items"].split("|")[0],
            chrome["footer"][:24],
            chrome["newsletter"],
        ):
            if html.escape(text, quote=False) in page and text not in absent:
                absent.append(text)
        (HERE.parent / "pages" / f"{name}.html").write_text(
            page, encoding=article.get("encoding", "utf-8")
        )
        cases[name] = {
            "url": article["url"],
            "kind": article["kind"],
            "lang": article["lang"],
            "gold": gold_text(article),
            "present": article["present"],
            "absent": absent,
        }
    (HERE / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
