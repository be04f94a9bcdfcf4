"""The site's own django CMS pages, read through django CMS's API (no HTTP).

Only published content (``PageContent.objects``: with djangocms-versioning installed that
manager returns published versions only) of pages on the current site that the user may
view (``cms.utils.page_permissions.user_can_view_page``, plus a page's "login required").
A page's placeholders are rendered by django CMS's own ``ContentRenderer``, never by an HTTP
request, and the HTML becomes text through the app's text renderer under its caps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.sites.models import Site
from django.http import HttpRequest
from django.template import Context
from django.utils import translation

__all__ = ["MAX_LISTED_PAGES", "PageNotFound", "PageRef", "page_html", "visible_pages"]

#: ``list_pages`` names at most this many pages (the result stays bounded).
MAX_LISTED_PAGES = 200
#: Rendered HTML kept for text extraction (the text layer caps its parser input too).
MAX_PAGE_HTML_BYTES = 2 * 1024 * 1024


class PageNotFound(LookupError):
    """No such page on this site, not published, or not visible to the user (one answer
    for all three: nothing tells whether a page the user may not see exists)."""


@dataclass(frozen=True)
class PageRef:
    id: int
    title: str
    path: str
    language: str
    is_home: bool


def _language(language: str | None, site: Site) -> str:
    from cms.utils.i18n import get_language_list

    wanted = language or translation.get_language() or ""
    languages = get_language_list(site_id=site.pk)
    if wanted in languages:
        return wanted
    short = (wanted or "").split("-")[0]
    return short if short in languages else languages[0]


def _may_view(user: Any, page: Any, site: Site) -> bool:
    from cms.utils.page_permissions import user_can_view_page

    if user is None or not getattr(user, "is_active", False):
        return False
    if page.login_required and not getattr(user, "is_authenticated", False):
        return False
    return bool(user_can_view_page(user, page, site=site))


def _ref(page: Any, content: Any, language: str) -> PageRef:
    return PageRef(
        id=page.pk,
        title=str(content.title or "")[:200],
        path=str(page.get_absolute_url(language=language) or "/")[:500],
        language=language,
        is_home=bool(page.is_home),
    )


def _published(site: Site, language: str) -> list[tuple[Any, Any]]:
    from cms.models import PageContent

    contents = (
        PageContent.objects.filter(page__site=site, language=language)
        .select_related("page")
        .order_by("page__path")
    )
    return [(content.page, content) for content in contents]


def visible_pages(user: Any, *, language: str | None = None) -> tuple[list[PageRef], bool]:
    """The published pages of the current site that ``user`` may view, in tree order;
    the flag says whether the list was cut at ``MAX_LISTED_PAGES``."""
    site = Site.objects.get_current()
    lang = _language(language, site)
    refs: list[PageRef] = []
    for page, content in _published(site, lang):
        if not _may_view(user, page, site):
            continue
        if len(refs) == MAX_LISTED_PAGES:
            return refs, True
        refs.append(_ref(page, content, lang))
    return refs, False


def find_page(
    user: Any, *, page_id: int | None = None, path: str | None = None, language: str | None = None
) -> tuple[Any, Any, PageRef]:
    """``(page, page_content, ref)`` of a published, visible page of the current site."""
    from cms.models import PageContent

    site = Site.objects.get_current()
    lang = _language(language, site)
    contents = PageContent.objects.filter(page__site=site, language=lang).select_related("page")
    if page_id is not None:
        contents = contents.filter(page__pk=page_id)
    elif path is not None:
        wanted = path.strip("/")
        contents = contents.filter(page__urls__language=lang, page__urls__path=wanted)
    else:
        raise PageNotFound("no page given")
    content = contents.first()
    if content is None or not _may_view(user, content.page, site):
        raise PageNotFound("not found")
    return content.page, content, _ref(content.page, content, lang)


def _request(user: Any, page: Any, language: str) -> HttpRequest:
    """A request object for django CMS's renderer: never sent anywhere, it carries the
    user (plugins may depend on permissions), the page and the language."""
    from cms.toolbar.toolbar import CMSToolbar

    request = HttpRequest()
    request.method = "GET"
    request.path = request.path_info = page.get_absolute_url(language=language) or "/"
    request.META["SERVER_NAME"] = Site.objects.get_current().domain.split(":")[0] or "localhost"
    request.META["SERVER_PORT"] = "80"
    request.user = user
    request.LANGUAGE_CODE = language
    request.current_page = page  # type: ignore[attr-defined]
    request.session = {}  # type: ignore[assignment]
    request.toolbar = CMSToolbar(request)  # type: ignore[attr-defined]
    return request


def page_html(user: Any, page: Any, content: Any, language: str) -> str:
    """The HTML of a page's placeholders, rendered by django CMS (no template chrome, no
    toolbar, no edit markup)."""
    from cms.plugin_rendering import ContentRenderer

    request = _request(user, page, language)
    renderer = ContentRenderer(request)
    parts: list[str] = []
    size = 0
    with translation.override(language):
        for placeholder in content.get_placeholders().order_by("slot"):
            html = renderer.render_placeholder(
                placeholder,
                Context({"request": request}),
                language=language,
                page=page,
                editable=False,
            )
            parts.append(str(html))
            size += len(parts[-1])
            if size > MAX_PAGE_HTML_BYTES:
                break
    return "\n".join(parts)[:MAX_PAGE_HTML_BYTES]
