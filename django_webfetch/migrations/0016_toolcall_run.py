# issue 29, finding 3: a run's link to its calls is a typed relation, not parsed free text.
# The lead renumbers at merge time.

from __future__ import annotations

import uuid
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

#: Calls looked at per query when the existing links are carried over.
_CHUNK = 500


def _parsed(text: str) -> tuple[uuid.UUID, int, int] | None:
    """The old reference ``assistant:<run hex>:<step>:<index>`` (read here once, to carry
    existing calls over; nothing reads it after this migration)."""
    parts = (text or "").split(":")
    if len(parts) != 4 or parts[0] != "assistant":
        return None
    try:
        step, index = int(parts[2]), int(parts[3])
        if not (0 <= step <= 32767 and 0 <= index <= 32767):
            return None
        return uuid.UUID(hex=parts[1]), step, index
    except ValueError:
        return None


def link_run_calls(apps: Any, schema_editor: Any) -> None:
    """Link each existing call to the run its reference names, only when that run exists
    and belongs to the call's user (as ``run_calls`` counted it before): a reference a
    client wrote for someone else's run, or for no run, stays what it is, free text."""
    ToolCall = apps.get_model("django_webfetch", "ToolCall")
    AssistantRun = apps.get_model("django_webfetch", "AssistantRun")
    db = schema_editor.connection.alias
    candidates = (
        ToolCall.objects.using(db)
        .filter(conversation__startswith="assistant:", run__isnull=True)
        .values_list("pk", "conversation", "user_id")
        .order_by("pk")
    )
    last = None
    while True:
        page = candidates if last is None else candidates.filter(pk__gt=last)
        rows = list(page[:_CHUNK])
        if not rows:
            return
        last = rows[-1][0]
        parsed = {pk: (_parsed(text), user_id) for pk, text, user_id in rows}
        run_ids = {p[0] for p, _user in parsed.values() if p is not None}
        owners = dict(
            AssistantRun.objects.using(db).filter(pk__in=run_ids).values_list("pk", "user_id")
        )
        for pk, (ref, user_id) in parsed.items():
            if ref is None or ref[0] not in owners or owners[ref[0]] != user_id:
                continue
            ToolCall.objects.using(db).filter(pk=pk).update(
                run_id=ref[0], run_step=ref[1], run_index=ref[2]
            )


class Migration(migrations.Migration):
    dependencies = [
        ("django_webfetch", "0015_budget_cost_not_negative"),
    ]

    operations = [
        migrations.AddField(
            model_name="toolcall",
            name="run",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="tool_calls",
                to="django_webfetch.assistantrun",
                verbose_name="assistant run",
            ),
        ),
        migrations.AddField(
            model_name="toolcall",
            name="run_index",
            field=models.PositiveSmallIntegerField(
                blank=True, editable=False, null=True, verbose_name="call of the step"
            ),
        ),
        migrations.AddField(
            model_name="toolcall",
            name="run_step",
            field=models.PositiveSmallIntegerField(
                blank=True, editable=False, null=True, verbose_name="step of the run"
            ),
        ),
        migrations.RunPython(link_run_calls, migrations.RunPython.noop, elidable=True),
    ]
