"""What an element's ``class``, ``id`` and ``role`` say about it: content or boilerplate.

The pre-scan reads these attributes and hands the parser one small ``wf`` attribute with the
sum of their weights instead of the attributes themselves (class lists are long, and the
parser input is bounded).  The names are those that readability, trafilatura and jusText
look for.  Linear: each value is cut to :data:`MAX_HINT_CHARS`, split once into words, and
each word is looked up in sets or matched against a fixed number of substrings.  Results are
cached (class lists repeat on a page): the pre-scan cuts values first, so a key is short.
"""

from __future__ import annotations

import html
import zlib
from functools import lru_cache

__all__ = [
    "BOILERPLATE",
    "CLASS_ATTRIBUTE",
    "class_hint",
    "class_key",
    "CONSENT",
    "HINT_ATTRIBUTE",
    "MAIN",
    "MAX_HINT_CHARS",
    "hint_weight",
    "is_menu",
    "words",
]

#: The attribute the pre-scan writes (the sum of the weights below).
HINT_ATTRIBUTE = "wf"
#: The attribute the pre-scan writes for a class list: a short key of its value, so that
#: elements of one kind (``div.refsect1``, ``table.section``) can be told alike.
CLASS_ATTRIBUTE = "wk"
#: Only the first characters of a class list or id are read.
MAX_HINT_CHARS = 256

#: role="main" (and role="article"): the page says where its content is.
MAIN = 10_000
ARTICLE = 5_000
#: Cookie, consent and privacy banners.
CONSENT = -1_000
#: Navigation, sharing, comments, related links, ads, sidebars, newsletter boxes.
BOILERPLATE = -50
#: Words that name content: article, post, entry, story, body...
CONTENT = 25

_ROLES = {"main": MAIN, "article": ARTICLE}


def words(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` (the lexicons of text/ are written so)."""
    return frozenset(text.split())


_SEPARATORS = str.maketrans(dict.fromkeys("-_.:/[]()#@!,;{}=+*", " "))

#: Whole words (after splitting at ``-``, ``_``, spaces...).
_CONSENT_WORDS = words(
    "cookie cookies consent gdpr cmp ccpa onetrust didomi usercentrics cookiebot truste"
    " cookielaw qc sp_message osano iubenda borlabs complianz"
)
#: Substrings that are never part of an ordinary word.
_CONSENT_PARTS = ("cookie", "consent", "gdpr", "onetrust", "didomi", "usercentrics")

_MENU_WORDS = words(
    "nav navbar navigation navigations menu menus megamenu submenu dropdown breadcrumb"
    " breadcrumbs topbar toc skip skiplink skiplinks jump"
)
_BOILERPLATE_WORDS = words(
    "share sharing sharebar social socials newsletter subscribe subscription signup"
    " ad ads adv advert adverts advertisement advertising sponsor sponsored promo promos"
    " promotion related recommended recommendations recommend outbrain taboola comment"
    " comments disqus replies sidebar aside rail footer masthead widget widgets popup modal"
    " overlay toolbar pagination pager tags tagcloud trending popular"
    " mostread follow login account ticker signature profile postprofile userinfo"
    " avatar action actions noprint editsection catlinks printfooter stat online feedback"
    " byline bylines dateline timestamp linenos linenodiv lineno linenumbers"
)
_BOILERPLATE_PARTS = (
    "sidebar",
    "newsletter",
    "breadcrumb",
    "advert",
    "comment",
    "related",
    # Author boxes after the article (Astra, GeneratePress, Jannah, Newspaper...).
    "author box",
    "authorbox",
    "author bio",
    "authorbio",
    "about author",
    "about the author",
    # "print" names a print button or link; alone it is a layout modifier
    # (``gem-print-columns-none``, ``d-print-block``).
    "print link",
    "print button",
    "print page",
    "print this",
    # "Was this article helpful?" (help centres: Zendesk, Intercom, Freshdesk).
    "article vote",
    # The byline and date row under a headline (WordPress themes, news CMSs).
    "entry meta",
    "post meta",
    "article meta",
    "helpful",
)
_CONTENT_WORDS = words(
    "article articles articlebody content contents entry post posts story body text prose"
    " markdown blog hentry main rich richtext recipe instructions ingredients"
    " product description documentation docs doc"
)


@lru_cache(maxsize=4096)
def class_key(raw: str) -> str:
    """A short key of a ``class`` value (20 bits of its CRC-32, in hex)."""
    value = " ".join(raw[:MAX_HINT_CHARS].split())
    return format(zlib.crc32(value.encode("utf-8", "replace")) & 0xFFFFF, "x")


@lru_cache(maxsize=4096)
def class_hint(raw: str) -> tuple[int, int]:
    """For a ``class`` or ``id`` value as written in the page (character references not yet
    decoded): its weight, and 1 if it names a menu for any element, plus 2 if it names a
    menu for a list (see :func:`is_menu`)."""
    value = html.unescape(raw)
    return hint_weight("class", value), int(is_menu(value, strict=True)) | (2 * is_menu(value))


def _value_words(value: str) -> list[str]:
    return value[:MAX_HINT_CHARS].lower().translate(_SEPARATORS).split()


@lru_cache(maxsize=4096)
def hint_weight(attribute: str, value: str) -> int:
    """The weight of one ``class``, ``id`` or ``role`` value (0 when it says nothing)."""
    if attribute == "role":
        return _ROLES.get(value.strip().lower(), 0)
    words = _value_words(value)
    if not words:
        return 0
    joined = " ".join(words)
    if any(word in _CONSENT_WORDS for word in words) or any(
        part in joined for part in _CONSENT_PARTS
    ):
        return CONSENT
    if any(word in _MENU_WORDS for word in words):
        return BOILERPLATE
    if any(word in _BOILERPLATE_WORDS for word in words) or any(
        part in joined for part in _BOILERPLATE_PARTS
    ):
        # "related-posts", "article-comments": the boilerplate word wins.
        return BOILERPLATE
    return CONTENT if any(word in _CONTENT_WORDS for word in words) else 0


@lru_cache(maxsize=4096)
def is_menu(value: str, *, strict: bool = False) -> bool:
    """Whether a class list or id names a menu (and nothing that could wrap the page).

    ``strict``: every word is a menu word or one that qualifies a menu (``main-menu``,
    ``site-nav``); for elements such as ``div`` that wrap whole pages as often as menus.
    """
    words = _value_words(value)
    if not any(word in _MENU_WORDS for word in words):
        return False
    if strict:
        return all(word in _MENU_WORDS or word in _MENU_QUALIFIERS for word in words)
    return not any(
        word in _WRAPPER_WORDS or (word in _CONTENT_WORDS and word != "main") for word in words
    )


_WRAPPER_WORDS = words(
    "wrap wrapper container page site layout open active has with inner outer js no grid for"
    " content"
)
_MENU_QUALIFIERS = words(
    "main mega site top primary secondary global mobile desktop header sub utility list items"
    " item bar links"
)
