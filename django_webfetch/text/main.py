"""Main-content detection: which part of a parsed page is the article, and what in it is not.

The field's established methods, on the tree the bounded pipeline built:

* text and link density of every element, in one pass (readability, jusText);
* paragraph scores (length, commas) handed up to the ancestors with a decay, weighted by tag
  and by the ``class``/``id`` words the pre-scan condensed into one ``wf`` weight
  (:mod:`.hints`), and scaled by the share of text that is not link text (readability);
* ``<main>``, ``<article>``, ``role="main"`` and ``role="article"``: the best candidate grows
  to the article or main element around it, so its headline, standfirst and notes come along;
* siblings of the best candidate that score well, or hold the headline, join it;
* inside what was chosen, boilerplate is pruned: consent and cookie banners, menus, link
  lists (related links, tags), comment sections, sharing and newsletter boxes, small forms.

Every pass is linear in the number of elements: one walk, one reverse walk, and a pruning
walk that skips pruned subtrees by their size.  ``select`` returns None when nothing
convincing was found; the caller then renders the whole page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from xml.etree.ElementTree import Element

from .furniture import MAX_FURNITURE_CHARS, furniture_heading, furniture_line
from .hints import (
    ARTICLE,
    BOILERPLATE,
    CLASS_ATTRIBUTE,
    CONSENT,
    CONTENT,
    HINT_ATTRIBUTE,
    words,
)

__all__ = ["MIN_MAIN_CHARS", "Selection", "select"]

#: A selection with fewer characters of text than this is not convincing.
MIN_MAIN_CHARS = 250

#: Never content (the renderer drops them too).
SKIPPED = _SKIPPED = words(
    "script style noscript template head nav aside iframe svg canvas button select title"
    " object embed dialog input textarea option"
)
#: Blocks whose text is scored as a paragraph.
_PARAGRAPHS = frozenset({"p", "pre", "blockquote", "dd", "li"})
#: Containers that score a paragraph from their own (not nested) text: a table cell of a
#: layout table with its text between ``<br>`` is the candidate, not its row.
_TEXT_CONTAINERS = frozenset(
    {"div", "section", "article", "main", "span", "font", "center", "td", "form"}
)
_TAG_WEIGHT = {
    "div": 5,
    "article": 10,
    "main": 10,
    "section": 3,
    "pre": 3,
    "td": 3,
    "blockquote": 3,
    "address": -3,
    "ol": -3,
    "ul": -3,
    "dl": -3,
    "dd": -3,
    "dt": -3,
    "li": -3,
    "form": -3,
    "header": -3,
    "footer": -10,
    "h1": -5,
    "h2": -5,
    "h3": -5,
    "h4": -5,
    "h5": -5,
    "h6": -5,
    "th": -5,
}
#: Link-dense blocks of these kinds are pruned inside the content (link lists, tag clouds).
_LINK_LIST_BLOCKS = frozenset({"ul", "ol", "menu", "dl", "div", "section", "table", "footer"})
#: Blocks whose text is checked for a cookie notice.
_NOTICE_BLOCKS = frozenset({"div", "section", "aside", "p", "footer", "header", "form", "span"})
_NOTICE_CHARS = 800
_COOKIE_WORDS = ("cookie", "gdpr", "consent")
#: Beside a cookie word, a notice has one of these (an article about baking cookies that
#: "everyone will accept" has not).
_NOTICE_WORDS = (
    "consent",
    "privacy",
    "partners",
    "personal data",
    "we use",
    "uses cookies",
    "use cookies",
    "use of cookies",
    "accept all",
    "accept cookies",
    "cookie policy",
    "cookie settings",
    "datenschutz",
    "einwillig",
    "verwenden cookies",
    "akzeptieren",
    "utilisons des cookies",
    "accepter",
    "utilizamos cookies",
    "usamos cookies",
    "aceptar",
    "utilizza cookie",
    "accetta",
    "używamy plików cookie",
    "gebruiken cookies",
    "akkoord",
)
_COMMAS = (",", "\uff0c", "\u3001", "\u060c")
_HEADINGS = frozenset({"h1"})
#: Characters of its own text a wrapper may add to the candidate and still be a wrapper
#: (an "Advertisement" label).
_WRAPPER_SLACK = 40
#: A fieldset with less text than this is a group of form controls.
_FIELDSET_CHARS = 200
_HEADING_LEVELS = {f"h{level}": level for level in range(1, 7)}
#: Containers that a furniture heading as their first child makes furniture.
_FURNITURE_CONTAINERS = frozenset(
    {"div", "section", "aside", "footer", "header", "ul", "ol", "dl", "details", "form", "nav"}
)
#: Blocks whose text is read for a line of furniture.
_FURNITURE_BLOCKS = frozenset(
    {"div", "section", "aside", "p", "footer", "header", "ul", "ol", "span", "small", "figure"}
)
#: A block with more elements than this is not read for furniture (it is not a line).
_FURNITURE_ELEMENTS = 64


@dataclass
class Selection:
    """What to render: ``roots`` in document order, without the ``pruned`` elements."""

    roots: list[Element]
    pruned: set[Element]
    chars: int


def _weight(element: Element) -> int:
    value = element.get(HINT_ATTRIBUTE)
    if value is None:
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def hidden(element: Element) -> bool:
    """``hidden`` or ``aria-hidden="true"``: not shown, not content."""
    return _hidden(element)


def _hidden(element: Element) -> bool:
    return (
        element.get("hidden") is not None
        or element.get("aria-hidden", "").strip().lower() == "true"
    )


class _Page:
    """Per-element figures, indexed in document (pre-)order."""

    def __init__(self, root: Element) -> None:
        nodes: list[Element] = []
        names: list[str] = []
        parents: list[int] = []
        chars: list[int] = []
        own: list[int] = []
        commas: list[int] = []
        stack: list[tuple[Element, int]] = [(root, -1)]
        while stack:
            element, parent = stack.pop()
            tag: object = element.tag
            if not isinstance(tag, str):
                continue
            name = tag.rpartition("}")[2]
            if name in _SKIPPED or _hidden(element):
                continue
            index = len(nodes)
            nodes.append(element)
            names.append(name)
            parents.append(parent)
            text = (element.text or "").strip()
            size = len(text)
            count = sum(text.count(comma) for comma in _COMMAS) if size else 0
            for child in element:
                tail = child.tail
                if tail:
                    tail = tail.strip()
                    size += len(tail)
                    if tail:
                        count += sum(tail.count(comma) for comma in _COMMAS)
            own.append(size)
            chars.append(size)
            commas.append(count)
            stack.extend((child, index) for child in reversed(element))
        total = len(nodes)
        links = [0] * total
        sizes = [1] * total
        headline = [False] * total
        for index in range(total - 1, -1, -1):
            name = names[index]
            if name == "a":
                links[index] = chars[index]
            elif name in _HEADINGS:
                headline[index] = True
            parent = parents[index]
            if parent >= 0:
                chars[parent] += chars[index]
                links[parent] += links[index]
                commas[parent] += commas[index]
                sizes[parent] += sizes[index]
                headline[parent] = headline[parent] or headline[index]
        self.nodes = nodes
        self.names = names
        self.parents = parents
        self.chars = chars
        self.own = own
        self.commas = commas
        self.links = links
        self.sizes = sizes
        self.headline = headline

    def density(self, index: int) -> float:
        chars = self.chars[index]
        return self.links[index] / chars if chars else 0.0


def _scores(page: _Page) -> dict[int, float]:
    """Readability's candidate scores: paragraphs hand their score up to five ancestors."""
    scores: dict[int, float] = {}
    names = page.names
    parents = page.parents
    for index, name in enumerate(names):
        if name in _PARAGRAPHS:
            chars = page.chars[index]
        elif name in _TEXT_CONTAINERS:
            chars = page.own[index]
        else:
            continue
        if chars < 25:
            continue
        score = 1.0 + min(page.commas[index], 20) + min(chars // 100, 3)
        ancestor = parents[index] if name in _PARAGRAPHS else index
        level = 0
        while ancestor >= 0 and level < 5:
            if ancestor not in scores:
                scores[ancestor] = _TAG_WEIGHT.get(names[ancestor], 0) + _class_score(
                    page.nodes[ancestor]
                )
            scores[ancestor] += score / (1 if level == 0 else 2 if level == 1 else level * 3)
            ancestor = parents[ancestor]
            level += 1
    for index in scores:
        scores[index] *= 1.0 - page.density(index)
    return scores


def _class_score(element: Element) -> int:
    weight = _weight(element)
    if weight >= ARTICLE:
        return 2 * CONTENT
    if weight <= CONSENT:
        return 2 * BOILERPLATE
    if weight <= BOILERPLATE:
        return -CONTENT
    return CONTENT if weight >= CONTENT else -CONTENT // 2 if weight < 0 else 0


def _semantic(page: _Page, index: int) -> bool:
    return page.names[index] in ("article", "main") or _weight(page.nodes[index]) >= ARTICLE


def _contains(page: _Page, outer: int, inner: int) -> bool:
    return outer <= inner < outer + page.sizes[outer]


def select(root: Element) -> Selection | None:
    """The main content under ``root``, or None when nothing convincing was found.

    When the scores find nothing convincing (too little text), the page's ``<main>``
    element is the main content all the same, however short, when it holds at least two
    blocks of text (paragraphs, headings, list items): the page says where its content is,
    and two short paragraphs are a page's main content too."""
    page = _Page(root)
    if not page.nodes:
        return None
    chosen = _select(page)
    return chosen if chosen is not None else _landmark(page)


#: Blocks of text a short ``<main>`` holds at least to be the main content.
_LANDMARK_BLOCKS = 2
_TEXT_BLOCKS = _PARAGRAPHS | _HEADING_LEVELS.keys()


def _landmark(page: _Page) -> Selection | None:
    """The page's one ``<main>`` element (its outermost), without its boilerplate, when it
    holds two blocks of text or more and that text is not mostly link text."""
    found = [index for index, name in enumerate(page.names) if name == "main"]
    if not found or any(not _contains(page, found[0], index) for index in found):
        return None  # none, or several apart: the page does not say which
    top = found[0]
    pruned = prune(page, [top], top)
    kept = page.chars[top] - sum(page.chars[index] for index in pruned)
    links = page.links[top] - sum(page.links[index] for index in pruned)
    blocks = 0
    index = top + 1
    end = top + page.sizes[top]
    gone = set(pruned)
    while index < end:
        if index in gone:
            index += page.sizes[index]
            continue
        if page.names[index] in _TEXT_BLOCKS and page.chars[index]:
            blocks += 1
        index += 1
    if blocks < _LANDMARK_BLOCKS or links > kept * 0.5:
        return None
    return Selection([page.nodes[top]], {page.nodes[index] for index in pruned}, kept)


def _select(page: _Page) -> Selection | None:
    scores = _scores(page)
    if not scores:
        return None
    ranked = sorted(scores, key=lambda index: (-scores[index], index))[:5]
    top = ranked[0]
    chars = page.chars
    # Several candidates that score like the best one (forum posts, a page of sections):
    # their nearest common ancestor is the content (readability's alternative candidates).
    alternatives = [index for index in ranked[1:] if scores[index] >= 0.75 * scores[top]]
    moved = False
    if len(alternatives) >= 3:
        # The nearest ancestor (within six levels) that holds the most of them, at least 3.
        best, most = top, 2
        ancestor = page.parents[top]
        for _ in range(6):
            if ancestor < 0:
                break
            held = sum(_contains(page, ancestor, index) for index in alternatives)
            if held > most:
                best, most = ancestor, held
            ancestor = page.parents[ancestor]
        if best != top:
            top = _lift(scores, best, top)
            moved = True
    if not moved:
        top = _descend(page, scores, top)
    core = top
    # Grow to the <article>/<main> around the candidate (its headline, standfirst, notes),
    # unless that element holds much more than the candidate (a whole-page wrapper).
    ancestor = top
    for _ in range(8):
        if ancestor < 0:
            break
        if _semantic(page, ancestor):
            if chars[ancestor] <= 3 * chars[top] + 500:
                top = _lift(scores, ancestor, top)
            break
        ancestor = page.parents[ancestor]
    # A candidate wrapped in elements that add (almost) no text of their own (div soup:
    # ``<div><div><p>...``): its siblings are the wrapper's, where the headline and the
    # standfirst sit beside the body.
    while not page.headline[top] and not _semantic(page, top):
        parent = page.parents[top]
        if (
            parent < 0
            or page.names[parent] in ("body", "html")
            or chars[parent] > chars[top] + _WRAPPER_SLACK
        ):
            break
        top = _lift(scores, parent, top)
    if not _semantic(page, top):
        top = _document(page, scores, top)
    roots = _siblings(page, scores, top)
    selected = sum(chars[index] for index in roots)
    least = _least_chars(page, top)
    if selected < least:
        # A short candidate with others like it (a question and two answers): their
        # nearest common ancestor.
        others = [index for index in ranked[1:] if scores[index] >= 0.5 * scores[ranked[0]]]
        ancestor = page.parents[core]
        for _ in range(6):
            if ancestor < 0:
                break
            if sum(_contains(page, ancestor, index) for index in others) >= 2:
                core = top = _lift(scores, ancestor, top)
                roots = _siblings(page, scores, top)
                selected = sum(chars[index] for index in roots)
                break
            ancestor = page.parents[ancestor]
    if selected < least:
        return None
    pruned = prune(page, roots, _inner(page, scores, core))
    kept = selected - sum(chars[index] for index in pruned)
    links = sum(page.links[index] for index in roots) - sum(page.links[i] for i in pruned)
    # Too little text, or mostly link text (a list of links is not an article).
    if kept < least or links > kept * 0.5:
        return None
    return Selection([page.nodes[index] for index in roots], {page.nodes[i] for i in pruned}, kept)


_DENSE_SCRIPTS = re.compile("[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _least_chars(page: _Page, top: int) -> int:
    """:data:`MIN_MAIN_CHARS`, or two fifths of it for text mostly in Chinese, Japanese or
    Korean, whose characters say about as much as two or three Latin letters (the first
    400 characters of the candidate decide)."""
    sample = []
    size = 0
    for chunk in page.nodes[top].itertext():
        sample.append(chunk)
        size += len(chunk)
        if size >= 400:
            break
    text = "".join(sample)[:400]
    dense = len(_DENSE_SCRIPTS.findall(text))
    return MIN_MAIN_CHARS * 2 // 5 if dense * 2 > len(text.replace(" ", "")) else MIN_MAIN_CHARS


def _document(page: _Page, scores: dict[int, float], top: int) -> int:
    """A candidate that is one part of a document (a section of a manual page, of an API
    reference) gives way to the document: the parent, while what the parent adds beside
    the candidate is text, not links (less than a tenth link text, not counting the link
    lists pruning drops, such as a chapter's table of contents), adds at most twice the
    candidate, and says nothing of boilerplate."""
    for _ in range(6):
        parent = page.parents[top]
        if (
            parent < 0
            or page.names[parent] in ("body", "html")
            or _weight(page.nodes[parent]) <= BOILERPLATE
        ):
            break
        extra = links = 0
        child = parent + 1
        end = parent + page.sizes[parent]
        while child < end:
            if child == top:
                pass
            elif page.density(child) <= 0.55:
                extra += page.chars[child]
                links += page.links[child]
            elif page.names[top] in ("td", "th"):
                links = extra = -1  # the content cell beside a layout table's menu column
                break
            child += page.sizes[child]
        if extra < 0:
            break
        extra += page.own[parent]
        if links >= 0.1 * max(extra, 1) or extra > 2 * page.chars[top] + 200:
            break
        top = _lift(scores, parent, top)
    return top


def _lift(scores: dict[int, float], to: int, source: int) -> int:
    """Make ``to`` (an ancestor of the candidate ``source``) the candidate: it stands in
    for ``source`` and scores at least as well.

    Every element :func:`select` picks passes through here or is a scored candidate, so
    the later steps (:func:`_siblings`, :func:`_inner`) always find a score for it: an
    ancestor more than five levels above every paragraph (scores go up five levels) has
    none of its own (issue 21: ``KeyError`` on 6 of 1,170 real pages).
    """
    scores[to] = max(scores.get(to, scores[source]), scores[source])
    return to


def _inner(page: _Page, scores: dict[int, float], core: int) -> int:
    """What pruning must keep: ``core``, or when ``core`` is a ``<main>``/``<article>`` (or
    ``role="main"``) that won on its hint, the best candidate inside it, so that a layout
    wrapper between the two whose class says ``print``, ``aside`` or ``widget``
    (``govuk-grid-row gem-print-columns-none``) is not pruned with the text it holds.

    A candidate inside page furniture (a comment thread under its "3 comments" heading)
    is not that best candidate: the next one is tried (five at most)."""
    if not _semantic(page, core):
        return core
    end = core + page.sizes[core]
    inside = sorted(
        (index for index in scores if core < index < end and not _semantic(page, index)),
        key=lambda index: (-scores[index], index),
    )
    for index in inside[:5]:
        ancestor = index
        while ancestor > core and not _furniture_block(page, ancestor):
            ancestor = page.parents[ancestor]
        if ancestor == core:
            return index
    return core


def _descend(page: _Page, scores: dict[int, float], top: int) -> int:
    """A child that scores nearly as well as the candidate replaces it: the candidate is a
    wrapper whose class word (``main``, ``content``) lifted it above the text it holds,
    along with teasers and comments beside that text."""
    while True:
        child = top + 1
        end = top + page.sizes[top]
        best = -1
        while child < end:
            if child in scores and (best < 0 or scores[child] > scores[best]):
                best = child
            child += page.sizes[child]
        # The candidate's score without what its class word added.
        own = scores[top] - max(_class_score(page.nodes[top]), 0) * (1.0 - page.density(top))
        if best < 0 or scores[best] < 0.8 * own:
            return top
        top = best


def _siblings(page: _Page, scores: dict[int, float], top: int) -> list[int]:
    """The candidate and the siblings that belong with it, in document order.

    Readability's rules (a sibling that scores well, a plain paragraph), plus: the siblings
    from the one holding the headline (``h1``) down to the candidate (headline, standfirst,
    byline), and siblings of the candidate's own kind that score like it (forum posts,
    comment-free article sections).
    """
    parent = page.parents[top]
    if parent < 0 or _semantic(page, top):
        return [top]
    names = page.names
    threshold = max(10.0, scores[top] * 0.35)
    alike = scores[top] * 0.5
    children: list[int] = []
    child = parent + 1
    end = parent + page.sizes[parent]
    while child < end:
        children.append(child)
        child += page.sizes[child]
    start = children.index(top)
    if not page.headline[top]:
        for position in range(start - 1, max(start - 6, -1), -1):
            if page.headline[children[position]]:
                start = position
                break
    kind = page.nodes[top].get(CLASS_ATTRIBUTE)
    roots: list[int] = []
    for position, child in enumerate(children):
        if child == top:
            roots.append(child)
            continue
        if _weight(page.nodes[child]) <= BOILERPLATE or _furniture_block(page, child):
            continue
        density = page.density(child)
        chars = page.chars[child]
        score = scores.get(child, 0.0)
        if (
            score >= threshold
            or (names[child] == names[top] and score >= alike and density < 0.5)
            # Sections of one kind (div.refsect1, table.section, or of one tag each under
            # its own heading): a document's parts.
            or (
                names[child] == names[top]
                and density < 0.25
                and _opens_with_heading(page, child)
                and _opens_with_heading(page, top)
            )
            or (
                kind is not None
                and density < 0.5
                and page.nodes[child].get(CLASS_ATTRIBUTE) == kind
                and names[child] == names[top]
                and chars > 0
            )
            or (names[child] == "p" and chars > 80 and density < 0.25)
            or (position == start and child < top and page.headline[child])
            or (position > start and child < top and density < 0.5)
        ):
            roots.append(child)
    return roots


def prune(page: _Page, roots: list[int], core: int) -> list[int]:
    """Elements under ``roots`` that are boilerplate, outermost first.

    An element that holds ``core`` (the best candidate) is never pruned, whatever its class
    says (``has-sidebar`` on a wrapper), nor is anything that ``role="main"`` marks.
    """
    pruned: list[int] = []
    names = page.names
    chars = page.chars
    for root in roots:
        index = root + 1
        end = root + page.sizes[root]
        checked_to = -1  # the end of the last block checked for a cookie notice
        while index < end:
            name = names[index]
            element = page.nodes[index]
            weight = _weight(element)
            size = chars[index]
            drop = False
            if name in ("pre", "code", "kbd", "samp"):
                # Code is kept whole: its highlighting classes ("hljs-comment") are no hints.
                index += page.sizes[index]
                continue
            if weight >= ARTICLE or _contains(page, index, core):
                pass
            elif weight <= BOILERPLATE:
                drop = True
            elif name in _LINK_LIST_BLOCKS and size and not page.headline[index]:
                # (A block that holds the headline is no link list, even when the headline
                # is a link to the page itself.)
                density = page.density(index)
                drop = density > 0.55 or (name == "footer" and density > 0.3)
            elif name == "td" and size > 200:
                # The navigation column of a layout table.
                drop = page.density(index) > 0.55
            elif name == "form" or name == "label":
                drop = True
            elif name == "fieldset":
                # Form controls outside a <form> (a shop's variant and quantity pickers); a
                # fieldset that holds a page's text (old ASP.NET layouts) stays.
                drop = size < _FIELDSET_CHARS
            elif name == "p" and size < 100 and page.density(index) > 0.9:
                # "Read more: <a>another story</a>" between the paragraphs (a headline, not a
                # one-word reference such as a type name in API docs).
                drop = len("".join(element.itertext()).split()) >= 3
            elif _furniture_heading(page, index) and page.parents[index] >= root:
                # A furniture heading among the article's blocks: it and its section.
                section = _furniture_section(page, index, core)
                pruned.extend(section)
                index = section[-1] + page.sizes[section[-1]]
                continue
            if not drop and not _contains(page, index, core) and weight < ARTICLE:
                drop = _furniture_block(page, index)
            if (
                not drop
                and index >= checked_to
                and name in _NOTICE_BLOCKS
                and 0 < size < _NOTICE_CHARS
                and not _contains(page, index, core)
            ):
                checked_to = index + page.sizes[index]
                drop = _cookie_notice(element)
            if drop:
                pruned.append(index)
                index += page.sizes[index]
            else:
                index += 1
    return pruned


def _cookie_notice(element: Element) -> bool:
    text = " ".join(element.itertext()).lower()
    return any(word in text for word in _COOKIE_WORDS) and any(
        word in text for word in _NOTICE_WORDS
    )


def _text(element: Element) -> str:
    return " ".join("".join(element.itertext()).split())


def _furniture_heading(page: _Page, index: int) -> bool:
    """Whether element ``index`` is a short heading that opens page furniture."""
    return (
        page.names[index] in _HEADING_LEVELS
        and page.chars[index] <= 60
        and page.sizes[index] <= 16
        and furniture_heading(_text(page.nodes[index]))
    )


def _furniture_block(page: _Page, index: int) -> bool:
    """Whether element ``index`` is a block of page furniture: a container whose first
    child is a furniture heading, or a small block whose text is a line of furniture."""
    name = page.names[index]
    child = index + 1
    if (
        name in _FURNITURE_CONTAINERS
        and child < index + page.sizes[index]
        and page.parents[child] == index
        and _furniture_heading(page, child)
    ):
        return True
    return (
        name in _FURNITURE_BLOCKS
        and not page.headline[index]
        and 0 < page.chars[index] <= MAX_FURNITURE_CHARS
        # A paragraph of more than 150 characters without a link is read no further.
        and (page.chars[index] < 150 or page.links[index] > 0)
        and page.sizes[index] <= _FURNITURE_ELEMENTS
        and furniture_line(_text(page.nodes[index]))
    )


def _opens_with_heading(page: _Page, index: int) -> bool:
    child = index + 1
    return (
        child < index + page.sizes[index]
        and page.parents[child] == index
        and page.names[child] in _HEADING_LEVELS
    )


def _furniture_section(page: _Page, heading: int, core: int) -> list[int]:
    """A furniture heading among its siblings (no container of its own), and the siblings
    after it up to the next heading of its level or higher: its section."""
    level = _HEADING_LEVELS[page.names[heading]]
    parent = page.parents[heading]
    end = parent + page.sizes[parent]
    section = [heading]
    sibling = heading + page.sizes[heading]
    while sibling < end:
        name = page.names[sibling]
        if (name in _HEADING_LEVELS and _HEADING_LEVELS[name] <= level) or _contains(
            page, sibling, core
        ):
            break
        section.append(sibling)
        sibling += page.sizes[sibling]
    return section


def consent_notices(root: Element) -> set[Element]:
    """Cookie and consent banners anywhere under ``root`` (for the whole-page mode)."""
    page = _Page(root)
    if not page.nodes:
        return set()
    pruned: list[int] = []
    index = 0
    total = len(page.nodes)
    checked_to = -1
    while index < total:
        element = page.nodes[index]
        size = page.chars[index]
        drop = _weight(element) <= CONSENT and size < max(page.chars[0] * 0.5, 200)
        if (
            not drop
            and index >= checked_to
            and page.names[index] in _NOTICE_BLOCKS
            and 0 < size < min(_NOTICE_CHARS, page.chars[0] * 0.5)
        ):
            checked_to = index + page.sizes[index]
            drop = _cookie_notice(element)
        if drop:
            pruned.append(index)
            index += page.sizes[index]
        else:
            index += 1
    # A page that is mostly a consent notice is a consent wall: that is what it says.
    if sum(page.chars[index] for index in pruned) * 2 > page.chars[0]:
        return set()
    return {page.nodes[index] for index in pruned}
