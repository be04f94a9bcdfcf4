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
        from django.core.signals import request_started
        from django.db.models.signals import post_migrate

        from . import checks
        from .assistant.signals import connect_signals
        from .models.builtin import create_builtin_groups
        from .runs.runner import start_serving

        checks.register()
        connect_signals()
        _bind_task_handlers()
        # A serving process starts the background runner (it sweeps at once: a restarted
        # server takes up the runs its predecessor left); commands that serve nothing don't.
        request_started.connect(start_serving, dispatch_uid="django_webfetch.runner")
        post_migrate.connect(
            create_builtin_groups, sender=self, dispatch_uid="django_webfetch.builtin_groups"
        )


def sweep_all() -> dict[str, int]:
    """The periodic task's work: the tool calls' sweep, then the assistant runs'."""
    from dataclasses import asdict

    from . import runs
    from .assistant import services as assistant

    report: dict[str, int] = asdict(runs.sweep())
    report.update(assistant.sweep())
    return report


def _bind_task_handlers() -> None:
    from .assistant.loop import advance_in_process
    from .runs import dispatch
    from .runs.execute import execute_in_process

    handlers: dict[str, Any] = {
        dispatch.RUN_TOOL_CALL: execute_in_process,
        dispatch.ADVANCE_ASSISTANT_RUN: advance_in_process,
        dispatch.SWEEP: sweep_all,
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
