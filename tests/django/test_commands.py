from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from django_webfetch.models import EgressEvent

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def run(*args):
    out = StringIO()
    call_command("webfetch", *args, stdout=out)
    return out.getvalue()


def test_explain_allowed(group_factory):
    group_factory("web", enabled=True)
    out = run("explain", "http://11.0.0.10/page")
    for step in (
        "scope",
        "url",
        "own_site",
        "denylist",
        "allowlist",
        "port",
        "proxy",
        "resolve",
        "addresses",
    ):
        assert step in out
    assert out.strip().endswith("ALLOWED")
    assert not EgressEvent.objects.exists()


def test_explain_denied_names_the_rule(group_factory):
    group_factory("web", enabled=True)
    with pytest.raises(CommandError, match="address_class:loopback"):
        run("explain", "http://127.0.0.1/")
    with pytest.raises(CommandError, match="scope"):
        run("explain", "http://11.0.0.10/", "--group", "system")


def test_explain_of_a_disabled_group_says_how_to_enable_it(group_factory):
    group_factory("web", enabled=False)
    out = StringIO()
    with pytest.raises(CommandError, match="scope"):
        call_command("webfetch", "explain", "http://11.0.0.10/", stdout=out)
    assert "DENIED (scope)" in out.getvalue()
    assert "group web is disabled: an admin enables it" in out.getvalue()
    assert out.getvalue().splitlines()[0] == "group      web (disabled)"


def test_explain_group_option_and_no_resolve(group_factory):
    group_factory("web", enabled=True)
    out = StringIO()
    with pytest.raises(CommandError, match="own_site"):
        call_command("webfetch", "explain", "http://site.example/", "--no-resolve", stdout=out)
    assert "own_site   fail" in out.getvalue()


def test_explain_without_resolving_allows_only_so_far(group_factory, lab):
    # Without the lookup nothing decided the addresses: never a bare ALLOWED.
    group_factory("web", enabled=True)
    lab.dns.set("news.lab.example", a=[lab.PUBLIC[0]])
    out = StringIO()
    call_command("webfetch", "explain", "http://news.lab.example/a", "--no-resolve", stdout=out)
    assert out.getvalue().splitlines()[-1] == (
        "ALLOWED SO FAR (not resolved: its addresses decide at fetch time)"
    )
    assert lab.dns.queries == []
    resolved = StringIO()
    call_command("webfetch", "explain", "http://news.lab.example/a", stdout=resolved)
    assert resolved.getvalue().splitlines()[-1] == "ALLOWED"
    assert lab.dns.lookups("news.lab.example") == 1


def test_explain_policy_unavailable(group_factory, settings):
    group_factory("web", enabled=True)
    settings.WEBFETCH_TIMEOUT = "x"
    with pytest.raises(CommandError):
        run("explain", "http://11.0.0.10/")


def test_prune_events(settings):
    now = timezone.now()
    for age in (1, 10, 100):
        EgressEvent.objects.create(decision="denied", created=now - timedelta(days=age))
    assert "1 egress event" in run("prune_events", "--days", "30", "--dry-run")
    assert EgressEvent.objects.count() == 3
    assert "Deleted 1" in run("prune_events", "--days", "30")
    settings.WEBFETCH_EVENT_RETENTION_DAYS = 5
    assert "Deleted 1" in run("prune_events")
    assert EgressEvent.objects.count() == 1
    with pytest.raises(CommandError):
        run("prune_events", "--days", "-1")


def test_a_refusal_is_printed_once_and_said_by_the_exit_status(group_factory, capsys):
    """From a terminal (``run_from_argv``), ``explain``'s refusal is its ``DENIED (reason)``
    line once: exit status 1, and no ``CommandError: denied: ...`` repeating it on stderr."""
    from django.core.management import ManagementUtility

    group_factory("web", enabled=True)
    with pytest.raises(SystemExit) as exited:
        ManagementUtility(["manage.py", "webfetch", "explain", "http://127.0.0.1/"]).execute()
    out, err = capsys.readouterr()
    assert exited.value.code == 1
    assert out.count("DENIED (") == 1 and "DENIED (address_class:loopback)" in out, out
    assert "denied" not in err.lower(), err
