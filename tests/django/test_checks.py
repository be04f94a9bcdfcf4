from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_webfetch import checks
from django_webfetch.models import HostListEntry, SiteHost


def ids(messages):
    return [m.id for m in messages]


def test_clean_settings_have_no_messages(settings):
    for check in (
        checks.check_settings,
        checks.check_bounds,
        checks.check_nat64_prefixes,
        checks.check_nameservers,
        checks.check_ca_file,
        checks.check_celery_installed,
        checks.check_self_approval,
    ):
        assert check() == []


def test_e001_unreadable_setting(settings):
    settings.WEBFETCH_TIMEOUT = "20 seconds"
    settings.WEBFETCH_PROXY = 3
    messages = checks.check_settings()
    assert ids(messages) == ["django_webfetch.E001", "django_webfetch.E001"]
    assert "WEBFETCH_PROXY" in messages[0].msg or "WEBFETCH_PROXY" in messages[1].msg
    # The other checks skip a setting E001 already reports.
    assert checks.check_bounds() == []


def test_w001_bound_above_ceiling(settings):
    settings.WEBFETCH_MAX_RESPONSE_BYTES = 50 * 1024 * 1024
    settings.WEBFETCH_TIMEOUT = 20
    messages = checks.check_bounds()
    assert ids(messages) == ["django_webfetch.W001"]
    assert "WEBFETCH_MAX_RESPONSE_BYTES" in messages[0].msg


def test_e002_bad_nat64_prefixes(settings):
    settings.WEBFETCH_NAT64_PREFIXES = ["64:ff9b::/96", "2001:db8::/95"]
    assert ids(checks.check_nat64_prefixes()) == ["django_webfetch.E002"]
    settings.WEBFETCH_NAT64_PREFIXES = ["64:ff9b::/96"]
    assert checks.check_nat64_prefixes() == []


@pytest.mark.parametrize("servers", [["dns.example"], [], ["192.0.2.1", "nope"]])
def test_e003_bad_nameservers(settings, servers):
    settings.WEBFETCH_DNS_NAMESERVERS = servers
    assert ids(checks.check_nameservers()) == ["django_webfetch.E003"]


def test_e004_missing_ca_file(settings, tmp_path):
    settings.WEBFETCH_CA_FILE = str(tmp_path / "missing.pem")
    assert ids(checks.check_ca_file()) == ["django_webfetch.E004"]
    pem = tmp_path / "ca.pem"
    pem.write_text("x")
    settings.WEBFETCH_CA_FILE = str(pem)
    assert checks.check_ca_file() == []


def test_e005_async_runs_without_celery(settings, monkeypatch):
    settings.WEBFETCH_ASYNC_RUNS = True
    monkeypatch.setattr(checks, "_celery_installed", lambda: True)
    assert checks.check_celery_installed() == []
    monkeypatch.setattr(checks, "_celery_installed", lambda: False)
    messages = checks.check_celery_installed()
    assert ids(messages) == ["django_webfetch.E005"]
    assert "django-webfetch[celery]" in messages[0].hint


def test_celery_installed_follows_the_environment():
    try:
        import celery  # noqa: F401
    except ImportError:
        installed = False
    else:
        installed = True
    assert checks._celery_installed() is installed


def test_w005_self_approval_in_production(settings):
    settings.WEBFETCH_ALLOW_SELF_APPROVAL = True
    assert ids(checks.check_self_approval()) == ["django_webfetch.W005"]
    settings.DEBUG = True
    assert checks.check_self_approval() == []


def test_e008_rejected_tool(tool_registry, monkeypatch):
    assert checks.check_tools() == []
    monkeypatch.setattr(
        tool_registry, "_builtins", (*tool_registry._builtins, "tests.django.test_checks.NotATool")
    )
    tool_registry.reset()
    assert ids(checks.check_tools()) == ["django_webfetch.E008"]


NotATool = object()


# -- database checks ----------------------------------------------------------------------


def db_ids():
    return ids(checks.check_database(databases=["default"]))


@pytest.mark.django_db
def test_database_checks_only_with_databases(host_entry_factory):
    entry = host_entry_factory(value="docs.example.org")
    HostListEntry.objects.filter(pk=entry.pk).update(value="*")
    assert checks.check_database() == []
    assert db_ids() == ["django_webfetch.E006"]


@pytest.mark.django_db
def test_e006_invalid_entry_in_database(host_entry_factory):
    entry = host_entry_factory(value="docs.example.org", list="deny")
    assert db_ids() == []
    HostListEntry.objects.filter(pk=entry.pk).update(value="10.0.0.0/8")
    assert db_ids() == ["django_webfetch.E006"]


@pytest.mark.django_db
def test_e007_invalid_site_host_in_database(site_host_factory):
    host = site_host_factory()
    SiteHost.objects.filter(pk=host.pk).update(host="*.bad")
    assert db_ids() == ["django_webfetch.E007"]


@pytest.mark.django_db
def test_w002_private_endpoint_with_debug_off(settings, endpoint_factory):
    endpoint_factory(base_url="http://search.internal/api", allow_private=True)
    assert db_ids() == ["django_webfetch.W002"]
    settings.DEBUG = True
    assert db_ids() == []


@pytest.mark.django_db
def test_w003_proxy_without_allowlist(settings, monkeypatch, group_factory, host_entry_factory):
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    group_factory("web", enabled=True, allow_via_proxy=True)
    assert db_ids() == []
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert db_ids() == ["django_webfetch.W003"]
    monkeypatch.delenv("HTTPS_PROXY")
    settings.WEBFETCH_PROXY = "http://proxy.example:3128"
    assert db_ids() == ["django_webfetch.W003"]
    host_entry_factory(value="docs.example.org")
    assert db_ids() == []


@pytest.mark.django_db
def test_w004_endpoint_group_without_endpoint(group_factory, endpoint_factory):
    group_factory("rag", enabled=True)
    assert db_ids() == ["django_webfetch.W004"]
    endpoint_factory()
    assert db_ids() == []


@pytest.mark.django_db
def test_w006_unreadable_site_domain():
    from django.contrib.sites.models import Site

    site = Site.objects.get_current()
    site.domain = "https://www.site.example/path"  # URL-shaped: still read as a host
    site.save()
    assert db_ids() == []
    site.domain = "exa mple.org"
    site.save()
    assert db_ids() == ["django_webfetch.W006"]


@pytest.mark.django_db
def test_checks_are_registered(settings, host_entry_factory):
    call_command("check")
    settings.WEBFETCH_TIMEOUT = "soon"
    with pytest.raises(SystemCheckError, match="django_webfetch.E001"):
        call_command("check")
    settings.WEBFETCH_TIMEOUT = 20
    entry = host_entry_factory()
    HostListEntry.objects.filter(pk=entry.pk).update(value="")
    call_command("check")  # database checks need --database
    with pytest.raises(SystemCheckError, match="django_webfetch.E006"):
        call_command("check", "--database", "default")
