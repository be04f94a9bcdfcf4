"""The operator page in the admin: decisions of the last day by reason (and per hour, as
an inline SVG), approvals waiting and their age, budgets in use, the slowest destinations."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from django_webfetch.admin.operations import hourly_chart, overview
from django_webfetch.models import Budget, BudgetUsage, CallState, EgressEvent, ToolCall

pytestmark = pytest.mark.django_db


def event(decision, reason="", host="docs.example.org", ago=timedelta(minutes=5), **fields):
    return EgressEvent.objects.create(
        created=timezone.now() - ago,
        decision=decision,
        reason=reason,
        url_host=host,
        tool="fetch_external_url",
        group_slug="web",
        **fields,
    )


@pytest.fixture
def records(editor):
    for _ in range(3):
        event("denied", "address_class:metadata", host="metadata.example")
    event("denied", "host_not_allowed")
    # Two fetches: each has its guard decision and its completed fetch, as a real fetch.
    event("allowed")
    event("fetched", duration=0.5)
    event("allowed", host="slow.example.org")
    event("fetched", host="slow.example.org", duration=9.0)
    event("failed", "timeout", host="slow.example.org", duration=20.0)
    event("denied", "address_class:loopback", ago=timedelta(days=2))  # outside the window
    now = timezone.now()
    old = ToolCall.objects.create(tool="fetch_external_url", group="web", user=editor)
    ToolCall.objects.filter(pk=old.pk).update(
        state=CallState.AWAITING_APPROVAL, created=now - timedelta(hours=2, minutes=5)
    )
    ToolCall.objects.create(
        tool="fetch_external_url", group="web", user=editor, state=CallState.AWAITING_APPROVAL
    )
    Budget.objects.create(user=editor, tool_calls_per_day=10)
    BudgetUsage.objects.create(user=editor, day=timezone.localdate(), tool_calls=10)
    return old


def test_the_overview(records, editor):
    data = overview()
    counts = {(r["decision"], r["reason"]): r["count"] for r in data["reasons"]}
    assert counts == {
        ("denied", "address_class:metadata"): 3,
        ("denied", "host_not_allowed"): 1,
        ("allowed", ""): 2,
        ("fetched", ""): 2,
        ("failed", "timeout"): 1,
    }
    assert data["waiting"]["count"] == 2
    assert data["waiting_calls"][0][0].pk == records.pk
    assert data["oldest_age"] == "2 h 5 min"
    [(budget, [line])] = data["budgets"]
    assert (line.kind, line.used, line.limit, line.exceeded) == ("tool_calls_per_day", 10, 10, True)
    slowest = data["slowest"][0]
    assert (slowest["url_host"], slowest["count"], slowest["failed"]) == ("slow.example.org", 2, 1)
    assert slowest["mean"] == pytest.approx(14.5)
    # The chart: 7 decisions in the last hour or two, stacked by outcome; a completed
    # fetch counts once, by its guard decision (issue 31: not "allowed" twice).
    bars = data["chart"]["bars"]
    assert {b["outcome"] for b in bars} == {"allowed", "denied", "failed"}
    assert sum(int(b["title"].rsplit(": ", 1)[1]) for b in bars) == 7
    assert sum(int(b["title"].rsplit(": ", 1)[1]) for b in bars if b["outcome"] == "allowed") == 2


def test_the_chart_scales_to_the_busiest_hour():
    now = timezone.now()
    hours = [{"hour": now, "allowed": 0, "denied": 0, "failed": 0} for _ in range(24)]
    hours[-1].update(allowed=30, denied=10)
    hours[0].update(failed=20)
    chart = hourly_chart(hours)
    assert chart["most"] == 40
    tallest = sum(b["height"] for b in chart["bars"] if b["x"] > 400)
    assert tallest == pytest.approx(110, abs=0.2)
    assert max(b["x"] + b["width"] for b in chart["bars"]) <= chart["width"]
    assert hourly_chart([{"hour": now, "allowed": 0, "denied": 0, "failed": 0}])["bars"] == []
    # The hours are written under the bars: every sixth and the last, in TIME_ZONE.
    labels = chart["labels"]
    assert [label["x"] for label in labels] == sorted(label["x"] for label in labels)
    assert len(labels) == 5 and labels[-1]["text"] == f"{timezone.localtime(now):%H}:00"
    # The last hour's label ends at the right edge instead of running past it (issue 31).
    assert (labels[-1]["x"], labels[-1]["anchor"]) == (chart["width"], "end")
    assert {label["anchor"] for label in labels[:-1]} == {"start"}
    assert chart["label_y"] < chart["height"]


def test_the_page_in_the_admin(records, superuser, client):
    client.force_login(superuser)
    index = client.get("/admin/django_webfetch/")
    assert "/admin/django_webfetch/operationsoverview/" in index.content.decode()
    page = client.get("/admin/django_webfetch/operationsoverview/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<svg" in html and html.count("<rect ") >= 3
    # No JavaScript of its own (the admin's base template brings its theme switcher).
    assert "<script" not in html.split('id="content-main" class="webfetch-ops"', 1)[1]
    assert "address_class:metadata</code></td><td>3</td>" in html
    # One fetch is two rows, each saying what it counts (issue 31).
    assert "<td>guard allowed (one per hop)</td>" in html
    assert "<td>fetch completed (one per fetch)</td>" in html
    assert "they are one fetch, not two" in html
    assert 'text-anchor="end"' in html
    assert "Approvals waiting: 2 &middot; oldest 2 h 5 min" in html
    assert f"/admin/django_webfetch/toolcall/{records.pk}/change/" in html
    assert re.search(r'class="over">10</td><td>10</td>', html)
    assert "<code>slow.example.org</code></td><td>2</td><td>1</td><td>14.50</td>" in html


def test_a_host_is_escaped(superuser, client):
    event("fetched", host='<img src=x onerror="alert(1)">', duration=1.0)
    client.force_login(superuser)
    html = client.get("/admin/django_webfetch/operationsoverview/").content.decode()
    assert "<img src=x" not in html
    assert "&lt;img src=x" in html


def test_staff_without_the_audit_permission_may_not_see_it(user_factory, client):
    from django.contrib.auth.models import Permission

    staff = user_factory(staff=True)
    client.force_login(staff)
    assert client.get("/admin/django_webfetch/operationsoverview/").status_code == 403
    staff.user_permissions.add(
        Permission.objects.get(
            codename="view_egressevent", content_type__app_label="django_webfetch"
        )
    )
    assert client.get("/admin/django_webfetch/operationsoverview/").status_code == 200


def test_nothing_to_show(superuser, client):
    client.force_login(superuser)
    html = client.get("/admin/django_webfetch/operationsoverview/").content.decode()
    assert "No egress decisions in the last 24 hours." in html
    assert "Nothing waits for approval." in html
    assert "No budget is set." in html
    assert "No fetch in the last 24 hours." in html
