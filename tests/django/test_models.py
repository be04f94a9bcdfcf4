from __future__ import annotations

from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from django_webfetch.models import (
    ConfiguredEndpoint,
    EgressScope,
    HostListEntry,
    SiteHost,
    ToolGroup,
)
from django_webfetch.net.policy import Scope

pytestmark = pytest.mark.django_db


def test_scope_choices_are_exactly_the_net_scopes():
    assert set(EgressScope.values) == {s.value for s in Scope}
    assert set(EgressScope.values) == {
        "none",
        "own_site",
        "configured_endpoint",
        "external_filtered",
    }


def test_builtin_groups_created_disabled():
    groups = {g.slug: g for g in ToolGroup.objects.all()}
    assert {s: (g.scope, g.enabled) for s, g in groups.items()} == {
        "web": ("external_filtered", False),
        "system": ("own_site", False),
        "code": ("none", False),
        "rag": ("configured_endpoint", False),
        "assistant": ("configured_endpoint", False),
        # django_webfetch.cms's content tools (list_pages, read_page)
        "content": ("none", False),
    }
    assert groups["web"].data_class == "publicContent"


def test_new_group_is_disabled_by_default():
    group = ToolGroup.objects.create(slug="acme")
    assert group.enabled is False
    assert group.scope == "none"
    assert not group.skip_approval_with_allowlist
    assert not group.allow_via_proxy


def test_no_missing_migrations():
    out = StringIO()
    call_command("makemigrations", "django_webfetch", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.parametrize(
    "value",
    [
        "docs.example.org",
        "*.example.org",
        "203.0.113.7",
        "2001:db8::1",
        "[2001:db8::1]:8443",
        "example.org:8080",
        "xn--bcher-kva.example",
    ],
)
def test_host_list_entry_accepts_valid_values(value, host_entry_factory):
    entry = host_entry_factory(value=value)
    assert entry.pk


@pytest.mark.parametrize(
    "value",
    [
        "*",
        "",
        "exa mple.org",
        "bücher.example",
        "http://example.org/",
        "10.0.0.0/8",
        "*.*.example.org",
        "example.org:0",
        "example.org:99999",
        "user@example.org",
        "0x7f.1",
        "2130706433",
        "foo*.example.org",
    ],
)
def test_host_list_entry_rejects_invalid_values(value, host_entry_factory):
    with pytest.raises(ValidationError) as info:
        host_entry_factory(value=value)
    assert "value" in info.value.message_dict
    assert not HostListEntry.objects.exists()


def test_host_list_entry_strips_surrounding_whitespace(host_entry_factory):
    assert host_entry_factory(value="  docs.example.org ").value == "docs.example.org"


def test_site_host_validation(site_host_factory):
    assert site_host_factory(host="WWW.Site.Example").host == "www.site.example"
    with pytest.raises(ValidationError):
        site_host_factory(host="*.site.example")
    with pytest.raises(ValidationError):
        site_host_factory(host="site.example:8000")
    with pytest.raises(ValidationError):
        SiteHost.objects.create(host="site.example", port=70000)
    assert SiteHost(host="site.example", port=8000).list_entries() == (
        "site.example:8000",
        "site.example",
    )
    assert SiteHost(host="2001:db8::1").list_entries() == ("[2001:db8::1]",)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://search.example/",
        "https://user:pw@search.example/",
        "https://search.example/?q=1",
        "https://search.example/#x",
        "https://bücher.example/",
        "https://0x7f.1/",
        "search.example",
    ],
)
def test_endpoint_rejects_bad_base_urls(url, endpoint_factory):
    with pytest.raises(ValidationError):
        endpoint_factory(base_url=url)


def test_endpoint_only_for_configured_endpoint_groups(endpoint_factory):
    with pytest.raises(ValidationError) as info:
        endpoint_factory(group="web")
    assert "group" in info.value.message_dict


def test_endpoint_secret_not_in_str_or_repr(endpoint_factory):
    endpoint = endpoint_factory(auth_header_value="Bearer s3cret-token")
    assert "s3cret" not in str(endpoint)
    assert "s3cret" not in repr(endpoint)
    assert endpoint.has_auth
    assert endpoint.host == "search.example.net"


def test_endpoint_header_must_be_one_line(endpoint_factory):
    with pytest.raises(ValidationError):
        endpoint_factory(auth_header_value="a\r\nX-Injected: 1")
    with pytest.raises(ValidationError):
        endpoint_factory(auth_header_name="Bad Header", auth_header_value="x")
    assert not ConfiguredEndpoint.objects.exists()


def test_builtin_groups_come_back_after_a_flush_and_keep_operator_changes():
    import importlib

    from django_webfetch.models.builtin import BUILTIN_GROUPS

    migration = importlib.import_module("django_webfetch.migrations.0002_builtin_groups")
    relabel = importlib.import_module("django_webfetch.migrations.0005_code_group_data_class")
    # 0002 as it shipped, with 0004's relabelling of the code group applied.
    migrated = tuple(
        {**group, **relabel.CODE_GROUP} if group["slug"] == "code" else group
        for group in migration.BUILTIN_GROUPS
    )
    # 0007_assistant adds the assistant group.
    assert migrated == BUILTIN_GROUPS[:4]
    ToolGroup.objects.filter(slug="web").update(enabled=True)
    ToolGroup.objects.filter(slug="rag").delete()
    call_command("migrate", "django_webfetch", verbosity=0)  # emits post_migrate
    assert ToolGroup.objects.get(slug="web").enabled is True
    assert ToolGroup.objects.get(slug="rag").enabled is False
