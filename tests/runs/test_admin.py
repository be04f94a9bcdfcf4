"""The ToolCall admin: the approval queue, the preview card, approve/deny actions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin import helpers
from django.utils import timezone

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from tests.settle import settled_call

from .conftest import EchoTool

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/django_webfetch/toolcall/"


@pytest.fixture(autouse=True)
def admin_urls(settings, run_tools):
    settings.ROOT_URLCONF = "tests.runs.urls"


def waiting(user, text="hi"):
    return runs.request_call("runs_echo", {"text": text}, user=user)


def messages_of(response):
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_the_changelist_and_its_filter(client, editor, approver, other_approver):
    mine = waiting(approver, "mine")
    theirs = waiting(editor, "theirs")
    runs.deny(waiting(editor, "gone"), by=other_approver)
    client.force_login(approver)
    response = client.get(CHANGELIST + "?approval=awaiting")
    assert response.status_code == 200
    shown = {c.pk for c in response.context["cl"].result_list}
    assert shown == {mine.pk, theirs.pk}
    response = client.get(CHANGELIST + "?approval=awaiting_others")
    assert {c.pk for c in response.context["cl"].result_list} == {theirs.pk}
    response = client.get(CHANGELIST + "?approval=decided")
    assert len(response.context["cl"].result_list) == 1


def test_editors_do_not_see_the_queue(client, editor):
    waiting(editor)
    client.force_login(editor)
    assert client.get(CHANGELIST).status_code == 403


def test_no_add_change_or_delete(client, superuser, editor):
    call = waiting(editor)
    client.force_login(superuser)
    assert client.get(CHANGELIST + "add/").status_code == 403
    response = client.get(f"{CHANGELIST}{call.pk}/change/")
    assert response.status_code == 200
    assert not response.context["has_change_permission"]
    assert client.post(f"{CHANGELIST}{call.pk}/delete/").status_code == 403
    actions = client.get(CHANGELIST).context["action_form"].fields["action"].choices
    assert "delete_selected" not in {name for name, _label in actions}


def test_the_preview_card_escapes_and_shows_the_query(
    lab_settings, client, approver, editor, group_factory
):
    group_factory("web", enabled=True)
    lab_settings.dns.set("evil.example", a=[lab_settings.PUBLIC_V4[0]])  # the pre-flight
    url = "https://evil.example/p?q=%3Cscript%3Ealert(1)%3C/script%3E&a=b%20c"
    call = runs.request_call("fetch_external_url", {"url": url}, user=editor)
    client.force_login(approver)
    response = client.get(f"{CHANGELIST}{call.pk}/change/")
    html = response.content.decode()
    assert "evil.example" in html
    assert "q=%3Cscript%3Ealert(1)%3C/script%3E&amp;a=b%20c" in html  # raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # decoded, escaped
    assert "<script>alert(1)" not in html
    assert "b c" in html
    assert ">editor<" in html  # requesting user
    assert ">web<" in html  # group
    # Approve/deny buttons for an approver.
    assert f"{call.pk}/decide/approve/" in html and f"{call.pk}/decide/deny/" in html


def test_no_buttons_on_own_or_decided_calls(client, approver, editor, other_approver):
    own = waiting(approver)
    client.force_login(approver)
    html = client.get(f"{CHANGELIST}{own.pk}/change/").content.decode()
    assert f"{own.pk}/decide/approve/" not in html
    decided = runs.deny(waiting(editor), by=other_approver)
    html = client.get(f"{CHANGELIST}{decided.pk}/change/").content.decode()
    assert f"{decided.pk}/decide/approve/" not in html


def _action(client, action, calls, **extra):
    data = {"action": action, helpers.ACTION_CHECKBOX_NAME: [str(c.pk) for c in calls], **extra}
    return client.post(CHANGELIST, data, follow=True)


def test_bulk_approve_asks_for_a_comment_first(client, approver, editor):
    calls = [waiting(editor, "a"), waiting(editor, "b")]
    client.force_login(approver)
    response = _action(client, "approve_selected", calls)
    assert response.status_code == 200
    assert response.templates[0].name == "django_webfetch/calls/decision.html"
    assert all(c.state == CallState.AWAITING_APPROVAL for c in ToolCall.objects.all())
    assert EchoTool.executed == []

    response = _action(client, "approve_selected", calls, confirm="yes", comment="batch ok")
    assert response.status_code == 200
    # Approved; each runs on the background runner after the commit.
    assert {settled_call(c).state for c in calls} == {CallState.SUCCEEDED}
    assert {c.state for c in ToolCall.objects.all()} == {CallState.SUCCEEDED}
    assert set(ToolCall.objects.values_list("decision_comment", flat=True)) == {"batch ok"}
    found = messages_of(response)
    assert len(found) == 2 and all("approved" in m for m in found)


def test_bulk_decisions_report_per_object(client, approver, editor):
    ok = waiting(editor, "ok")
    own = waiting(approver, "own")
    expired = waiting(editor, "late")
    ToolCall.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(1))
    done = waiting(editor, "done")
    runs.cancel(done, by=editor)
    client.force_login(approver)
    response = _action(client, "deny_selected", [ok, own, expired, done], confirm="yes", comment="")
    found = messages_of(response)
    assert len(found) == 4, found
    # Said once, not "denied; it is now denied" (issue 31).
    assert sum(m.endswith(" denied.") for m in found) == 1
    assert not any("it is now denied" in m for m in found)
    assert any("(self_approval)" in m for m in found)
    assert any("(expired)" in m or "(invalid_transition)" in m for m in found)
    states = dict(ToolCall.objects.values_list("pk", "state"))
    assert states[ok.pk] == CallState.DENIED
    assert states[own.pk] == CallState.AWAITING_APPROVAL
    assert states[expired.pk] == CallState.EXPIRED
    assert states[done.pk] == CallState.CANCELLED


def test_actions_need_the_approve_permission(client, editor, user_factory):
    from django.contrib.auth.models import Permission

    viewer = user_factory(staff=True, username="viewer")
    viewer.user_permissions.add(Permission.objects.get(codename="view_toolcall"))
    call = waiting(editor)
    client.force_login(viewer)
    response = client.get(CHANGELIST)
    assert response.status_code == 200
    form = response.context["action_form"]
    names = {name for name, _label in form.fields["action"].choices} if form else set()
    assert not names & {"approve_selected", "deny_selected"}
    _action(client, "approve_selected", [call], confirm="yes")
    assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL
    assert client.get(f"{CHANGELIST}{call.pk}/decide/approve/").status_code == 403


def test_approve_one_from_its_page(client, approver, editor):
    call = waiting(editor)
    client.force_login(approver)
    page = client.get(f"{CHANGELIST}{call.pk}/decide/approve/")
    assert page.status_code == 200
    assert page.context["single"] == call
    response = client.post(
        f"{CHANGELIST}{call.pk}/decide/approve/", {"confirm": "yes", "comment": "one"}, follow=True
    )
    assert response.redirect_chain[-1][0].endswith(f"{call.pk}/change/")
    call = settled_call(call)
    assert (call.state, call.decision_comment, call.decided_by) == (
        CallState.SUCCEEDED,
        "one",
        approver,
    )
    assert any("approved" in m for m in messages_of(response))


def test_deny_one_from_its_page(client, approver, editor):
    call = waiting(editor)
    client.force_login(approver)
    client.post(f"{CHANGELIST}{call.pk}/decide/deny/", {"confirm": "yes", "comment": "no"})
    assert ToolCall.objects.get(pk=call.pk).state == CallState.DENIED


def test_unknown_decision(client, approver, editor):
    call = waiting(editor)
    client.force_login(approver)
    assert client.get(f"{CHANGELIST}{call.pk}/decide/explode/").status_code == 403


def test_a_too_long_comment_is_refused(client, approver, editor):
    call = waiting(editor)
    client.force_login(approver)
    response = client.post(
        f"{CHANGELIST}{call.pk}/decide/approve/", {"confirm": "yes", "comment": "x" * 2001}
    )
    assert response.status_code == 200
    assert response.context["form"].errors
    assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL


def test_self_approval_setting(client, approver, settings):
    call = waiting(approver)
    client.force_login(approver)
    client.post(f"{CHANGELIST}{call.pk}/decide/approve/", {"confirm": "yes"})
    assert ToolCall.objects.get(pk=call.pk).state == CallState.AWAITING_APPROVAL
    settings.WEBFETCH_ALLOW_SELF_APPROVAL = True
    client.post(f"{CHANGELIST}{call.pk}/decide/approve/", {"confirm": "yes"})
    assert settled_call(call).state == CallState.SUCCEEDED


def test_expiry_on_read_in_the_admin(client, approver, editor):
    call = waiting(editor)
    ToolCall.objects.filter(pk=call.pk).update(expires_at=timezone.now() - timedelta(1))
    client.force_login(approver)
    client.get(CHANGELIST)
    assert ToolCall.objects.get(pk=call.pk).state == CallState.EXPIRED


@pytest.fixture
def other_approver(approver_factory):
    return approver_factory(username="approver2")
