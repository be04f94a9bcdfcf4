"""The readers and the rows that hold a call's result, shared by the access tests
(tests/runs/test_read_access.py, tests/runs/test_every_surface_reads_results_through_the_door.py).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission

#: The view permissions of every model that can show a result.
VIEW_PERMISSIONS = (
    "view_toolcall",
    "view_conversation",
    "view_message",
    "view_assistantrun",
    "view_runevent",
)


def grant(user: Any, *codenames: str) -> Any:
    """``user`` with the app's permissions ``codenames``, read afresh (no cached rights)."""
    from django.contrib.auth import get_user_model

    for codename in codenames:
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="django_webfetch")
        )
    return get_user_model().objects.get(pk=user.pk)


def conversation_holding(
    requester: Any, call: Any, secret: str, *, events: tuple[str, ...]
) -> tuple[Any, Any]:
    """The requester's conversation and finished run whose messages and events carry
    ``secret`` (a tool message of ``call``, a run event of each kind in ``events``)."""
    from django_webfetch.models import AssistantRun, Conversation, Message, RunEvent

    conversation = Conversation.objects.create(owner=requester, title="mine")
    run = AssistantRun.objects.create(
        conversation=conversation, user=requester, state="completed", step_count=1
    )
    Message.objects.create(conversation=conversation, seq=1, role="user", content="read it")
    Message.objects.create(
        conversation=conversation,
        run=run,
        seq=2,
        step=1,
        role="tool",
        content=f"restricted text {secret}",
        tool_call=call,
    )
    for seq, kind in enumerate(events, start=1):
        RunEvent.objects.create(run=run, seq=seq, kind=kind, data={"result": secret})
    run.last_event = len(events)
    run.save(update_fields=["last_event"])
    return conversation, run
