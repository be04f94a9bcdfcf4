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
        from django.db.models.signals import post_migrate

        from django_webfetch.models.builtin import register_builtin_group

        from . import checks as cms_checks
        from . import notify
        from .tools import CONTENT_GROUP, create_content_group

        # ``content`` is a built-in group: no plugin tool may join it.
        register_builtin_group(CONTENT_GROUP)
        checks.register(cms_checks.check_cms_installed, checks.Tags.compatibility)
        checks.register(cms_checks.check_approver_mail, checks.Tags.compatibility)
        checks.register(
            cms_checks.check_site_domain, checks.Tags.compatibility, checks.Tags.database
        )
        notify.connect()
        # This app has no models (so no post_migrate of its own): the group is created
        # after django_webfetch's, like the built-in groups.
        post_migrate.connect(create_content_group, dispatch_uid="django_webfetch.cms.group")
