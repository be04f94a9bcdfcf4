"""Review round 4 (issue 29), finding 3 (low): the free-text ``conversation`` of ``POST
/api/calls/`` was
parsed as an assistant-run reference: a made-up ``assistant:<uuid>:1:0`` suppressed the
approvers' e-mail, and a real run id (every approver sees them) wrote call states, a
comment and a resume into another user's run events.

A run's link to its calls is a typed relation written only by the run itself; client text
stays free text, never parsed.
"""

from __future__ import annotations

import uuid

import pytest
from django.core import mail
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.assistant.models import AssistantRun, Conversation, RunEvent
from tests.runs.conftest import EchoTool

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(settings, run_tools, user_factory, approver):
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    approver.email = "approver@example.org"
    approver.save()
    EchoTool.needs_approval = True
    attacker = user_factory(username="mallory")
    client = APIClient()
    client.force_login(attacker)
    return client


def _post(client, conversation, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/calls/",
            {"tool": "runs_echo", "arguments": {"text": "x"}, "conversation": conversation},
            format="json",
        )
    assert response.status_code == 201, response.content
    return response.json()


def test_a_made_up_run_reference_does_not_silence_the_approvers_mail(
    api, django_capture_on_commit_callbacks
):
    mail.outbox.clear()
    _post(api, "my notes", django_capture_on_commit_callbacks)
    assert len(mail.outbox) == 1  # the control: an API call that waits is mailed
    body = _post(api, f"assistant:{uuid.uuid4().hex}:1:0", django_capture_on_commit_callbacks)
    assert body["state"] == "awaiting_approval"
    # Expected: the approvers are mailed about this call as about any other API call.
    assert len(mail.outbox) == 2, [m.subject for m in mail.outbox]
    assert body["conversation"].startswith("assistant:")  # kept as the client wrote it


def test_a_real_run_id_writes_nothing_into_another_users_run(
    api, user_factory, approver, django_capture_on_commit_callbacks
):
    victim = user_factory(username="victim")
    conversation = Conversation.objects.create(owner=victim, title="theirs")
    run = AssistantRun.objects.create(
        conversation=conversation, user=victim, state="waiting_for_approval", step_count=1
    )
    before = list(RunEvent.objects.filter(run=run).values_list("kind", flat=True))
    body = _post(api, f"assistant:{run.pk.hex}:1:0", django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        runs.deny(body["id"], by=approver, comment="INJECTED COMMENT")
    events = list(RunEvent.objects.filter(run=run).values_list("kind", "data"))
    # Expected: the victim's run has no event of the attacker's call (no call_state, no
    # comment, no resume), and it was not advanced.
    assert [kind for kind, _ in events] == before, events
    assert "INJECTED COMMENT" not in str(events)
    assert AssistantRun.objects.get(pk=run.pk).state == "waiting_for_approval"


def test_the_migration_links_only_a_runs_own_calls(user_factory):
    """Existing rows: a call is linked to the run its old reference names only when that
    run exists and is its user's (as ``run_calls`` counted before); a reference a client
    wrote for another user's run, or for no run, stays free text."""
    import importlib
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    from django_webfetch.models import ToolCall

    migration = importlib.import_module("django_webfetch.migrations.0016_toolcall_run")
    owner, other = user_factory(username="owner"), user_factory(username="other")
    run = AssistantRun.objects.create(
        conversation=Conversation.objects.create(owner=owner), user=owner
    )
    ref = f"assistant:{run.pk.hex}:2:1"

    def legacy(user, conversation):
        return ToolCall.objects.create(tool="runs_echo", user=user, conversation=conversation)

    own = legacy(owner, ref)
    forged = legacy(other, ref)
    nowhere = legacy(owner, f"assistant:{uuid.uuid4().hex}:1:0")
    notes = legacy(owner, "assistant: my notes")
    migration.link_run_calls(apps, SimpleNamespace(connection=connection))
    rows = {c.pk: (c.run_id, c.run_step, c.run_index) for c in ToolCall.objects.all()}
    assert rows[own.pk] == (run.pk, 2, 1)
    for call in (forged, nowhere, notes):
        assert rows[call.pk] == (None, None, None)


def test_no_module_reads_a_reference_out_of_conversation_text():
    """The class: nothing in the package parses a call's (or a stored text's) free-text
    ``conversation`` (``.split``/``.startswith``/``.partition`` on it, or a
    ``conversation__startswith``-like lookup): links are typed relations."""
    import ast
    from pathlib import Path

    import django_webfetch

    package = Path(django_webfetch.__file__).parent
    offenders = []
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).as_posix()
        if relative.startswith("migrations/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"split", "rsplit", "startswith", "partition", "find"}
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "conversation"
            ):
                offenders.append(f"{relative}:{node.lineno}")
            for keyword in getattr(node, "keywords", ()):
                name = keyword.arg or ""
                if name.startswith("conversation__") and not name.startswith(
                    ("conversation__owner", "conversation__seen_at", "conversation__pk")
                ):
                    offenders.append(f"{relative}:{node.lineno}")
    assert offenders == []
