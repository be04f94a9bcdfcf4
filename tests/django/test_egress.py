"""The egress policy service: scopes, lists, fail-closed behaviour, audit rows.

Decisions are taken by the real guard (``net.explain``) on IP-literal URLs, so no DNS and
no connection is involved; end-to-end fetches are in test_lab_tools.py.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError

from django_webfetch.egress import (
    EgressRecorder,
    PluginGrant,
    own_site_hosts,
    policy_for,
)
from django_webfetch.models import (
    EgressEvent,
    HostListEntry,
    SiteHost,
    ToolGroup,
)
from django_webfetch.net import EgressDenied, EgressPolicy, GuardEvent, Scope, explain

pytestmark = pytest.mark.django_db

OWN = "http://11.0.0.12/"
ENDPOINT = "http://11.0.0.11/search?q=x"
PUBLIC = "http://11.0.0.10/page"
PRIVATE = "http://10.0.0.5/"


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def decide(group, url, **kwargs):
    result = explain(url, policy=policy_for(group, **kwargs), resolve=False)
    return "allowed" if result.allowed else result.reason


@pytest.fixture
def matrix(group_factory, site_host_factory, endpoint_factory):
    site_host_factory(host="11.0.0.12")
    group_factory("g-none", scope="none", enabled=True)
    group_factory("g-own", scope="own_site", enabled=True)
    ep = group_factory("g-ep", scope="configured_endpoint", enabled=True)
    group_factory("g-ext", scope="external_filtered", enabled=True)
    endpoint_factory(base_url="http://11.0.0.11/search", group=ep)


@pytest.mark.parametrize(
    ("group", "url", "expected"),
    [
        ("g-none", OWN, "scope"),
        ("g-none", ENDPOINT, "scope"),
        ("g-none", PUBLIC, "scope"),
        ("g-none", PRIVATE, "scope"),
        ("g-own", OWN, "allowed"),
        ("g-own", ENDPOINT, "not_own_site"),
        ("g-own", PUBLIC, "not_own_site"),
        ("g-own", PRIVATE, "not_own_site"),
        ("g-ep", OWN, "own_site"),
        ("g-ep", ENDPOINT, "allowed"),
        ("g-ep", "http://11.0.0.11/other", "not_configured_endpoint"),
        ("g-ep", PUBLIC, "not_configured_endpoint"),
        ("g-ep", PRIVATE, "not_configured_endpoint"),
        ("g-ext", OWN, "own_site"),
        ("g-ext", ENDPOINT, "allowed"),
        ("g-ext", PUBLIC, "allowed"),
        ("g-ext", PRIVATE, "address_class:private"),
        ("g-ext", "http://site.example/", "own_site"),
        ("g-ext", "http://testserver/", "own_site"),
        ("g-ext", "http://example.com/", "own_site"),  # django.contrib.sites domain
        ("g-ext", "http://169.254.169.254/latest/meta-data/", "address_class:metadata"),
    ],
)
def test_scope_matrix(matrix, group, url, expected):
    assert decide(group, url) == expected


def test_policy_fields_per_scope(matrix):
    assert policy_for("g-none").scope is Scope.NONE
    own = policy_for("g-own")
    assert own.scope is Scope.OWN_SITE
    assert own.endpoints == () and own.allow_private_hosts == ()
    ep = policy_for("g-ep")
    assert ep.endpoints == ("http://11.0.0.11/search",)
    assert "application/json" in ep.media_types
    ext = policy_for(ToolGroup.objects.get(slug="g-ext"))
    assert ext.scope is Scope.EXTERNAL_FILTERED
    assert ext.endpoints == () and ext.allow_private_hosts == ()
    assert "application/json" not in ext.media_types
    assert ext.label == "g-ext"


def test_private_endpoint_only_with_allow_private(group_factory, endpoint_factory):
    ep = group_factory("g-ep", scope="configured_endpoint", enabled=True)
    endpoint = endpoint_factory(base_url="http://10.0.0.5/search", group=ep)
    assert decide("g-ep", "http://10.0.0.5/search?q=1") == "address_class:private"
    endpoint.allow_private = True
    endpoint.save()
    assert policy_for("g-ep").allow_private_hosts == ("10.0.0.5",)
    assert decide("g-ep", "http://10.0.0.5/search?q=1") == "allowed"
    # Other hosts stay refused, and an external group never gets the exemption.
    assert decide("g-ep", "http://10.0.0.6/search") == "not_configured_endpoint"
    group_factory("g-ext", scope="external_filtered", enabled=True)
    assert policy_for("g-ext").allow_private_hosts == ()
    assert decide("g-ext", "http://10.0.0.5/search") == "address_class:private"


def test_metadata_endpoint_refused_even_with_allow_private(group_factory, endpoint_factory):
    ep = group_factory("g-ep", scope="configured_endpoint", enabled=True)
    endpoint_factory(base_url="http://169.254.169.254/latest", group=ep, allow_private=True)
    assert decide("g-ep", "http://169.254.169.254/latest/meta-data") == "address_class:metadata"


def test_disabled_endpoint_is_not_reachable(group_factory, endpoint_factory):
    ep = group_factory("g-ep", scope="configured_endpoint", enabled=True)
    endpoint_factory(base_url="http://11.0.0.11/search", group=ep, enabled=False)
    assert decide("g-ep", ENDPOINT) == "not_configured_endpoint"


@pytest.mark.parametrize("slug", ["web", "system", "code", "rag"])
def test_builtin_groups_get_no_egress_until_enabled(slug):
    policy = policy_for(slug)
    assert policy.scope is Scope.NONE
    assert decide(slug, PUBLIC) == "scope"


def test_missing_group_gets_no_egress():
    assert policy_for("no-such-group").scope is Scope.NONE


def test_unknown_scope_in_database_gets_no_egress(group_factory):
    group = group_factory("web", enabled=True)
    ToolGroup.objects.filter(pk=group.pk).update(scope="any_host")
    assert policy_for("web").scope is Scope.NONE


def test_mis_declared_group_gets_no_egress(group_factory):
    group_factory("web", enabled=True, scope="own_site")
    assert policy_for("web", require_scope=Scope.EXTERNAL_FILTERED).scope is Scope.NONE
    group_factory("web", enabled=True, scope="external_filtered")
    assert policy_for("web", require_scope="external_filtered").scope is Scope.EXTERNAL_FILTERED


def test_list_edits_apply_on_the_next_call(group_factory, host_entry_factory):
    group_factory("web", enabled=True)
    assert decide("web", PUBLIC) == "allowed"
    deny = host_entry_factory(value="11.0.0.10", list="deny")
    assert decide("web", PUBLIC) == "denylist"
    deny.delete()
    assert decide("web", PUBLIC) == "allowed"
    host_entry_factory(value="11.0.0.99", list="allow")
    assert decide("web", PUBLIC) == "not_allowlisted"
    host_entry_factory(value="11.0.0.10", list="allow")
    assert decide("web", PUBLIC) == "allowed"
    ToolGroup.objects.filter(slug="web").update(enabled=False)
    assert decide("web", PUBLIC) == "scope"


def test_allowlist_never_widens(group_factory, host_entry_factory, site_host_factory):
    group_factory("web", enabled=True)
    site_host_factory(host="11.0.0.12")
    host_entry_factory(value="10.0.0.5")
    host_entry_factory(value="11.0.0.12")
    assert decide("web", PRIVATE) == "address_class:private"
    assert decide("web", OWN) == "own_site"


def test_invalid_entry_in_database_refuses_the_whole_group(group_factory, host_entry_factory):
    group_factory("web", enabled=True)
    group_factory("other", scope="external_filtered", enabled=True)
    entry = host_entry_factory(value="11.0.0.99", list="deny")
    assert decide("web", PUBLIC) == "allowed"
    HostListEntry.objects.filter(pk=entry.pk).update(value="*")
    assert decide("web", PUBLIC) == "invalid_list"
    assert decide("web", "http://11.0.0.13/") == "invalid_list"
    assert decide("other", PUBLIC) == "allowed"


def test_invalid_site_host_in_database_is_policy_unavailable(group_factory, site_host_factory):
    group_factory("web", enabled=True)
    host = site_host_factory(host="www.site.example")
    SiteHost.objects.filter(pk=host.pk).update(host="*.site.example")
    with pytest.raises(EgressDenied) as info:
        policy_for("web")
    assert info.value.reason == "policy_unavailable"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WEBFETCH_TIMEOUT", "slow"),
        ("WEBFETCH_DNS_NAMESERVERS", "192.0.2.1"),
        ("WEBFETCH_MAX_RESPONSE_BYTES", None),
        ("WEBFETCH_NAT64_PREFIXES", "64:ff9b::/96"),
    ],
)
def test_unreadable_settings_refuse_with_policy_unavailable(settings, group_factory, name, value):
    group_factory("web", enabled=True)
    setattr(settings, name, value)
    with pytest.raises(EgressDenied) as info:
        policy_for("web")
    assert info.value.reason == "policy_unavailable"
    assert "slow" not in str(info.value)


def test_unreadable_database_refuses_with_policy_unavailable(group_factory, monkeypatch):
    group_factory("web", enabled=True)

    def broken(*args, **kwargs):
        raise DatabaseError("connection lost")

    monkeypatch.setattr(ToolGroup.objects, "filter", broken)
    with pytest.raises(EgressDenied) as info:
        policy_for("web")
    assert info.value.reason == "policy_unavailable"


def test_invalid_group_argument_is_policy_unavailable():
    with pytest.raises(EgressDenied) as info:
        policy_for(42)
    assert info.value.reason == "policy_unavailable"


def test_settings_reach_the_policy(settings, group_factory):
    group_factory("web", enabled=True)
    settings.WEBFETCH_DNS_NAMESERVERS = ["192.0.2.53"]
    settings.WEBFETCH_DNS_PORT = 5353
    settings.WEBFETCH_TIMEOUT = 60  # clamped
    settings.WEBFETCH_CONNECT_TIMEOUT = 2
    settings.WEBFETCH_MAX_RESPONSE_BYTES = 1000
    settings.WEBFETCH_MAX_REDIRECTS = 1
    settings.WEBFETCH_USER_AGENT = "acme-bot/1"
    settings.WEBFETCH_NAT64_PREFIXES = ["64:ff9b::/96"]
    policy = policy_for("web")
    assert policy.nameservers == ("192.0.2.53",)
    assert policy.dns_port == 5353
    assert policy.total_timeout == 20.0
    assert policy.connect_timeout == 2.0
    assert policy.max_body_bytes == 1000
    assert policy.max_redirects == 1
    assert policy.user_agent == "acme-bot/1"
    assert policy.nat64_prefixes == ("64:ff9b::/96",)


def test_proxy_refused_unless_allowed_with_allowlist(settings, group_factory, host_entry_factory):
    group = group_factory("web", enabled=True)
    settings.WEBFETCH_PROXY = "http://proxy.example:3128"
    assert decide("web", PUBLIC) == "proxy"
    group.allow_via_proxy = True
    group.save()
    assert decide("web", PUBLIC) == "proxy"  # no allowlist yet
    host_entry_factory(value="11.0.0.10")
    assert decide("web", PUBLIC) == "allowed"


def test_own_site_hosts_sources(settings, site_host_factory):
    from django.contrib.sites.models import Site

    settings.ALLOWED_HOSTS = ["*", ".wild.example", "app.example", "bad host", "[::1]"]
    Site.objects.filter(pk=1).update(domain="cms.example:8000")
    site_host_factory(host="www.site.example", port=8443)
    hosts = own_site_hosts()
    assert hosts[:2] == ("www.site.example:8443", "cms.example:8000")
    assert set(hosts) == {
        "www.site.example:8443",
        "cms.example:8000",
        "www.site.example",
        "cms.example",
        "wild.example",
        "*.wild.example",
        "app.example",
        "[::1]",
    }


def test_leading_dot_allowed_host_is_refused_everywhere_but_reached_nowhere(
    settings, group_factory
):
    """``.wild.example`` in ALLOWED_HOSTS: Django serves the apex and every subdomain, so the
    other scopes refuse them all (DESIGN.md §3 step 4); the own_site scope reaches only
    non-wildcard hosts (§2), so probe_url cannot be aimed at any name under the domain."""
    from django.contrib.sites.models import Site

    from django_webfetch.egress import own_site_base

    Site.objects.all().delete()
    settings.ALLOWED_HOSTS = [".wild.example", "app.example"]
    group_factory("g-own", scope="own_site", enabled=True)
    group_factory("g-ext", scope="external_filtered", enabled=True)
    assert set(own_site_hosts()) == {"wild.example", "*.wild.example", "app.example"}
    assert own_site_hosts(reach=True) == ("app.example",)
    assert policy_for("g-own").own_site_hosts == ("app.example",)
    for url in ("http://wild.example/", "http://www.wild.example/", "http://app.example/"):
        assert decide("g-ext", url) == "own_site"
    assert decide("g-own", "http://app.example/") == "allowed"
    assert decide("g-own", "http://wild.example/") == "not_own_site"
    assert decide("g-own", "http://www.wild.example/") == "not_own_site"
    # The base a path is joined to comes from the same home, with the same rule.
    assert own_site_base() == "https://app.example"
    settings.ALLOWED_HOSTS = [".wild.example"]
    assert own_site_base() is None


def test_own_site_port_specific_site_host(group_factory, site_host_factory):
    group_factory("system", enabled=True)
    group_factory("web", enabled=True)
    site_host_factory(host="11.0.0.12", port=8443, scheme="https")
    assert decide("system", "https://11.0.0.12:8443/") == "allowed"
    assert decide("system", "https://11.0.0.12:9000/") == "port"
    # Refused on every port for the other scopes.
    assert decide("web", "https://11.0.0.12/") == "own_site"
    assert decide("web", "https://11.0.0.12:8443/") == "own_site"


# -- plugin instance grants (DESIGN.md §8) -------------------------------------------------


class FakeInstance:
    pk = 3

    def __init__(self, *hosts):
        self.hosts = hosts

    def egress_grant(self):
        return PluginGrant(hosts=self.hosts)


def test_plugin_grant_is_the_allowlist_not_the_group_allowlist(group_factory, host_entry_factory):
    """DESIGN.md §8: the effective grant (declaration ∩ operator grant, computed by the
    instance) is the allowlist; the group's allowlist neither narrows nor widens it, its
    denylist still applies."""
    group_factory("web", enabled=True)
    plugin = FakeInstance("api.acme.example", "*.cdn.example")
    assert policy_for("web", plugin_instance=plugin).allowlist == (
        "api.acme.example",
        "*.cdn.example",
    )
    host_entry_factory(value="*.acme.example")
    host_entry_factory(value="docs.example.org")
    host_entry_factory(value="img.cdn.example", list="deny")
    policy = policy_for("web", plugin_instance=plugin)
    assert policy.allowlist == ("api.acme.example", "*.cdn.example")
    assert policy.denylist == ("img.cdn.example",)
    assert policy.label == "web:plugin:3"


@pytest.mark.parametrize("plugin", [object(), FakeInstance()])
def test_plugin_without_grant_gets_no_egress(group_factory, plugin):
    group_factory("web", enabled=True)
    assert policy_for("web", plugin_instance=plugin).scope is Scope.NONE


def test_plugin_in_a_disabled_group_gets_no_egress(group_factory):
    group_factory("web", enabled=False)
    assert policy_for("web", plugin_instance=FakeInstance("a.example")).scope is Scope.NONE


def test_plugin_grant_with_a_port_is_refused(group_factory):
    group_factory("web", enabled=True)
    with pytest.raises(EgressDenied, match="invalid_list"):
        policy_for("web", plugin_instance=FakeInstance("a.example:8080"))


# -- the audit recorder ---------------------------------------------------------------------


def test_recorder_writes_one_row_per_event(user_factory, group_factory):
    user = user_factory()
    group_factory("web")
    recorder = EgressRecorder(
        tool="fetch_external_url",
        group="web",
        user=user,
        call_id="c-1",
        plugin_instance="acme.instance:4",
    )
    recorder(
        GuardEvent(
            hop=0,
            url_host="docs.example.org",
            port=443,
            decision="allowed",
            reason="allowed",
            addresses=("11.0.0.10",),
            duration=0.01,
        )
    )
    recorder(
        GuardEvent(
            hop=0,
            url_host="docs.example.org",
            port=443,
            decision="fetched",
            reason="ok",
            addresses=("11.0.0.10", "not-an-ip"),
            bytes=12,
            duration=0.2,
            status=200,
        )
    )
    rows = list(EgressEvent.objects.order_by("pk"))
    assert [r.decision for r in rows] == ["allowed", "fetched"]
    last = rows[-1]
    assert (last.tool, last.group.slug, last.group_slug, last.user, last.call_id) == (
        "fetch_external_url",
        "web",
        "web",
        user,
        "c-1",
    )
    assert last.plugin_ref == "acme.instance:4"
    assert last.plugin_instance is None
    assert (last.url_host, last.port, last.status, last.bytes) == ("docs.example.org", 443, 200, 12)
    assert last.addresses == ["11.0.0.10"]


def test_recorder_sanitises_fields():
    recorder = EgressRecorder(tool="t", group="missing")
    row = recorder.record(
        decision="weird",
        reason="Bad Reason\n<script>",
        url_host="ex\x00ample",
        port=99999,
        detail="line\nbreak\x1b[31m",
        status=42,
        hop=-3,
    )
    assert row.decision == "failed"
    assert row.reason == "bad_reason__script_"
    assert row.url_host == "ex?ample"
    assert row.port is None and row.status is None and row.hop == 0
    assert "\n" not in row.detail and "\x1b" not in row.detail
    assert row.group is None


def test_recorder_records_exceptions():
    recorder = EgressRecorder(tool="t", group="web")
    row = recorder.record_exception(
        EgressDenied("policy_unavailable", detail="why"), url_host="a.example", port=443
    )
    assert (row.decision, row.reason, row.detail) == ("denied", "policy_unavailable", "why")
    row = recorder.record_exception(RuntimeError("server said <b>hi</b>"))
    assert (row.decision, row.reason, row.detail) == ("failed", "internal_error", "RuntimeError")


def test_policy_is_an_egress_policy(group_factory):
    group_factory("web", enabled=True)
    assert isinstance(policy_for("web"), EgressPolicy)


def test_recorder_keeps_no_library_text_of_failures():
    recorder = EgressRecorder(tool="t", group="web")
    recorder(
        GuardEvent(
            hop=0,
            url_host="a.example",
            port=80,
            decision="failed",
            reason="fetch_error",
            detail="RemoteProtocolError: illegal header line: b'X-Evil: ignore all'",
        )
    )
    assert EgressEvent.objects.get().detail == "RemoteProtocolError"
