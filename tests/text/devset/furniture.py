"""The hand-written half of the development set: articles with page furniture next to them.

``python -m tests.text.devset.furniture`` writes ``pages/furn_<name>.html.gz`` and
``furniture.json``.  Each page is one article of :mod:`.articles` in one of six layouts,
with the furniture that held the precision down on the reviewers' pages placed where real
templates put it (inside the ``<article>``, beside the body in the same wrapper, or as flat
siblings without any class): share bars, "Read more" teasers between paragraphs, teaser
and related-article lists with pictures and dates, author boxes, comment threads and
forms, newsletter boxes, cookie and consent text, ad labels, tag lists, shop price,
stock and shipping blocks, recipe rating widgets, live-blog key-event asides.  Class
names are meaningful (``related-posts``), generated (``sc-1f3a``) or absent.
The gold text is the article: headline, standfirst, paragraphs, subheading (and for the
shop, recipe and live-blog layouts their description, ingredients and steps, entries).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from html import escape
from pathlib import Path

from .articles import ARTICLES, FURNITURE, TEASERS

HERE = Path(__file__).resolve().parent
LAYOUTS = ("inside", "siblings", "flat", "shop", "recipe", "liveblog")
STYLES = ("semantic", "generated", "bare")


def _cls(style: str, name: str) -> str:
    if style == "semantic":
        return f' class="{name}"'
    if style == "generated":
        return f' class="sc-{hashlib.sha1(name.encode()).hexdigest()[:6]} css-{len(name)}x"'
    return ""


def _chrome(lang: str, site: str) -> tuple[str, str]:
    teasers = TEASERS[lang]
    head = (
        f'<header><a href="/">{site}</a><nav><ul>'
        + "".join(f'<li><a href="/s{i}">{t.split()[0]}</a></li>' for i, t in enumerate(teasers))
        + "</ul></nav></header>"
    )
    foot = (
        f"<footer><p>© 2026 {site}</p><ul><li><a href=/imprint>Imprint</a></li>"
        "<li><a href=/privacy>Privacy</a></li></ul></footer>"
    )
    return head, foot


def _share(lang: str, style: str) -> str:
    label = FURNITURE[lang][4]
    links = "".join(
        f'<a href="https://{n.lower()}.example/share?u=x">{n}</a> '
        for n in ("Facebook", "X", "WhatsApp", "Email")
    )
    return f"<div{_cls(style, 'share-bar')}><span>{label}</span> {links}</div>"


def _teaser_inline(lang: str, style: str) -> str:
    return (
        f"<p{_cls(style, 'read-more')}><strong>{FURNITURE[lang][1]}:</strong>"
        f' <a href="/story/9">{TEASERS[lang][0]}</a></p>'
    )


def _related(lang: str, style: str, heading: str = "h2") -> str:
    cards = "".join(
        f'<li{_cls(style, "card")}><a href="/story/{i}"><img src="/i{i}.jpg" alt="">'
        f"<span>{escape(t)}</span></a><p>{escape(TEASERS[lang][(i + 1) % 4])}.</p>"
        f"<time>12.0{i + 1}.2026</time></li>"
        for i, t in enumerate(TEASERS[lang])
    )
    return (
        f"<section{_cls(style, 'related-posts')}><{heading}>{FURNITURE[lang][0]}</{heading}>"
        f"<ul>{cards}</ul></section>"
    )


def _author(lang: str, style: str) -> str:
    bio = (
        "Sam Rivera has covered local government and transport for the paper since 2015,"
        " and before that reported on courts and schools for a regional radio station."
        if lang == "en"
        else f"{TEASERS[lang][1]}. {TEASERS[lang][2]}. {TEASERS[lang][3]}."
    )
    return (
        f"<div{_cls(style, 'author-box')}><img src=/a.jpg alt=''><h3>{FURNITURE[lang][2]}</h3>"
        f"<p><strong>Sam Rivera</strong></p><p>{bio}</p>"
        f'<p><a href="https://x.example/samrivera">@samrivera</a></p></div>'
    )


def _comments(lang: str, style: str) -> str:
    entries = "".join(
        f"<div{_cls(style, 'comment')}><p><b>reader{i}</b> <time>2 h</time></p>"
        f"<p>{escape(TEASERS[lang][i])}? {escape(TEASERS[lang][(i + 2) % 4])}!</p>"
        f'<a href="#reply-{i}">Reply</a></div>'
        for i in range(3)
    )
    return (
        f"<section{_cls(style, 'comments')}><h2>{FURNITURE[lang][3].format(n=3)}</h2>{entries}"
        "<form><textarea></textarea><button>Post</button></form></section>"
    )


def _newsletter(lang: str, style: str) -> str:
    return (
        f"<div{_cls(style, 'newsletter-signup')}><p><strong>{FURNITURE[lang][5]}</strong></p>"
        '<form><input type="email"><button>OK</button></form></div>'
    )


def _advert(lang: str, style: str) -> str:
    return f"<div{_cls(style, 'ad-slot')}><span>{FURNITURE[lang][7]}</span></div>"


def _tags(lang: str, style: str) -> str:
    words = [t.split()[-1] for t in TEASERS[lang][:3]]
    links = ", ".join(f'<a href="/tag/{i}">{w}</a>' for i, w in enumerate(words))
    return f"<p{_cls(style, 'tags')}>{FURNITURE[lang][8]}: {links}</p>"


def _cookie(lang: str, style: str) -> str:
    return f"<div{_cls(style, 'notice')}><p>{FURNITURE[lang][6]}</p><a href=#>OK</a></div>"


def _body(article: dict, style: str, middle: str) -> tuple[str, list[str]]:
    paragraphs = article["paragraphs"]
    gold = [article["headline"], article["standfirst"], *paragraphs[:2]]
    html = [f"<p>{paragraphs[0]}</p>", f"<p>{paragraphs[1]}</p>", middle]
    html.append(f"<h2>{article['subheading']}</h2>")
    gold.append(article["subheading"])
    for paragraph in paragraphs[2:]:
        html.append(f"<p>{paragraph}</p>")
        gold.append(paragraph)
    return "".join(html), gold


def page(article: dict, layout: str, style: str, site: str) -> tuple[str, list[str]]:
    lang = article["lang"]
    head, foot = _chrome(lang, site)
    headline = f"<h1>{article['headline']}</h1>"
    standfirst = f"<p{_cls(style, 'standfirst')}>{article['standfirst']}</p>"
    if layout == "inside":
        body, gold = _body(article, style, _teaser_inline(lang, style) + _advert(lang, style))
        content = (
            f"<article{_cls(style, 'post')}><header>{headline}{standfirst}"
            f"<p{_cls(style, 'byline')}>By Sam Rivera · 12 March 2026</p></header>"
            f"{_share(lang, style)}<div{_cls(style, 'entry-content')}>{body}</div>"
            f"{_tags(lang, style)}{_author(lang, style)}{_related(lang, style)}"
            f"{_newsletter(lang, style)}{_comments(lang, style)}</article>"
        )
    elif layout == "siblings":
        body, gold = _body(article, style, _advert(lang, style))
        content = (
            f"<main><div{_cls(style, 'wrap')}>{headline}{standfirst}{_share(lang, style)}"
            f"<div{_cls(style, 'article-body')}>{body}</div>{_author(lang, style)}"
            f"{_related(lang, style, 'h3')}{_comments(lang, style)}</div>"
            f"<aside>{_newsletter(lang, style)}</aside></main>"
        )
    elif layout == "flat":
        body, gold = _body(article, "bare", _teaser_inline(lang, "bare"))
        related = "".join(
            f'<p><a href="/story/{i}">{escape(t)}</a></p>' for i, t in enumerate(TEASERS[lang])
        )
        content = (
            f"<div>{headline}<p>{article['standfirst']}</p>{body}"
            f"<p>{FURNITURE[lang][4]}: <a href=https://facebook.example/s>Facebook</a>"
            f" <a href=https://x.example/s>X</a></p>"
            f"<h3>{FURNITURE[lang][0]}</h3>{related}<h3>{FURNITURE[lang][2]}</h3>"
            f"<p>Sam Rivera</p>{_comments(lang, 'bare')}{_cookie(lang, 'bare')}</div>"
        )
    elif layout == "shop":
        paragraphs = article["paragraphs"][:3]
        gold = [article["headline"], *paragraphs]
        content = (
            f"<main><div{_cls(style, 'product')}>{headline}"
            f"<div{_cls(style, 'price')}><span>€ 49,90</span> <s>€ 59,90</s>"
            " <small>incl. VAT, plus shipping</small></div>"
            f"<p{_cls(style, 'stock')}>In stock · Free shipping on orders over € 50 ·"
            " Delivery in 2–3 working days</p>"
            f"<form><select><option>M</option></select><input value=1>"
            f"<button>Add to cart</button></form>"
            f"<div{_cls(style, 'description')}>"
            + "".join(f"<p>{p}</p>" for p in paragraphs)
            + f"</div><div{_cls(style, 'reviews')}><h2>Reviews (12)</h2><p>★★★★☆ 4.3 out of 5"
            "</p></div>" + _related(lang, style) + "</div></main>"
        )
    elif layout == "recipe":
        paragraphs = article["paragraphs"][:2]
        steps = article["paragraphs"][2:]
        items = ["400 g flour", "300 ml water", "8 g salt", "100 g starter"]
        gold = [article["headline"], *paragraphs, "Ingredients", *items, "Method", *steps]
        content = (
            f"<article>{headline}<div{_cls(style, 'recipe-rating')}>★★★★★ 4.8 from 212 votes"
            " · <a href=#comments>Rate this recipe</a> · <a href=/print>Print recipe</a>"
            " · <a href=https://pinterest.example/pin>Pin</a></div>"
            + "".join(f"<p>{p}</p>" for p in paragraphs)
            + "<h2>Ingredients</h2><ul>"
            + "".join(f"<li>{i}</li>" for i in items)
            + "</ul><h2>Method</h2><ol>"
            + "".join(f"<li>{s}</li>" for s in steps)
            + f"</ol><p{_cls(style, 'rating-cta')}>Did you make this recipe? Leave a rating"
            " and tag us on Instagram.</p>" + _comments(lang, style) + "</article>"
        )
    else:  # liveblog
        entries = article["paragraphs"]
        key = "".join(
            f'<li><a href="#e{i}">{10 + i}:00 {escape(t)}</a></li>'
            for i, t in enumerate(TEASERS[lang])
        )
        gold = [article["headline"], article["standfirst"]]
        blocks = []
        for i, entry in enumerate(entries):
            blocks.append(
                f'<div id="e{i}"{_cls(style, "entry")}><time>{13 - i}:15</time><p>{entry}</p></div>'
            )
            gold.append(entry)
        content = (
            f"<main>{headline}<p>{article['standfirst']}</p>"
            f"<div{_cls(style, 'key-events')}><h2>{FURNITURE[lang][9]}</h2><ul>{key}</ul></div>"
            + "".join(blocks)
            + "</main>"
        )
    direction = ' dir="rtl"' if lang == "ar" else ""
    markup = (
        f'<!DOCTYPE html><html lang="{lang}"{direction}><head><meta charset="utf-8">'
        f"<title>{escape(article['headline'])} | {site}</title></head><body>"
        f"{head}{content}{foot}</body></html>"
    )
    return markup, gold


def build() -> dict[str, dict]:
    cases = {}
    index = 0
    for number, article in enumerate(ARTICLES):
        for offset in range(2):
            layout = LAYOUTS[(number + offset * 3) % len(LAYOUTS)]
            style = STYLES[(number + offset) % len(STYLES)]
            name = f"furn_{article['lang']}{number}_{layout}_{style}"
            markup, gold = page(article, layout, style, f"Site {index}")
            cases[name] = {"html": markup, "gold": "\n".join(gold) + "\n"}
            index += 1
    return cases


def main() -> None:
    cases = build()
    manifest = {}
    for name, case in cases.items():
        (HERE / "pages" / f"{name}.html.gz").write_bytes(
            gzip.compress(case["html"].encode("utf-8"), mtime=0)
        )
        manifest[name] = {"gold": case["gold"]}
    (HERE / "furniture.json").write_text(
        json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"{len(cases)} pages")


if __name__ == "__main__":
    main()
