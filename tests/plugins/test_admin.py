"""The plugin instance admin: the grant in plain fields, secrets write-only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from django_webfetch.models import PluginInstance
from django_webfetch.plugins import services

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-token-value"


@pytest.fixture
def client_admin(client, superuser):
    client.force_login(superuser)
    return client


def post_data(instance, **overrides):
    data = {
        "plugin": instance.plugin,
        "alias": instance.alias,
        "enabled": "on",
        "egress_hosts": "\n".join(instance.egress_hosts),
        "egress_allow_private": "\n".join(instance.egress_allow_private),
        "config": '{"page_size": 20}',
        "note": "",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def test_secret_is_write_only(client_admin, example):
    instance = services.install("example")
    change = reverse("admin:django_webfetch_plugininstance_change", args=[instance.pk])
    page = client_admin.get(change).content.decode()
    assert "secret__token" in page and "granted.lab.example" in page
    response = client_admin.post(change, post_data(instance, secret__token=SECRET))
    assert response.status_code == 302, response.content.decode()[:2000]
    instance.refresh_from_db()
    assert instance.secret_config == {"token": SECRET}
    for url in (change, reverse("admin:django_webfetch_plugininstance_changelist")):
        assert SECRET not in client_admin.get(url).content.decode()
    # Empty keeps it; a validation error never echoes it; the checkbox clears it.
    client_admin.post(change, post_data(instance, note="kept"))
    instance.refresh_from_db()
    assert (instance.note, instance.secret_config) == ("kept", {"token": SECRET})
    response = client_admin.post(
        change, post_data(instance, egress_hosts="*.com", secret__token="other-" + SECRET)
    )
    assert response.status_code == 200
    assert SECRET not in response.content.decode()
    client_admin.post(change, post_data(instance, clear_secrets="on"))
    instance.refresh_from_db()
    assert instance.secret_config == {}


def test_grant_rules_hold_in_the_admin(client_admin, example):
    instance = services.install("example")
    change = reverse("admin:django_webfetch_plugininstance_change", args=[instance.pk])
    # A private exemption for a host that is not granted is refused.
    response = client_admin.post(
        change,
        post_data(instance, egress_hosts="granted.lab.example", egress_allow_private="a.example"),
    )
    assert response.status_code == 200
    assert "Only granted hosts" in response.content.decode()
    # The config is checked against the manifest's typed schema.
    response = client_admin.post(change, post_data(instance, config='{"page_size": 1000}'))
    assert response.status_code == 200
    assert "page_size is above 100" in response.content.decode()
    response = client_admin.post(change, post_data(instance, config='{"token": "x"}'))
    assert "Secret fields belong in the secret config" in response.content.decode()
    # A valid narrowing is saved, and the effective grant follows.
    response = client_admin.post(change, post_data(instance, egress_hosts="granted.lab.example"))
    assert response.status_code == 302
    instance.refresh_from_db()
    assert instance.effective() == ("granted.lab.example",)
    assert PluginInstance.objects.count() == 1


def test_the_admin_says_what_plugin_list_says_is_effective(client_admin, example):
    """A new user found the admin's "effective" column naming hosts while ``plugin list``
    said none (the group was disabled): both show ``services.effective_now``."""
    from django_webfetch.models import ToolGroup

    instance = services.install("example")
    group = instance.default_group()
    ToolGroup.objects.filter(slug=group).update(enabled=False)
    changelist = reverse("admin:django_webfetch_plugininstance_changelist")
    change = reverse("admin:django_webfetch_plugininstance_change", args=[instance.pk])
    (summary,) = [s for s in services.list_instances() if s.alias == instance.alias]
    assert summary.effective == () and f"group {group!r} is disabled" in summary.no_egress
    for url in (changelist, change):
        page = client_admin.get(url).content.decode()
        assert "(none): group &#x27;" in page and "is disabled" in page, url
    ToolGroup.objects.filter(slug=group).update(enabled=True)
    hosts, off = services.effective_now(instance)
    assert hosts and not off
    page = client_admin.get(changelist).content.decode()
    assert ", ".join(hosts) in page and "(none):" not in page


def test_every_label_on_the_instance_page_is_in_sentence_case(client_admin, example):
    """README trial 9: "Egress declared:" stood above "egress granted:" and "config:"."""
    import re

    instance = services.install("example")
    change = reverse("admin:django_webfetch_plugininstance_change", args=[instance.pk])
    page = client_admin.get(change).content.decode()
    labels = re.findall(r"<label[^>]*>([^<]+?):?</label>", page)
    labels += re.findall(r'<div class="flex-container">\s*<label>([^<]+?):</label>', page)
    assert {"Egress declared", "Egress granted", "Hosts allowed on private addresses"} <= {
        label.strip().rstrip(":") for label in labels
    }, labels
    assert "Config:" in page and "Secret: token:" in page and "Remove every stored secret" in page
    lower = [label for label in labels if label.strip()[:1].islower()]
    assert lower == []
