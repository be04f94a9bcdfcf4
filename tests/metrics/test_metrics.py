"""The metrics endpoint after real lab fetches (allowed, denied, failed), tool calls,
approvals, budgets and rate limits, and an assistant run with the scripted provider: the
counted series, read from the scrape text; label values stay bounded (no URL, no host, no
user name); only staff or the bearer token may read it."""

from __future__ import annotations

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from django_webfetch import runs
from django_webfetch.models import Budget, CallState
from django_webfetch.tools import ToolContext, run_tool
from tests.settle import runner_idle, settled_call, settled_run

from .conftest import EchoTool

pytestmark = pytest.mark.django_db
TOKEN = "metrics-token-0123456789"


@pytest.fixture(autouse=True)
def _urls(settings):
    settings.ROOT_URLCONF = "tests.metrics.urls"
    settings.WEBFETCH_METRICS_TOKEN = TOKEN


def scrape(client=None) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    client = client or Client()
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return text, samples


def value(samples, name, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def fetch(web, editor, host, path):
    return run_tool(
        "fetch_external_url",
        {"url": web.url(host, path)},
        user=editor,
        context=ToolContext(approved=True, call_id="metrics-call"),
    )


def test_lab_fetches_are_counted(web, editor):
    _, before = scrape()
    assert fetch(web, editor, "docs.lab.example", "/page?secret=1").ok
    assert fetch(web, editor, "intranet.lab.example", "/page").meta == {
        "reason": "address_class:private"
    }
    failed = fetch(web, editor, "docs.lab.example", "/truncated")
    assert not failed.ok
    text, after = scrape()

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    tool = "fetch_external_url"
    base = {"group": "web", "tool": tool}
    assert (
        delta("webfetch_egress_decisions_total", **base, outcome="allowed", reason="allowed") == 2
    )
    assert (
        delta(
            "webfetch_egress_decisions_total",
            **base,
            outcome="denied",
            reason="address_class:private",
        )
        == 1
    )
    failures = {
        labels: after[(name, labels)] - before.get((name, labels), 0.0)
        for name, labels in after
        if name == "webfetch_egress_decisions_total"
        and dict(labels).get("outcome") == "failed"
        and dict(labels).get("group") == "web"
    }
    assert sum(failures.values()) == 1, failures
    assert delta("webfetch_fetch_seconds_count", group="web", outcome="fetched") == 1
    assert delta("webfetch_fetch_seconds_count", group="web", outcome="failed") == 1
    assert delta("webfetch_fetch_bytes_count", group="web") == 2
    assert delta("webfetch_fetch_bytes_sum", group="web") > 1000
    # Bounded labels: no host, no URL, no user name.
    for forbidden in ("lab.example", "secret=1", "/page", editor.username, "11.0.0."):
        assert forbidden not in text, forbidden


def test_tool_calls_approvals_and_refusals(editor, approver, run_tools, settings):
    settings.WEBFETCH_API_RATES = {"calls": "1/minute"}
    _, before = scrape()
    waiting = runs.request_call("runs_echo", {"text": "a"}, user=editor)
    assert waiting.state == CallState.AWAITING_APPROVAL
    _, during = scrape()
    assert value(during, "webfetch_approvals_waiting") == 1
    assert value(during, "webfetch_approvals_oldest_waiting_seconds") >= 0
    runs.approve(waiting, by=approver)
    # It runs on the background runner: its outcome counts once it settled.
    assert settled_call(waiting).state == CallState.SUCCEEDED
    Budget.objects.create(user=editor, tool_calls_per_day=1)
    EchoTool.needs_approval = False
    assert runs.request_call("runs_echo", {"text": "b"}, user=editor).reason == (
        "budget_exceeded:tool_calls_per_day"
    )
    # An unknown tool name (a model may ask for anything) is counted as "other".
    with pytest.raises(runs.ToolNotOfferedError):
        runs.request_call("made-up-tool-name", {}, user=editor)
    api = APIClient()
    api.force_login(editor)
    body = {"tool": "runs_echo", "arguments": {"text": "c"}}
    api.post("/api/calls/", body, format="json")
    assert api.post("/api/calls/", body, format="json").status_code == 429
    runner_idle()  # the counters are written by the runner's threads too
    text, after = scrape()

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("webfetch_tool_calls_total", tool="runs_echo", state="awaiting_approval") == 1
    assert delta("webfetch_tool_calls_total", tool="runs_echo", state="approved") == 1
    assert delta("webfetch_tool_calls_total", tool="runs_echo", state="succeeded") == 1
    assert delta("webfetch_tool_calls_total", tool="runs_echo", state="failed") == 2
    assert delta("webfetch_tool_calls_total", tool="other", state="failed") == 1
    assert "made-up-tool-name" not in text
    assert value(after, "webfetch_approvals_waiting") == 0
    assert delta("webfetch_refusals_total", kind="budget_exceeded:tool_calls_per_day") == 2
    assert delta("webfetch_refusals_total", kind="rate_limited:calls") == 1


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_an_assistant_run_with_the_provider(editor, provider, settings):
    from tests.assistant.provider import Turn

    settings.ROOT_URLCONF = "tests.metrics.urls"
    _, before = scrape()
    provider.add(Turn(text="An answer."))
    api = APIClient()
    api.force_login(editor)
    conv = api.post("/api/conversations/", {}, format="json").json()["id"]
    posted = api.post(f"/api/conversations/{conv}/messages/", {"content": "hi"}, format="json")
    assert posted.status_code == 202, posted.content  # the run goes on in the background
    assert settled_run(posted.json()["id"]).state == "completed"
    runner_idle()  # the run's last task counted it after its last write
    run = api.get(f"/api/runs/{posted.json()['id']}/").json()
    assert run["state"] == "completed", run
    _, after = scrape()

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("webfetch_assistant_runs_total", provider="openai", outcome="completed") == 1
    assert delta("webfetch_provider_request_seconds_count", provider="openai", outcome="ok") == 1
    assert delta("webfetch_provider_tokens_total", provider="openai", kind="prompt") > 0
    assert delta("webfetch_provider_tokens_total", provider="openai", kind="completion") > 0
    assert (
        delta(
            "webfetch_egress_decisions_total",
            group="assistant",
            tool="assistant:provider",
            outcome="allowed",
            reason="allowed",
        )
        == 1
    )


def test_only_staff_or_the_token(user_factory, settings):
    anonymous = Client().get("/metrics")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    editor = Client()
    editor.force_login(user_factory())
    assert editor.get("/metrics").status_code == 403
    # A CMS editor is staff: staff alone reads no operator's numbers.
    cms_editor = Client()
    cms_editor.force_login(user_factory(staff=True))
    assert cms_editor.get("/metrics").status_code == 403
    from django.contrib.auth.models import Permission

    operator = user_factory(staff=True)
    operator.user_permissions.add(Permission.objects.get(codename="view_egressevent"))
    staff = Client()
    staff.force_login(operator)
    assert staff.get("/metrics").status_code == 200
    superuser = Client()
    superuser.force_login(user_factory(superuser=True))
    assert superuser.get("/metrics").status_code == 200
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    settings.WEBFETCH_METRICS_TOKEN = None
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 403
    assert staff.post("/metrics").status_code == 405


def test_a_short_token_is_a_configuration_error(settings):
    from django_webfetch.conf import conf
    from django_webfetch.exceptions import WebFetchConfigurationError

    settings.WEBFETCH_METRICS_TOKEN = "short"
    with pytest.raises(WebFetchConfigurationError, match="WEBFETCH_METRICS_TOKEN"):
        _ = conf.WEBFETCH_METRICS_TOKEN


def test_the_grafana_dashboard_reads_exposed_metrics():
    import json
    import re
    from pathlib import Path

    from django_webfetch.metrics import METRIC_NAMES

    path = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
    dashboard = json.loads(path.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {
        re.sub(r"_(bucket|count|sum)$", "", name)
        for expr in exprs
        for name in re.findall(r"webfetch_[a-z_]+", expr)
    }
    assert used == set(METRIC_NAMES)
