"""System checks of the plugin feature (django_webfetch.E030-E032, W030-W031)."""

from __future__ import annotations

import pytest

from django_webfetch import checks
from django_webfetch.models import PluginInstance


def ids(messages):
    return [m.id for m in messages]


def test_refused_manifest_is_e030(example):
    from django_webfetch.plugins import registry

    assert checks.check_plugins() == []
    example.set_state(extra_egress=["*.com"])
    registry.reset()
    messages = checks.check_plugins()
    assert ids(messages) == ["django_webfetch.E030"]
    assert "egress_public_suffix" in messages[0].msg
    # Refused whole: none of its tools is registered.
    from django_webfetch.tools import default_registry

    default_registry.reset()
    assert default_registry.get("example_fetch") is None


def test_redis_url_without_redis_package(settings, monkeypatch):
    import importlib.util

    settings.WEBFETCH_PLUGIN_REDIS_URL = "redis://redis.internal:6379/0"
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "redis" else real(name, *a)
    )
    assert "django_webfetch.E031" in ids(checks.check_plugins())


def test_invalid_settings_are_e001(settings):
    settings.WEBFETCH_PLUGIN_MAX_CONNECTIONS = 0
    assert "django_webfetch.E001" in ids(checks.check_settings())


@pytest.mark.django_db
def test_instance_checks(example, settings):
    settings.DEBUG = False
    good = PluginInstance.objects.create(
        plugin="example", alias="ok", egress_hosts=["granted.lab.example"]
    )
    good.egress_allow_private = ["granted.lab.example"]
    good.save()
    PluginInstance.objects.create(plugin="gone", alias="gone")
    PluginInstance.objects.filter(alias="gone").update(egress_hosts=["*.com"])
    messages = checks.check_plugin_instances(databases=["default"])
    assert sorted(ids(messages)) == [
        "django_webfetch.E032",
        "django_webfetch.W030",
        "django_webfetch.W031",
    ]
    assert checks.check_plugin_instances(databases=None) == []


@pytest.mark.django_db
def test_every_trusted_instance_is_w032(example):
    PluginInstance.objects.create(plugin="example", alias="isolated")
    PluginInstance.objects.create(plugin="example", alias="inproc", trusted=True)
    PluginInstance.objects.create(plugin="example", alias="inproc2", trusted=True)
    messages = [
        m for m in checks.check_plugin_instances(databases=["default"]) if m.id.endswith("W032")
    ]
    assert sorted(m.obj.alias for m in messages) == ["inproc", "inproc2"]
    assert "settings, database and network" in messages[0].msg


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WEBFETCH_PLUGIN_WALL_SECONDS", 1000),
        ("WEBFETCH_PLUGIN_CPU_SECONDS", 0),
        ("WEBFETCH_PLUGIN_MEMORY_BYTES", 1024),
        ("WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES", "big"),
        ("WEBFETCH_PLUGIN_MAX_REQUESTS", 0),
        ("WEBFETCH_PLUGIN_POOL_SIZE", 100),
    ],
)
def test_runtime_limits_past_their_ceiling_are_e001(settings, name, value):
    setattr(settings, name, value)
    assert "django_webfetch.E001" in ids(checks.check_settings())


@pytest.mark.django_db
def test_invalid_nat64_list_is_an_error_and_refuses_every_fetch(settings, group_factory):
    """One bad entry rejects the whole list: a system check error, and the guard refuses
    every fetch (tools and plugins alike) until it is fixed."""
    from django_webfetch.egress import policy_for
    from django_webfetch.net import UrlGuard
    from django_webfetch.net.errors import EgressDenied

    group_factory("web", enabled=True)
    settings.WEBFETCH_NAT64_PREFIXES = ["64:ff9b::/96", "2001:db8::1/96"]
    assert ids(checks.check_nat64_prefixes()) == ["django_webfetch.E002"]
    with pytest.raises(EgressDenied) as caught:
        UrlGuard().check("http://192.0.2.1/", policy_for("web"))
    assert caught.value.reason == "invalid_list"
    settings.WEBFETCH_NAT64_PREFIXES = ["64:ff9b::/96"]
    assert checks.check_nat64_prefixes() == []
