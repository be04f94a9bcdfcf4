"""Create the ``content`` tool group (django CMS pages, no network), disabled."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def create_group(apps: Any, schema_editor: Any) -> None:
    ToolGroup = apps.get_model("django_webfetch", "ToolGroup")
    # get_or_create: never overwrite what an operator changed; always created disabled.
    ToolGroup.objects.using(schema_editor.connection.alias).get_or_create(
        slug="content",
        defaults={
            "name": "Site content",
            "scope": "none",
            "data_class": "siteContent",
            "enabled": False,
            "description": "Read this site's published django CMS pages (list_pages, "
            "read_page). No network access.",
        },
    )


class Migration(migrations.Migration):
    dependencies = [("django_webfetch", "0002_builtin_groups")]

    operations = [migrations.RunPython(create_group, migrations.RunPython.noop)]
