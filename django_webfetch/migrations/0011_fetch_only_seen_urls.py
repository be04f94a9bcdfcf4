# issue 19, item 15: fetch_only_seen_urls (the lead renumbers at merge time)

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_webfetch", "0010_access_tokens"),
    ]

    operations = [
        migrations.AddField(
            model_name="toolgroup",
            name="fetch_only_seen_urls",
            field=models.BooleanField(
                default=True,
                help_text=(
                    "Where approval is skipped through the allowlist, a URL the model "
                    "composed (one the editor did not write and no earlier tool result of "
                    "the conversation carried) still waits for a human, so a steered model "
                    "cannot carry data out in a query string unseen."
                ),
                verbose_name="skip approval only for URLs the conversation showed",
            ),
        ),
    ]
