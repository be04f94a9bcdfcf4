"""Budgets per user and per group: the ceilings, their use, the refusal before the call
(through the services and the API), superusers held to them unless exempted, the admin."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from rest_framework.test import APIClient

from django_webfetch import budgets, runs
from django_webfetch.models import Budget, BudgetUsage, CallState, ToolCall
from tests.settle import settled_call

from .conftest import EchoTool

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _tools(run_tools, settings):
    EchoTool.needs_approval = False
    settings.ROOT_URLCONF = "tests.runs.urls"


def call(user, text="hi"):
    """Request a call and wait for its outcome (it runs on the background runner; a call
    refused before it started is already final)."""
    return settled_call(runs.request_call("runs_echo", {"text": text}, user=user))


def test_a_user_ceiling_refuses_the_call_after_the_last_allowed_one(editor):
    Budget.objects.create(user=editor, tool_calls_per_day=2)
    assert [call(editor).state for _ in range(2)] == [CallState.SUCCEEDED] * 2
    refused = call(editor, "third")
    assert refused.state == CallState.FAILED
    assert refused.reason == "budget_exceeded:tool_calls_per_day"
    result = refused.tool_result()
    assert result.error == "budget_exceeded:tool_calls_per_day"
    assert "budget of tool calls for today is used up (2 of 2)" in result.content
    assert result.meta["kind"] == "tool_calls_per_day"
    # Nothing ran and nothing was counted for the refused call.
    assert EchoTool.executed == [{"text": "hi"}, {"text": "hi"}]
    assert BudgetUsage.objects.get(user=editor).tool_calls == 2


def test_a_refused_call_is_not_put_to_a_human(editor):
    EchoTool.needs_approval = True
    Budget.objects.create(user=editor, tool_calls_per_day=0)
    refused = call(editor)
    assert (refused.state, refused.reason) == (
        CallState.FAILED,
        "budget_exceeded:tool_calls_per_day",
    )
    assert not ToolCall.objects.filter(state=CallState.AWAITING_APPROVAL).exists()


def test_a_group_ceiling_counts_its_members_together(user_factory):
    team = Group.objects.create(name="editors")
    alice, bob, carol = (user_factory() for _ in range(3))
    alice.groups.add(team)
    bob.groups.add(team)
    Budget.objects.create(group=team, tool_calls_per_month=3)
    assert call(alice).state == CallState.SUCCEEDED
    assert call(bob).state == CallState.SUCCEEDED
    assert call(alice).state == CallState.SUCCEEDED
    refused = call(bob)
    assert refused.reason == "budget_exceeded:tool_calls_per_month"
    assert "Your group's budget of tool calls for this month" in refused.tool_result().content
    # Not a member: not held to the group's ceiling.
    assert call(carol).state == CallState.SUCCEEDED


def test_the_tightest_of_own_and_group_ceilings_holds(user_factory):
    team = Group.objects.create(name="team")
    user = user_factory()
    user.groups.add(team)
    Budget.objects.create(group=team, tool_calls_per_day=5)
    Budget.objects.create(user=user, tool_calls_per_day=1)
    assert call(user).state == CallState.SUCCEEDED
    assert call(user).reason == "budget_exceeded:tool_calls_per_day"


def test_a_disabled_budget_sets_no_ceiling(editor):
    Budget.objects.create(user=editor, tool_calls_per_day=0, enabled=False)
    assert call(editor).state == CallState.SUCCEEDED


def test_superusers_are_held_to_budgets_unless_exempted_explicitly(superuser, settings):
    Budget.objects.create(user=superuser, tool_calls_per_day=0)
    assert call(superuser).reason == "budget_exceeded:tool_calls_per_day"
    settings.WEBFETCH_BUDGET_EXEMPT_SUPERUSERS = True
    assert call(superuser).state == CallState.SUCCEEDED
    assert budgets.exempt(superuser) is True


def test_exemption_is_for_superusers_only(editor, settings):
    settings.WEBFETCH_BUDGET_EXEMPT_SUPERUSERS = True
    Budget.objects.create(user=editor, tool_calls_per_day=0)
    assert call(editor).reason == "budget_exceeded:tool_calls_per_day"


def test_day_and_month_use(editor):
    budget = Budget.objects.create(user=editor, tool_calls_per_day=10, tool_calls_per_month=100)
    for day, count in ((15, 3), (14, 4), (1, 5)):
        BudgetUsage.objects.create(user=editor, day=datetime.date(2026, 12, day), tool_calls=count)
    BudgetUsage.objects.create(user=editor, day=datetime.date(2026, 11, 30), tool_calls=50)
    use = budgets.usage_of(budget, today=datetime.date(2026, 12, 15))
    assert use["day"]["tool_calls"] == 3
    assert use["month"]["tool_calls"] == 12
    lines = {
        line.kind: line for line in budgets.budget_lines(budget, today=datetime.date(2026, 12, 15))
    }
    assert (lines["tool_calls_per_day"].used, lines["tool_calls_per_day"].limit) == (3, 10)
    assert lines["tool_calls_per_month"].used == 12
    assert set(lines) == {"tool_calls_per_day", "tool_calls_per_month"}


def test_provider_requests_tokens_and_cost(editor, settings):
    settings.WEBFETCH_MODEL_PRICES = {"lab-model": {"prompt": 2, "completion": "10"}}
    Budget.objects.create(user=editor, provider_requests_per_day=5, provider_tokens_per_day=1000)
    budgets.charge_provider_request(editor)
    budgets.record_provider_usage(editor, "lab-model", 600, 500)
    row = BudgetUsage.objects.get(user=editor, day=timezone.localdate())
    assert (row.provider_requests, row.provider_tokens) == (1, 1100)
    assert row.cost == Decimal("0.0062")  # (600 * 2 + 500 * 10) / 1e6
    with pytest.raises(budgets.BudgetExceeded) as info:
        budgets.charge_provider_request(editor)
    assert info.value.code == "budget_exceeded:provider_tokens_per_day"
    # Refused: not counted.
    assert BudgetUsage.objects.get(pk=row.pk).provider_requests == 1


def test_cost_ceiling(editor, settings):
    settings.WEBFETCH_MODEL_PRICES = {"lab-model": {"prompt": 1000000, "completion": 0}}
    Budget.objects.create(user=editor, cost_per_month=Decimal("3"))
    budgets.charge_provider_request(editor)
    budgets.record_provider_usage(editor, "lab-model", 3, 0)
    with pytest.raises(budgets.BudgetExceeded) as info:
        budgets.charge_provider_request(editor)
    assert info.value.code == "budget_exceeded:cost_per_month"
    assert "budget of language model cost for this month is used up" in str(info.value)


def test_a_model_with_no_price_costs_nothing(editor, settings):
    settings.WEBFETCH_MODEL_PRICES = {"other": {"prompt": 1, "completion": 1}}
    assert budgets.price_of("lab-model", 10**6, 10**6) == 0
    assert budgets.price_of("other", 10**6, 10**6) == 2


@pytest.mark.parametrize(
    "value",
    [[], {"m": 1}, {"m": {"prompt": -1}}, {"m": {"prompt": "x"}}, {"m": {"prompt": True}}],
)
def test_bad_prices_are_a_configuration_error(settings, value):
    from django_webfetch.conf import conf
    from django_webfetch.exceptions import WebFetchConfigurationError

    settings.WEBFETCH_MODEL_PRICES = value
    with pytest.raises(WebFetchConfigurationError, match="WEBFETCH_MODEL_PRICES"):
        _ = conf.WEBFETCH_MODEL_PRICES


def test_a_budget_is_for_a_user_or_a_group_never_both(editor):
    from django.db import IntegrityError, transaction

    team = Group.objects.create(name="g")
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create(user=editor, group=team)
    with pytest.raises(IntegrityError), transaction.atomic():
        Budget.objects.create()


def test_refusal_through_the_api_in_plain_words(editor):
    Budget.objects.create(user=editor, tool_calls_per_day=1)
    client = APIClient()
    client.force_login(editor)
    first = client.post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "a"}}, format="json"
    )
    assert first.status_code == 202, first.json()
    settled_call(first.json()["id"])
    assert client.get(f"/api/calls/{first.json()['id']}/").json()["state"] == "succeeded"
    second = client.post(
        "/api/calls/", {"tool": "runs_echo", "arguments": {"text": "b"}}, format="json"
    )
    body = second.json()
    assert second.status_code == 201, body
    assert (body["state"], body["reason"]) == ("failed", "budget_exceeded:tool_calls_per_day")
    assert body["result"]["error"] == "budget_exceeded:tool_calls_per_day"
    assert body["result"]["content"].startswith("Your budget of tool calls for today")
    assert "Try again tomorrow, or ask an administrator to raise it." in body["result"]["content"]
    assert EchoTool.executed == [{"text": "a"}]


def test_admin_shows_use_against_budget(editor, superuser, client):
    budget = Budget.objects.create(user=editor, tool_calls_per_day=4, provider_tokens_per_month=10)
    call(editor)
    client.force_login(superuser)
    listing = client.get("/admin/django_webfetch/budget/")
    assert listing.status_code == 200
    text = listing.content.decode()
    assert "tool calls per day: 1 / 4 (25%)" in text
    assert "provider tokens per month: 0 / 10 (0%)" in text
    page = client.get(f"/admin/django_webfetch/budget/{budget.pk}/change/")
    assert "tool calls per day: 1 / 4 (25%)" in page.content.decode()
    usage = client.get("/admin/django_webfetch/budgetusage/")
    assert usage.status_code == 200 and editor.username in usage.content.decode()


def test_budget_add_picks_the_user_by_name_not_by_raw_id(editor, superuser, client):
    """Issue 31 item 7: *Budget › Add* has a search box for the user (Django's user admin
    has search fields), or a select list for a staff user who may not view users."""
    from django.contrib.auth.models import Permission

    client.force_login(superuser)
    page = client.get("/admin/django_webfetch/budget/add/").content.decode()
    assert "vForeignKeyRawIdAdminField" not in page
    assert 'class="admin-autocomplete' in page and 'name="user"' in page
    found = client.get(
        "/admin/autocomplete/",
        {
            "term": editor.username,
            "app_label": "django_webfetch",
            "model_name": "budget",
            "field_name": "user",
        },
    ).json()
    assert [r["text"] for r in found["results"]] == [editor.username]

    staff = type(editor).objects.create_user("budgets", password="x", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_budget", "view_budget", "change_budget"])
    )
    client.force_login(staff)
    page = client.get("/admin/django_webfetch/budget/add/").content.decode()
    assert "vForeignKeyRawIdAdminField" not in page and "admin-autocomplete" not in page
    assert f">{editor.username}</option>" in page  # a select list of users


def test_a_negative_cost_ceiling_is_refused_by_the_form(editor):
    from decimal import Decimal

    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as info:
        Budget(user=editor, cost_per_day=Decimal("-1")).full_clean()
    assert "cost_per_day" in info.value.message_dict
    Budget(user=editor, cost_per_day=Decimal("0")).full_clean()
