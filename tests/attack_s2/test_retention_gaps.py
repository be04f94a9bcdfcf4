"""Stored copies of a call's URL that ``retention.prune`` does not reach."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_webfetch import retention
from django_webfetch.mcp import paging, tasks
from django_webfetch.models import ToolCall
from django_webfetch.models.calls import CallState

pytestmark = pytest.mark.django_db


def test_a_tasks_fetch_window_outlives_the_calls_pruned_content(users):
    url = "https://intranet.example/hr/salaries?employee=42"
    call = ToolCall.objects.create(
        tool="fetch_external_url",
        user=users["editor"],
        conversation="mcp:token-1",
        arguments={"url": url, "mode": "main"},
        state=CallState.SUCCEEDED,
        finished_at=timezone.now() - timedelta(days=40),
        result={"content": "x", "error": "", "meta": {}},
    )
    tasks.remember_window(
        str(call.pk), paging.Window(url=url, mode="main", start=5000, length=5000)
    )
    retention.prune(content_days=0)
    call.refresh_from_db()
    assert call.arguments in ({}, None) or url not in str(call.arguments)  # pruned
    kept = tasks.window_of(str(call.pk))
    assert kept is None, f"the cache still holds {kept.url!r} after the call's content was pruned"
