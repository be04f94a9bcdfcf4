from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WebFetchConfig(AppConfig):
    name = "django_webfetch"
    label = "django_webfetch"
    verbose_name = _("Web fetch")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from . import checks
        from .models.builtin import create_builtin_groups

        checks.register()
        from .assistant.providers import kind_choices
        from .models.hosts import set_provider_kind_source

        set_provider_kind_source(kind_choices)
        from .assistant.services import connect_signals

        connect_signals()
        post_migrate.connect(
            create_builtin_groups, sender=self, dispatch_uid="django_webfetch.builtin_groups"
        )
