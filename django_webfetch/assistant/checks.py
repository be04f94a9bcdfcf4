"""System checks of the assistant (ids ``django_webfetch.E040``-``E049``/``W040``-``W049``),
registered by ``apps.py``; documented in docs/checks.rst."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.checks import CheckMessage, Error, Warning

from django_webfetch.checking import from_database
from django_webfetch.invocation import manage_command

__all__ = ["check_assistant", "check_call_limits"]


def _pydantic_ai_installed() -> bool:
    return importlib.util.find_spec("pydantic_ai") is not None


def check_assistant(
    app_configs: Sequence[Any] | None = None,
    databases: Iterable[str] | None = None,
    **kwargs: Any,
) -> list[CheckMessage]:
    return from_database(_messages, databases)


def check_call_limits(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """W042: a tool-call bound set above its hard ceiling (the ceiling is used)."""
    from django.conf import settings

    from django_webfetch.conf import CALL_LIMITS

    messages: list[CheckMessage] = []
    for name, (_default, ceiling) in CALL_LIMITS.items():
        raw = getattr(settings, name, None)
        if isinstance(raw, int) and not isinstance(raw, bool) and raw > ceiling:
            messages.append(
                Warning(
                    f"{name}={raw!r} is above the hard ceiling {ceiling!r}; {ceiling!r} is used.",
                    hint="Lower the setting: the ceiling bounds what one model answer or one "
                    "run may make the site do.",
                    id="django_webfetch.W042",
                )
            )
    return messages


def _messages() -> Iterable[CheckMessage]:
    from django_webfetch.models import ConfiguredEndpoint, ToolGroup

    from .providers import ASSISTANT_GROUP, provider_kinds

    group = ToolGroup.objects.filter(slug=ASSISTANT_GROUP, enabled=True).first()
    if group is None:
        return
    if not _pydantic_ai_installed():
        yield Error(
            "The assistant group is enabled but Pydantic AI is not installed: every "
            "assistant run is refused (assistant_not_installed).",
            hint='pip install "django-webfetch[assistant]"',
            obj=group,
            id="django_webfetch.E040",
        )
    yield from _refused_endpoints(group)
    usable = (
        ConfiguredEndpoint.objects.filter(
            group=group, enabled=True, provider_kind__in=provider_kinds()
        )
        .exclude(model_name="")
        .exists()
    )
    if not usable:
        yield Warning(
            "The assistant group is enabled but none of its enabled endpoints names a "
            "provider kind and a model: the offline rule-based planner answers.",
            hint="Set the provider kind and the model name of the group's endpoint.",
            obj=group,
            id="django_webfetch.W040",
        )


def _refused_endpoints(group: Any) -> Iterable[CheckMessage]:
    """W041: an enabled endpoint of the assistant group that the guard refuses for its
    scope (the static rules, as the admin does at save): every run would fail."""
    from django_webfetch.egress import endpoint_verdict

    for endpoint in group.endpoints.filter(enabled=True).order_by("pk"):
        verdict = endpoint_verdict(endpoint)
        if verdict.allowed:
            continue
        yield Warning(
            f"The egress guard refuses the assistant endpoint {endpoint.pk} "
            f"(rule: {verdict.reason}): every run through it fails egress_denied.",
            hint=f"{manage_command('webfetch', 'explain', '<base URL>', '--group', 'assistant')} "
            "shows every step; "
            "for a model server you run yourself (localhost, a private address) tick the "
            "endpoint's 'allow private addresses' (docs/assistant.rst, Self-hosted models).",
            obj=endpoint,
            id="django_webfetch.W041",
        )
