"""Conversations that stay: renamed and deleted by their owner only, marked seen, the
approver's deny comment on the editor's run, and the toolbar's "answers after a pause"
count (issue 20)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_webfetch.assistant.services import answers_after_pause
from django_webfetch.models import Conversation
from tests.settle import resumed_run

from .test_api import client_for, urls  # noqa: F401 - the API tests' client and URLs

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


def conversation(client, title="mine"):
    response = client.post("/api/conversations/", {"title": title}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def settle(client, run_id, state):
    """The run, read over the API once it has settled (it advances in the background), in
    ``state``."""
    resumed_run(run_id)
    run = client.get(f"/api/runs/{run_id}/").json()
    assert run["state"] == state, run
    return run


def test_the_owner_renames_a_conversation_without_moving_it(editor):
    client = client_for(editor)
    older = conversation(client, "older")
    newer = conversation(client, "newer")
    response = client.patch(f"/api/conversations/{older}/", {"title": "  Opening   hours "})
    assert response.status_code == 200, response.content
    assert response.json()["title"] == "Opening hours"
    assert Conversation.objects.get(pk=older).title == "Opening hours"
    listed = client.get("/api/conversations/").json()["results"]
    assert [c["id"] for c in listed] == [newer, older]  # a rename is not new activity


def test_a_rename_is_validated(editor):
    client = client_for(editor)
    conv = conversation(client)
    too_long = client.patch(f"/api/conversations/{conv}/", {"title": "x" * 201}, format="json")
    assert too_long.status_code == 400
    assert too_long.json()["errors"]["title"][0]["code"] == "max_length"
    empty = client.patch(f"/api/conversations/{conv}/", {}, format="json")
    assert empty.status_code == 400
    assert empty.json()["errors"]["non_field_errors"][0]["code"] == "empty"
    assert Conversation.objects.get(pk=conv).title == "mine"


def test_only_the_owner_renames_or_deletes(editor, user_factory, approver):
    conv = conversation(client_for(editor))
    for other in (user_factory(staff=True), approver, user_factory(superuser=True)):
        theirs = client_for(other)
        renamed = theirs.patch(f"/api/conversations/{conv}/", {"title": "x"}, format="json")
        assert renamed.status_code == 404 and renamed.json()["code"] == "not_found"
        deleted = theirs.delete(f"/api/conversations/{conv}/")
        assert deleted.status_code == 404 and deleted.json()["code"] == "not_found"
    assert Conversation.objects.get(pk=conv).title == "mine"
    anonymous = APIClient().patch(f"/api/conversations/{conv}/", {"title": "x"}, format="json")
    assert anonymous.status_code == 403
    assert client_for(editor).delete(f"/api/conversations/{conv}/").status_code == 204
    assert not Conversation.objects.filter(pk=conv).exists()


def test_seen_marks_the_conversation_open(editor):
    client = client_for(editor)
    conv = conversation(client)
    assert client.get("/api/conversations/").json()["results"][0]["seen_at"] is None
    response = client.patch(f"/api/conversations/{conv}/", {"seen": True}, format="json")
    assert response.status_code == 200
    assert response.json()["seen_at"] is not None
    assert Conversation.objects.get(pk=conv).seen_at is not None


def _paused_run(client, lab_settings, group_factory):
    group_factory("web", enabled=True)
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[2]])
    url = lab_settings.url("news.lab.example", "/page", scheme="https")
    conv = conversation(client)
    posted = client.post(
        f"/api/conversations/{conv}/messages/", {"content": f"read {url} please"}, format="json"
    )
    assert posted.status_code == 202, posted.content
    run = settle(client, posted.json()["id"], "waiting_for_approval")
    [step] = run["steps"]
    [call] = step["tool_calls"]
    assert call["state"] == "awaiting_approval" and call["comment"] == ""
    return conv, run, call


def test_the_deny_comment_reaches_the_editor(editor, approver, lab_settings, group_factory):
    client = client_for(editor)
    conv, run, call = _paused_run(client, lab_settings, group_factory)
    comment = "Not this site: ask the press office for the text."
    denied = client_for(approver).post(
        f"/api/calls/{call['id']}/deny/", {"comment": comment}, format="json"
    )
    assert denied.status_code == 200, denied.content
    final = settle(client, run["id"], "completed")
    [first, *_] = final["steps"]
    [shown] = first["tool_calls"]
    assert shown["state"] == "denied" and shown["comment"] == comment
    assert client.get(f"/api/calls/{call['id']}/").json()["decision_comment"] == comment
    assert lab_settings.requests == []


def test_answers_after_a_pause_count_until_the_editor_looks(
    editor, approver, lab_settings, group_factory
):
    client = client_for(editor)
    assert answers_after_pause(editor) == 0
    conv, run, call = _paused_run(client, lab_settings, group_factory)
    assert answers_after_pause(editor) == 0  # still waiting: no answer yet
    denied = client_for(approver).post(f"/api/calls/{call['id']}/deny/", {}, format="json")
    assert denied.status_code == 200, denied.content
    settle(client, run["id"], "completed")
    assert answers_after_pause(editor) == 1
    assert answers_after_pause(approver) == 0  # the editor's news, nobody else's
    # A run that never paused is no news either.
    other = conversation(client, "plain")
    plain = client.post(
        f"/api/conversations/{other}/messages/", {"content": "hello"}, format="json"
    )
    assert plain.status_code == 202, plain.content
    settle(client, plain.json()["id"], "completed")
    assert answers_after_pause(editor) == 1
    client.patch(f"/api/conversations/{conv}/", {"seen": True}, format="json")
    assert answers_after_pause(editor) == 0


def test_conversations_started_with_the_same_message_get_distinct_titles(editor, admin_user):
    """Issue 31 item 7: many conversations opened with "What does /about/ say?" (the
    toolbar's *Ask about this page*) are told apart in the list by a counter."""
    client = client_for(editor)
    titles = []
    for _ in range(3):
        conv = client.post("/api/conversations/", {}, format="json").json()["id"]
        response = client.post(
            f"/api/conversations/{conv}/messages/",
            {"content": "What does  /about/ say?"},
            format="json",
        )
        assert response.status_code == 202, response.content
        resumed_run(response.json()["id"])
        titles.append(Conversation.objects.get(pk=conv).title)
    assert titles == [
        "What does /about/ say?",
        "What does /about/ say? (2)",
        "What does /about/ say? (3)",
    ]
    listed = [c["title"] for c in client.get("/api/conversations/").json()["results"]]
    assert sorted(listed) == sorted(titles)
    # Another user's conversations do not count.
    other = client_for(admin_user)
    conv = other.post("/api/conversations/", {}, format="json").json()["id"]
    response = other.post(
        f"/api/conversations/{conv}/messages/", {"content": "What does /about/ say?"}, format="json"
    )
    resumed_run(response.json()["id"])
    assert Conversation.objects.get(pk=conv).title == "What does /about/ say?"
