"""Page furniture recognised by its wording: what sits next to an article and is not it.

Class names say "related" or "share" on many sites (:mod:`.hints`), but not on sites with
generated class names or none.  These rules read the text of small blocks instead, in the
languages the cookie-notice rule reads: a heading that opens a section of furniture
("Related stories", "About the author", "3 comments", "Key events", "Das könnte Sie auch
interessieren"...), a line led by a furniture label ("Read more: ...", "Tags: ..."), a bar
of sharing services, an ad label, a shop's price, stock and shipping lines, a recipe's
rating widget.  Each rule looks at a block of at most :data:`MAX_FURNITURE_CHARS`
characters, once (the outermost small block), so the pass stays linear.
"""

from __future__ import annotations

import re

__all__ = ["MAX_FURNITURE_CHARS", "furniture_heading", "furniture_line"]

#: Blocks longer than this are never furniture by wording (an article paragraph that
#: mentions a price or a vote stays).
MAX_FURNITURE_CHARS = 300

_SPACE_RE = re.compile(r"\s+")
_TRIM = " \t\n:：.…›»>→|·-–—()[]!?\u00a0"

#: Whole headings (case-folded, trimmed, a count such as "(12)" dropped) that open furniture.
_HEADINGS = frozenset(
    line.strip()
    for line in """
related
related stories
related articles
related posts
related content
related news
related topics
related reading
read more
read next
read also
also read
more from
more stories
more news
more on this story
more on this topic
more in
you may also like
you might also like
you may be interested in
recommended
recommended for you
recommended stories
most read
most popular
popular stories
trending
trending now
latest news
latest stories
about the author
about the authors
share
share this
share this article
share this story
share this post
share article
leave a reply
leave a comment
post a comment
join the conversation
newsletter
sign up for our newsletter
get our newsletter
subscribe
tags
key events
key moments
reviews
customer reviews
das könnte sie auch interessieren
mehr zum thema
mehr aus dem ressort
weitere artikel
auch interessant
meistgelesen
über den autor
über die autorin
zur autorin
zum autor
artikel teilen
kommentare
schlagwörter
themen
die wichtigsten ereignisse
bewertungen
à lire aussi
a lire aussi
lire aussi
lire la suite
sur le même sujet
les plus lus
à propos de l'auteur
partager l'article
partager
commentaires
mots-clés
les moments clés
avis
noticias relacionadas
te puede interesar
leer más
lo más leído
sobre el autor
compartir
comentarios
etiquetas
momentos clave
читайте также
подробнее
самое читаемое
об авторе
поделиться
комментарии
теги
главные события
相关阅读
相关文章
相关新闻
阅读更多
热门文章
关于作者
分享到
评论
标签
重点事件
関連記事
続きを読む
人気記事
この記事を書いた人
この記事をシェア
コメント
タグ
主な出来事
أخبار ذات صلة
اقرأ أيضا
اقرأ المزيد
الأكثر قراءة
عن الكاتب
شارك المقال
تعليقات
الوسوم
أبرز الأحداث
zobacz także
czytaj więcej
najczęściej czytane
o autorze
udostępnij
komentarze
tagi
najważniejsze wydarzenia
leia também
ler mais
mais lidas
sobre o autor
partilhar
compartilhar
comentários
etiquetas
momentos-chave
संबंधित खबरें
और पढ़ें
लेखक के बारे में
शेयर करें
टिप्पणियां
टैग
मुख्य घटनाएं
ilgili haberler
devamını oku
yazar hakkında
paylaş
yorumlar
etiketler
önemli gelişmeler
leggi anche
potrebbe interessarti
articoli correlati
sull'autore
condividi
commenti
lees ook
meer over
over de auteur
delen
reacties
""".strip().split("\n")
)
#: "3 comments", "12 Kommentare", "コメント3件", "3条评论", "Reviews (12)".
_COUNTED_RE = re.compile(
    r"^(?:\d+\s*(?:comments?|kommentare?|commentaires?|comentarios?|commenti|komentarz[ey]?"
    r"|comentários|yorum|reacties|टिप्पणियां|تعليقات?|комментари[йяев]*|条评论|件のコメント)"
    r"|コメント\d+件|(?:reviews?|bewertungen|avis|opiniones)\s*\d*)$"
)
#: Labels that lead a line of furniture: "Read more: <a>...</a>", "Tags: a, b".
_LABELS = frozenset(
    label
    for label in _HEADINGS
    if not label.startswith(("about", "über", "à propos", "sobre", "об", "o autorze"))
)
#: Sharing services; a sharing bar names at least one of the first kind.
_SERVICES = frozenset(
    [
        "facebook",
        "twitter",
        "whatsapp",
        "linkedin",
        "pinterest",
        "telegram",
        "reddit",
        "xing",
        "bluesky",
        "mastodon",
        "vk",
        "weibo",
        "wechat",
    ]
)
_NETWORKS = _SERVICES | {"x", "email", "e-mail", "messenger"}
_ADS = frozenset(
    [
        "advertisement",
        "advertising",
        "ad",
        "sponsored",
        "anzeige",
        "werbung",
        "publicité",
        "publicidad",
        "publicidade",
        "pubblicità",
        "реклама",
        "广告",
        "広告",
        "إعلان",
        "reklama",
        "reklam",
        "विज्ञापन",
        "advertentie",
    ]
)
_SHOP_RE = re.compile(
    r"in stock|out of stock|add to (?:cart|basket|bag)|free (?:shipping|delivery)"
    r"|plus shipping|incl\. vat|excl\. vat|delivery in \d|ships in \d|in den warenkorb"
    r"|auf lager|zzgl\. versand|inkl\. mwst|versandkostenfrei|ajouter au panier|en stock"
    r"|livraison gratuite|añadir al carrito|envío gratis|в корзину|в наличии"
    r"|加入购物车|カートに入れる"
)
_PRICE_RE = re.compile(r"(?:[€$£¥₹₺]\s?\d|\d[\d.,]*\s?(?:€|zł|руб|円|元|₺|eur|usd)\b)")
_RATING_RE = re.compile(
    r"★|☆|\b\d(?:[.,]\d)?\s*(?:from|out of|von|sur|de|из)\s*\d+\s*"
    r"(?:votes?|ratings?|reviews?|stimmen|bewertungen|avis|votos|голос)"
    r"|rate this recipe|print recipe|pin recipe|did you make this|leave a rating|jump to recipe"
)


