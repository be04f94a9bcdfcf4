# issue 29, finding 6: retention clears an idle conversation's content (the time it did),
# and finds the calls whose content is due without reading those already pruned.
# The lead renumbers at merge time.

from __future__ import annotations

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_webfetch", "0016_toolcall_run"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="content_pruned_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="content pruned at"),
        ),
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(
                condition=models.Q(("content_pruned_at__isnull", True)),
                fields=["finished_at"],
                name="webfetch_call_unpruned",
            ),
        ),
    ]
