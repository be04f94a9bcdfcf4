"""Pages over a work budget of the text layer, whose article ``mode="main"`` must keep.

Each page is chrome (navigation, a footer, a sidebar, wrappers, floods) large enough to put
the page over a bound of the pre-scan (the estimated parse cost, the depth, the 256 KiB
parser input) around a short article.  :data:`SHAPES` is the table the tests and the
benchmark (``python -m tests.benchmarks bench_worst_case``) use; :func:`page` builds any
combination, for the hypothesis strategy in ``tests/text/test_over_budget.py``.
"""

from __future__ import annotations

KIB = 1024

#: Sentences only the article holds (the tests look for the first, one middle, the last).
SENTENCES = [
    "Engineers finished the harbour bridge survey three weeks ahead of the plan.",
    "The council will publish the full inspection report on its website in May.",
    "Residents asked whether the night closures would end before the summer festival.",
    "A spokesperson said the repairs, paid from the maintenance fund, would not raise fares.",
    "Divers found that the northern pier, built in 1911, needs new steel collars.",
    "The ferry timetable stays as it is until the last span reopens in the autumn.",
    "Local shops reported fewer visitors on the evenings when the bridge was closed.",
    "The final stage of the work starts on Monday, weather permitting, at six o'clock.",
]
HEADLINE = "Harbour bridge survey finished early"
KEY_SENTENCES = (SENTENCES[0], SENTENCES[4], SENTENCES[-1])
#: Every label of the chrome holds this word, so a test can count how much of it is left.
MENU_WORD = "Menuitem"


def paragraphs() -> str:
    return "".join(
        f"<p>{first} {second} Further detail follows on the measurements taken, the crews"
        f" involved, and the timetable that the council has agreed with the contractors.</p>"
        for first, second in zip(SENTENCES[::2], SENTENCES[1::2], strict=True)
    )


def article(wrapper: str = "main") -> str:
    """The article, wrapped as ``main`` (``<main><article>``), ``article``, ``role`` (a
    ``div role=main``), ``div`` (no semantic element) or ``split`` (two sibling divs)."""
    body = f"<h1>{HEADLINE}</h1>{paragraphs()}"
    if wrapper == "main":
        return f"<main><article>{body}</article></main>"
    if wrapper == "article":
        return f"<article>{body}</article>"
    if wrapper == "role":
        return f'<div role="main"><div><div>{body}</div></div></div>'
    if wrapper == "split":
        half = len(SENTENCES) // 4
        parts = body.split("</p>")
        first = "</p>".join(parts[:half]) + "</p>"
        second = "</p>".join(parts[half:])
        return (
            f'<div class="c1">{first}</div>'
            f'<div class="ad"><a href="/ad">{MENU_WORD} advert</a></div>'
            f'<div class="c2">{second}</div>'
        )
    return f"<div>{body}</div>"


def _links(size: int, item: str) -> str:
    out = []
    total = index = 0
    while total < size:
        piece = item.format(index=index, word=MENU_WORD)
        out.append(piece)
        total += len(piece)
        index += 1
    return "".join(out)


_LI = '<li><a href="/category/{index}">{word} {index}</a></li>'


def chrome(kind: str, size: int) -> str:
    """``size`` characters of one kind of chrome."""
    if kind == "nav":  # a mega-menu in <nav>: pruned to bare tags, over the cost budget
        return f"<nav><ul>{_links(size, _LI)}</ul></nav>"
    if kind == "div-menu":  # a menu of text links without <nav>: fills the parser input
        return f'<div class="top"><ul>{_links(size, _LI)}</ul></div>'
    if kind == "footer":
        return f"<footer>{_links(size, '<a href=/f/{index}>{word} {index}</a> ')}</footer>"
    if kind == "sidebar":
        item = "<div><h3>{word}</h3><ul><li><a href=/s/{index}>{word} {index}</a></li></ul></div>"
        return f'<aside class="sidebar">{_links(size, item)}</aside>'

    if kind == "deep-menu":  # a menu nested deeper than the depth bound
        depth = max(1, size // 60)
        return (
            "<div>"
            + f"<ul><li><a href=/d>{MENU_WORD}</a>" * depth
            + "</li></ul>" * depth
            + "</div>"
        )
    if kind == "comments":
        return "<!---->" * (size // 7)
    if kind == "scripts":
        return "<script></script>" * (size // 17)
    if kind == "formatting":  # adoption-agency soup, over the cost budget
        return "<b><div>x</b>" * (size // 13)
    raise ValueError(kind)


def page(before: str | None, after: str | None, wrapper: str, size: int) -> str:
    """A page with ``size`` characters of ``before`` chrome, the article, ``after`` chrome."""
    parts = ["<!DOCTYPE html><html><head><title>The Example Times</title></head><body>"]
    if before:
        parts.append(chrome(before, size))
    parts.append(article(wrapper))
    if after:
        parts.append(chrome(after, size))
    parts.append("</body></html>")
    return "".join(parts)


def nested(depth: int, wrapper: str = "div") -> str:
    """The article inside ``depth`` nested divs (over the depth bound), menus around it."""
    menu = chrome("div-menu", 4 * KIB)
    return (
        "<html><head><title>The Example Times</title></head><body>"
        + "<div>" * depth
        + menu
        + article(wrapper)
        + "</div>" * depth
        + "</body></html>"
    )


def table_layout(size: int) -> str:
    """A layout table: a menu column of ``size`` characters of links, the article's cell."""
    return (
        "<html><head><title>The Example Times</title></head><body><table><tr>"
        f'<td class="left">{_links(size, "<a href=/t/{index}>{word} {index}</a><br>")}</td>'
        f"<td>{article('div')}</td></tr></table></body></html>"
    )


#: name -> page: the over-budget shapes of issue 28.
SHAPES = {
    "mega-menu in nav before <main>": lambda: page("nav", None, "main", 330 * KIB),
    "mega-menu in nav after <main>": lambda: page(None, "nav", "main", 330 * KIB),
    "text-link menu before <article>": lambda: page("div-menu", None, "article", 330 * KIB),
    "text-link menu before a plain div": lambda: page("div-menu", None, "div", 330 * KIB),
    "huge footer after <article>": lambda: page(None, "footer", "article", 400 * KIB),
    "huge sidebar before a plain div": lambda: page("sidebar", None, "div", 400 * KIB),
    "huge sidebar before role=main": lambda: page("sidebar", None, "role", 400 * KIB),
    "menu nested 300 deep before <main>": lambda: page("deep-menu", None, "main", 300 * 60),
    "3,000 nested divs around the article": lambda: nested(3000),
    "3,000 nested divs around <article>": lambda: nested(3000, "article"),
    "table layout with a menu column": lambda: table_layout(400 * KIB),
    "comment flood before the article": lambda: page("comments", None, "div", 140_000 * 7),
    "script flood before <main>": lambda: page("scripts", None, "main", 40_000 * 17),
    "formatting soup before the article": lambda: page("formatting", None, "div", 256 * KIB),
    "article split in two siblings": lambda: page("div-menu", "footer", "split", 330 * KIB),
    "mega-menus before and after a plain div": lambda: page("nav", "div-menu", "div", 330 * KIB),
}
