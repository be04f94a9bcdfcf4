"""The django CMS toolbar: an "Assistant" menu ("Open the assistant", "Ask about this
page") and, for approvers, a button counting the calls waiting for their approval."""

from __future__ import annotations

from urllib.parse import urlencode

from cms.toolbar.items import RIGHT
from cms.toolbar_base import CMSToolbar
from cms.toolbar_pool import toolbar_pool
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from django_webfetch import runs

from .approvals import waiting_count

MENU_ID = "webfetch-assistant"


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
        if user.has_perm(runs.APPROVE_PERMISSION):
            count = waiting_count(user)
            label = ngettext(
                "%(count)d call waits for your approval",
                "%(count)d calls wait for your approval",
                count,
            ) % {"count": count}
            self.toolbar.add_button(
                label,
                url=f"{url}#approvals",
                side=RIGHT,
                extra_classes=["webfetch-waiting"] + (["cms-btn-action"] if count else []),
            )
