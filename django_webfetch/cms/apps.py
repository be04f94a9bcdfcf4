from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WebFetchCmsConfig(AppConfig):
    name = "django_webfetch.cms"
    label = "webfetch_cms"
    verbose_name = _("django_webfetch for django CMS")
    default_auto_field = "django.db.models.BigAutoField"
    #: Found by the tool registry (``ToolRegistry.load``): the content tools of group
    #: ``content``, offered only once an admin enables that group.
    webfetch_tools = (
        "django_webfetch.cms.tools.ListPages",
        "django_webfetch.cms.tools.ReadPage",
    )

    def ready(self) -> None:
        from django.core import checks

        from . import checks as cms_checks
        from . import notify

        checks.register(cms_checks.check_cms_installed, checks.Tags.compatibility)
        checks.register(cms_checks.check_approver_mail, checks.Tags.compatibility)
        notify.connect()
