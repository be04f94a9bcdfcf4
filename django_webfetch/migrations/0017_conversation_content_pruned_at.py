# issue 29, finding 6: retention clears an idle conversation's content; the time it did.
# The lead renumbers at merge time.

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_webfetch", "0016_toolcall_run"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="content_pruned_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="content pruned at"),
        ),
    ]
