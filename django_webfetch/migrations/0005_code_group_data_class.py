"""The ``code`` group's data class says it sends source and logs to the LLM provider."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

#: The built-in code group's fields after this migration (models/builtin.py agrees).
CODE_GROUP: dict[str, str] = {
    "data_class": "sourceAndLogs",
    "description": (
        "Read this installation's source and error logs (read_source, search_code, "
        "get_last_exception); sends them to the LLM provider."
    ),
}


def label_code_group(apps: Any, schema_editor: Any) -> None:
    ToolGroup = apps.get_model("django_webfetch", "ToolGroup")
    # Only the built-in row still carrying the old default: an operator's choice stays.
    ToolGroup.objects.using(schema_editor.connection.alias).filter(
        slug="code", data_class="none"
    ).update(**CODE_GROUP)


class Migration(migrations.Migration):
    dependencies = [("django_webfetch", "0004_plugins")]

    operations = [
        migrations.AlterField(
            model_name="toolgroup",
            name="data_class",
            field=models.CharField(
                choices=[
                    ("publicContent", "Public content"),
                    ("siteContent", "This site's content"),
                    ("internal", "Internal data"),
                    ("none", "No external data"),
                    (
                        "sourceAndLogs",
                        "Source code and logs of this installation, sent to the LLM provider",
                    ),
                ],
                default="none",
                max_length=32,
                verbose_name="data class",
            ),
        ),
        migrations.RunPython(label_code_group, migrations.RunPython.noop),
    ]