_BYLINE_RE = re.compile(
    r"^(?:by|von|par|por|di|door|przez|av|af|автор|作者|著者|بقلم|yazan)\s"
    r"(?!default|the way|now|then|hand|far)"
)
_BYLINE_DATE_RE = re.compile(r"[·•|]|\b(?:19|20)\d\d\b")
_NEWSLETTER_RE = re.compile(
    r"newsletter|subscribe to|sign up for our|abonnieren|abonnez-vous|suscríbete|подпишитесь"
    r"|订阅|購読|اشترك في|zapisz się|subscreva|abone olun|न्यूज़लेटर"
)


_COUNT_RE = re.compile(r"\s*\(\d+\)\s*$")


def _fold(text: str) -> str:
    # "İlgili haberler": a Turkish capital İ casefolds to "i" and a combining dot.
    return _SPACE_RE.sub(" ", text).strip(_TRIM).casefold().replace("\u0307", "")


def furniture_heading(text: str) -> bool:
    """Whether a heading opens a section of page furniture ("Related stories")."""
    if len(text) > MAX_FURNITURE_CHARS:
        return False  # no furniture heading is this long (and every pattern below sees a
        # bounded text: tests/text/test_patterns.py's REVIEWED entries rely on it)
    folded = _fold(_COUNT_RE.sub("", text))
    if not folded or len(folded) > 60:
        return False
    return folded in _HEADINGS or _COUNTED_RE.match(folded) is not None


def furniture_line(text: str) -> bool:
    """Whether a small block is a line of page furniture (a label-led teaser or tag list,
    a sharing bar, an ad label, a shop's price or shipping line, a rating widget)."""
    if len(text) > MAX_FURNITURE_CHARS:
        return False
    folded = _fold(text)
    if not folded:
        return False
    if folded in _ADS:
        return True
    label, colon, _ = folded.partition(":")
    if colon and label.strip(_TRIM) in _LABELS:
        return True
    words = re.findall(r"[\w-]+", folded)
    networks = sum(word in _NETWORKS for word in words)
    if networks >= 2 and networks * 3 >= len(words) and any(w in _SERVICES for w in words):
        return True
    if _SHOP_RE.search(folded):
        return True
    if _PRICE_RE.search(folded) and len(re.findall(r"[^\W\d]{2,}", _PRICE_RE.sub("", folded))) <= 1:
        return True  # a price alone ("€ 49,90 € 59,90"), not a figure in a sentence
    if len(folded) < 120 and _NEWSLETTER_RE.search(folded):
        return True
    if len(words) <= 8 and _BYLINE_RE.match(folded) and _BYLINE_DATE_RE.search(folded):
        return True  # "By Sam Rivera · 12 March 2026"
    return _RATING_RE.search(folded) is not None
