"""The composition root (DESIGN.md §1): the one module that wires the layers together.

``ready()`` registers every package's system checks (the checks modules only define them),
connects the signals, adds the plugins' tools to the tool registry as a source, gives the
plugin rows their host-owned client, and creates the built-in groups after ``migrate``.
Nothing imports this module; it may import any layer.
"""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WebFetchConfig(AppConfig):
    name = "django_webfetch"
    label = "django_webfetch"
    verbose_name = _("Web fetch")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.checks import Tags
        from django.core.checks import register as register_check
        from django.db.models.signals import post_migrate

        from .assistant.checks import check_assistant
        from .assistant.services import connect_signals
        from .checks import CHECKS
        from .models.builtin import create_builtin_groups
        from .plugins.client import PluginHttp
        from .plugins.models import PluginInstance
        from .plugins.tools import registry_source
        from .tools.registry import default_registry

        for check, tags in CHECKS:
            register_check(*tags)(check)
        register_check(Tags.compatibility, Tags.database)(check_assistant)
        PluginInstance.client_factory = PluginHttp
        default_registry.add_source("plugins", registry_source)
        connect_signals()
        post_migrate.connect(
            create_builtin_groups, sender=self, dispatch_uid="django_webfetch.builtin_groups"
        )
