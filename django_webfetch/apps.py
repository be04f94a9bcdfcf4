"""The composition root (DESIGN.md §1): the one module that wires the layers together.

``ready()`` registers every package's system checks (the checks modules only define them),
connects the signals, adds the plugins' tools to the tool registry as a source, gives the
plugin rows their host-owned client, and creates the built-in groups after ``migrate``.
Nothing imports this module; it may import any layer.
"""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WebFetchConfig(AppConfig):
    """The composition root: registers the checks, connects the signals and binds the
    task names to their handlers for the in-process mode (``runs.dispatch``)."""

    name = "django_webfetch"
    label = "django_webfetch"
    verbose_name = _("Web fetch")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.checks import Tags
        from django.core.checks import register as register_check
        from django.core.signals import request_started
        from django.db.models.signals import post_migrate

        from .assistant.checks import check_assistant, check_call_limits
        from .assistant.signals import connect_signals
        from .checks import CHECKS, warn_persistent_connections_under_asgi
        from .models.builtin import create_builtin_groups
        from .plugins import provenance
        from .plugins.client import PluginHttp
        from .plugins.models import PluginInstance
        from .plugins.registry import dependencies as plugin_dependencies
        from .plugins.registry import get_manifest, provider
        from .plugins.tools import offered_when_installed, registry_source
        from .runs.runner import start_serving
        from .tools.registry import default_registry

        for check, tags in CHECKS:
            register_check(*tags)(check)
        register_check(Tags.compatibility, Tags.database)(check_assistant)
        register_check(Tags.security)(check_call_limits)
        PluginInstance.client_factory = PluginHttp
        PluginInstance.manifest_lookup = get_manifest
        provenance.provider_lookup = provider
        provenance.dependencies_lookup = plugin_dependencies
        default_registry.add_source("plugins", registry_source, offered=offered_when_installed)
        from .assistant.providers import kind_choices
        from .models.hosts import set_provider_kind_source

        set_provider_kind_source(kind_choices)
        connect_signals()
        _connect_claims()
        _connect_oauth()
        _connect_metrics()
        _bind_task_handlers()
        _register_leased()
        # A serving process starts the background runner (it sweeps at once: a restarted
        # server takes up the runs its predecessor left); commands that serve nothing don't.
        request_started.connect(start_serving, dispatch_uid="django_webfetch.runner")
        request_started.connect(
            warn_persistent_connections_under_asgi, dispatch_uid="django_webfetch.W072"
        )
        post_migrate.connect(
            create_builtin_groups, sender=self, dispatch_uid="django_webfetch.builtin_groups"
        )


def _register_leased() -> None:
    """The records the process's heartbeat renews and the runner's sweep waits for."""
    from .assistant.models import AssistantRun, RunState
    from .models import CallState, ToolCall
    from .runs.durable import register_leased

    register_leased(ToolCall, CallState.RUNNING)
    register_leased(AssistantRun, RunState.RUNNING)


def _bind_task_handlers() -> None:
    from .assistant.loop import PROVIDER_ANSWERED, advance_in_process, answered_in_process
    from .assistant.recover import sweep_all
    from .runs import dispatch
    from .runs.execute import execute_in_process

    handlers: dict[str, Any] = {
        dispatch.RUN_TOOL_CALL: execute_in_process,
        dispatch.ADVANCE_ASSISTANT_RUN: advance_in_process,
        dispatch.SWEEP: sweep_all,
        # The follow-up of a provider request on the provider I/O loop (also a Celery task).
        PROVIDER_ANSWERED: answered_in_process,
    }
    for name, handler in handlers.items():
        dispatch.bind(name, handler)
    from .runs.runner import warm_up

    warm_up(_import_the_model_stack)


def _import_the_model_stack() -> None:
    """The background runner's warm-up: Pydantic AI takes seconds to import, which the
    first editor's question would otherwise wait for."""
    import contextlib

    with contextlib.suppress(ImportError):
        import pydantic_ai.direct  # noqa: F401
        import pydantic_ai.models.function  # noqa: F401


def _connect_claims() -> None:
    """Untrusting, confirming or deleting a plugin instance releases, in this process, the
    pinned loader's claim made for a pin no instance is trusted for now (decision 0053)."""
    from django.db.models.signals import post_delete, post_save

    from .plugins.models import PluginInstance
    from .plugins.tools import release_stale_claims

    for signal, uid in ((post_save, "saved"), (post_delete, "deleted")):
        signal.connect(
            release_stale_claims,
            sender=PluginInstance,
            dispatch_uid=f"django_webfetch.plugins.claims.{uid}",
        )


def _connect_oauth() -> None:
    """With django-oauth-toolkit installed, revoking or deleting an OAuth grant deletes its
    tokens."""
    from django.apps import apps

    if not apps.is_installed("oauth2_provider"):
        return
    from django.db.models.signals import pre_delete

    from .models.tokens import AccessToken, tokens_revoked
    from .oauth.grants import on_grant_deleted, on_tokens_revoked

    tokens_revoked.connect(on_tokens_revoked, dispatch_uid="django_webfetch.oauth.revoked")
    pre_delete.connect(
        on_grant_deleted, sender=AccessToken, dispatch_uid="django_webfetch.oauth.deleted"
    )


def _connect_metrics() -> None:
    """Count tool call states, and register the gauges read when the metrics are scraped."""
    from . import metrics
    from .plugins.budget import connection_gauges
    from .runs import call_transitioned
    from .runs.overview import approval_gauges, count_transition

    call_transitioned.connect(count_transition, dispatch_uid="django_webfetch.metrics.calls")
    metrics.add_source(approval_gauges)
    metrics.add_source(connection_gauges)
