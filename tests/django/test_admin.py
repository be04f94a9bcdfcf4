from __future__ import annotations

import pytest
from django.urls import reverse

from django_webfetch.models import (
    ConfiguredEndpoint,
    EgressEvent,
    HostListEntry,
    ToolGroup,
)

pytestmark = pytest.mark.django_db

SECRET = "Bearer s3cr3t-t0ken-value"


@pytest.fixture
def client_admin(client, superuser):
    client.force_login(superuser)
    return client


def inline_data(group, entries):
    data = {
        "slug": group.slug,
        "name": group.name,
        "description": group.description,
        "scope": group.scope,
        "data_class": group.data_class,
        "host_entries-TOTAL_FORMS": str(len(entries)),
        "host_entries-INITIAL_FORMS": "0",
        "host_entries-MIN_NUM_FORMS": "0",
        "host_entries-MAX_NUM_FORMS": "1000",
    }
    for i, (kind, value) in enumerate(entries):
        data[f"host_entries-{i}-list"] = kind
        data[f"host_entries-{i}-value"] = value
        data[f"host_entries-{i}-note"] = ""
    return data


def test_admin_pages_load(client_admin, endpoint_factory, site_host_factory):
    endpoint_factory()
    site_host_factory()
    EgressEvent.objects.create(decision="denied", reason="scope", url_host="a.example")
    for model in ("toolgroup", "sitehost", "configuredendpoint", "egressevent"):
        url = reverse(f"admin:django_webfetch_{model}_changelist")
        assert client_admin.get(url).status_code == 200
    web = ToolGroup.objects.get(slug="web")
    assert (
        client_admin.get(
            reverse("admin:django_webfetch_toolgroup_change", args=[web.pk])
        ).status_code
        == 200
    )


def test_toggle_groups_with_actions(client_admin):
    url = reverse("admin:django_webfetch_toolgroup_changelist")
    pks = list(ToolGroup.objects.filter(slug__in=["web", "rag"]).values_list("pk", flat=True))
    client_admin.post(url, {"action": "enable_groups", "_selected_action": pks})
    assert set(ToolGroup.objects.filter(enabled=True).values_list("slug", flat=True)) == {
        "web",
        "rag",
    }
    client_admin.post(url, {"action": "disable_groups", "_selected_action": pks})
    assert not ToolGroup.objects.filter(enabled=True).exists()


def test_inline_list_entries_validated_per_entry(client_admin):
    web = ToolGroup.objects.get(slug="web")
    url = reverse("admin:django_webfetch_toolgroup_change", args=[web.pk])
    response = client_admin.post(
        url,
        inline_data(web, [("allow", "docs.example.org"), ("deny", "*"), ("allow", "10.0.0.0/8")]),
    )
    assert response.status_code == 200  # form redisplayed with errors
    errors = response.context["inline_admin_formsets"][0].formset.errors
    assert errors[0] == {}
    assert "value" in errors[1] and "value" in errors[2]
    assert not HostListEntry.objects.exists()
    response = client_admin.post(
        url, {**inline_data(web, [("allow", "docs.example.org")]), "enabled": "on"}
    )
    assert response.status_code == 302
    assert list(HostListEntry.objects.values_list("value", flat=True)) == ["docs.example.org"]
    assert ToolGroup.objects.get(slug="web").enabled


def endpoint_post(endpoint, **changes):
    data = {
        "group": endpoint.group_id,
        "name": endpoint.name,
        "base_url": endpoint.base_url,
        "auth_header_name": endpoint.auth_header_name,
        "auth_header_value": "",
        "enabled": "on",
    }
    data.update(changes)
    return data


def test_endpoint_secret_is_write_only(client_admin, endpoint_factory):
    endpoint = endpoint_factory(auth_header_value=SECRET)
    change = reverse("admin:django_webfetch_configuredendpoint_change", args=[endpoint.pk])
    for url in (
        change,
        reverse("admin:django_webfetch_configuredendpoint_changelist"),
        reverse("admin:django_webfetch_configuredendpoint_history", args=[endpoint.pk]),
    ):
        assert "s3cr3t" not in client_admin.get(url).content.decode()
    # Saving with the field left empty keeps the secret.
    response = client_admin.post(change, endpoint_post(endpoint, name="renamed"))
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.name, endpoint.auth_header_value) == ("renamed", SECRET)
    # A new value replaces it; a validation error never echoes it back.
    response = client_admin.post(
        change, endpoint_post(endpoint, base_url="ftp://x/", auth_header_value="new-s3cr3t")
    )
    assert response.status_code == 200
    assert "s3cr3t" not in response.content.decode()
    client_admin.post(change, endpoint_post(endpoint, auth_header_value="Token other"))
    endpoint.refresh_from_db()
    assert endpoint.auth_header_value == "Token other"
    # The checkbox clears it.
    client_admin.post(change, endpoint_post(endpoint, clear_auth_header="on"))
    endpoint.refresh_from_db()
    assert endpoint.auth_header_value == ""
    history = client_admin.get(
        reverse("admin:django_webfetch_configuredendpoint_history", args=[endpoint.pk])
    )
    assert "Token other" not in history.content.decode()


def test_add_endpoint_through_admin(client_admin):
    rag = ToolGroup.objects.get(slug="rag")
    url = reverse("admin:django_webfetch_configuredendpoint_add")
    response = client_admin.post(
        url,
        {
            "group": rag.pk,
            "name": "search",
            "base_url": "https://search.example.net/api",
            "auth_header_name": "Authorization",
            "auth_header_value": SECRET,
            "enabled": "on",
        },
    )
    assert response.status_code == 302
    assert ConfiguredEndpoint.objects.get().auth_header_value == SECRET


def test_egress_events_are_read_only(client_admin):
    event = EgressEvent.objects.create(decision="denied", reason="scope", url_host="a.example")
    change = reverse("admin:django_webfetch_egressevent_change", args=[event.pk])
    response = client_admin.get(change)
    assert response.status_code == 200
    assert b'name="_save"' not in response.content
    assert client_admin.get(reverse("admin:django_webfetch_egressevent_add")).status_code == 403
    assert (
        client_admin.post(
            reverse("admin:django_webfetch_egressevent_delete", args=[event.pk]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert EgressEvent.objects.filter(pk=event.pk).exists()
    url = reverse("admin:django_webfetch_egressevent_changelist")
    for query in (
        "?decision__exact=denied",
        "?reason=scope",
        "?group_slug=web",
        "?q=a.example",
        "?created__year=2020",
    ):
        assert client_admin.get(url + query).status_code == 200
