"""The built-in tool groups (DESIGN.md §2), all created disabled.

Created by migration ``0002_builtin_groups`` and again, if missing, after every
``post_migrate`` (as ``django.contrib.sites`` does for its default site), so a database
flushed by ``flush`` or a transactional test gets them back.  Existing rows are never
changed: the operator's settings win.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BUILTIN_GROUPS",
    "builtin_group_slugs",
    "create_builtin_groups",
    "register_builtin_group",
]

BUILTIN_GROUPS: tuple[dict[str, Any], ...] = (
    {
        "slug": "web",
        "name": "Web",
        "scope": "external_filtered",
        "data_class": "publicContent",
        "description": "Read public web pages (fetch_external_url).",
    },
    {
        "slug": "system",
        "name": "System",
        "scope": "own_site",
        "data_class": "siteContent",
        "description": "Probe this installation's own pages.",
    },
    {
        "slug": "code",
        "name": "Code",
        "scope": "none",
        "data_class": "sourceAndLogs",
        "description": (
            "Read this installation's source and error logs (read_source, search_code, "
            "get_last_exception); sends them to the LLM provider."
        ),
    },
    {
        "slug": "rag",
        "name": "Site search",
        "scope": "configured_endpoint",
        "data_class": "siteContent",
        "description": "Query the configured site-search endpoint (search_site).",
    },
    {
        "slug": "assistant",
        "name": "Assistant LLM provider",
        "scope": "configured_endpoint",
        "data_class": "internal",
        "description": "The LLM provider the assistant asks (its configured endpoint).",
    },
)


#: The one registry of built-in groups: this app's, plus those optional apps add from their
#: ``ready()`` (the CMS integration adds ``content``).  A plugin's tool may join none of
#: them (``plugins.manifest``), whatever is installed.
_REGISTERED: dict[str, dict[str, Any]] = {spec["slug"]: spec for spec in BUILTIN_GROUPS}


def register_builtin_group(spec: dict[str, Any]) -> None:
    """Add an optional app's group to the built-in set (idempotent)."""
    slug = spec.get("slug")
    if not isinstance(slug, str) or not slug:
        raise ValueError("a built-in group needs a slug")
    _REGISTERED.setdefault(slug, dict(spec))


def builtin_group_slugs() -> frozenset[str]:
    """Every built-in group's slug (this app's and the optional apps' registered ones)."""
    return frozenset(_REGISTERED)


def create_builtin_groups(
    app_config: Any = None, using: str = "default", apps: Any = None, **kwargs: Any
) -> None:
    """``post_migrate`` receiver: create the built-in groups that are missing (disabled)."""
    from django.db import DatabaseError

    if apps is not None:
        try:
            ToolGroup = apps.get_model("django_webfetch", "ToolGroup")
        except LookupError:
            return  # migrated backwards past 0001
    else:
        from .scopes import ToolGroup
    try:
        for spec in BUILTIN_GROUPS:
            defaults = {k: v for k, v in spec.items() if k != "slug"}
            ToolGroup.objects.using(using).get_or_create(
                slug=spec["slug"], defaults={**defaults, "enabled": False}
            )
    except DatabaseError:
        return  # the table does not exist yet
