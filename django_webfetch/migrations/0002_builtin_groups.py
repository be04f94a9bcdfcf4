"""Create the built-in tool groups, all disabled (DESIGN.md §2)."""

from __future__ import annotations

from typing import Any

from django.db import migrations

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
        "data_class": "none",
        "description": "Tools without network access.",
    },
    {
        "slug": "rag",
        "name": "Site search",
        "scope": "configured_endpoint",
        "data_class": "siteContent",
        "description": "Query the configured site-search endpoint (search_site).",
    },
)


def create_groups(apps: Any, schema_editor: Any) -> None:
    ToolGroup = apps.get_model("django_webfetch", "ToolGroup")
    for spec in BUILTIN_GROUPS:
        defaults = {k: v for k, v in spec.items() if k != "slug"}
        # get_or_create: never overwrite what an operator changed; always disabled.
        ToolGroup.objects.using(schema_editor.connection.alias).get_or_create(
            slug=spec["slug"], defaults={**defaults, "enabled": False}
        )


class Migration(migrations.Migration):
    dependencies = [("django_webfetch", "0001_initial")]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
