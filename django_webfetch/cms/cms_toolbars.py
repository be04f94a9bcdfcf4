"""The django CMS toolbar: an "Assistant" menu ("Open the assistant", "Ask about this
page") and two live badges: for approvers, the calls waiting for their approval; for
editors, their runs that finished after a pause and that they have not seen yet.

The badges are rendered with the page and then kept current by ``toolbar.js``, which reads
``webfetch_cms:status`` (the same counts the approval cards come from) every few seconds
and whenever the assistant page announces a change.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from cms.toolbar.items import RIGHT, TemplateItem
from cms.toolbar_base import CMSToolbar
from cms.toolbar_pool import toolbar_pool
from django.templatetags.static import static
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from .views import counts

MENU_ID = "webfetch-assistant"
BADGES_TEMPLATE = "django_webfetch/cms/toolbar_badges.html"


def approvals_label(count: int) -> str:
    return ngettext(
        "%(count)d call waits for your approval",
        "%(count)d calls wait for your approval",
        count,
    ) % {"count": count}


def answers_label(count: int) -> str:
    return ngettext(
        "%(count)d answer arrived after an approval",
        "%(count)d answers arrived after an approval",
        count,
    ) % {"count": count}


def badges_context(user: Any, url: str) -> dict[str, Any]:
    numbers = counts(user)
    return {
        "assistant_url": url,
        "status_url": reverse("webfetch_cms:status"),
        "script": static("django_webfetch/cms/toolbar.js"),
        "approvals": numbers["approvals"],
        "answers": numbers["answers"],
        "approvals_label": approvals_label(numbers["approvals"] or 0),
        "answers_label": answers_label(numbers["answers"]),
        # The script picks one of two forms (the languages shipped have two).
        "approvals_forms": [approvals_label(1), approvals_label(2).replace("2", "%(count)d")],
        "answers_forms": [answers_label(1), answers_label(2).replace("2", "%(count)d")],
    }


@toolbar_pool.register
class AssistantToolbar(CMSToolbar):  # type: ignore[misc]
    def populate(self) -> None:
        user = self.request.user
        if not (user.is_authenticated and user.is_active):
            return
        try:
            url = reverse("webfetch_cms:assistant")
        except NoReverseMatch:
            return
        menu = self.toolbar.get_or_create_menu(MENU_ID, _("Assistant"))
        menu.add_link_item(_("Open the assistant"), url=url)
        page = getattr(self.request, "current_page", None)
        if page is not None and getattr(page, "pk", None) is not None:
            menu.add_link_item(
                _("Ask about this page"), url=f"{url}?{urlencode({'page': page.pk})}"
            )
        self.toolbar.add_item(
            TemplateItem(BADGES_TEMPLATE, extra_context=badges_context(user, url), side=RIGHT)
        )
