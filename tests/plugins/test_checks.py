"""System checks of the plugin feature (django_webfetch.E030-E033, W030-W031)."""

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


_E033_CHILD = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
# Its own mount namespace: the machine's /etc/passwd with one more account, for this child.
assert libc.unshare(0x00020000) == 0
assert libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None) == 0
assert libc.mount(sys.argv[1].encode(), b"/etc/passwd", None, 0x1000, None) == 0
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django
django.setup()
from django.conf import settings
from django_webfetch import checks
found = {}
for first in (2_000_000_000, 2_000_001_000):
    settings.WEBFETCH_PLUGIN_UID_RANGE = (first, 1_000_000)
    found[first] = [(m.id, m.msg) for m in checks.check_plugins() if m.id == "django_webfetch.E033"]
print(repr(found))
"""


def test_a_plugin_uid_range_holding_an_account_is_e033(settings, tmp_path):
    """The range a root site takes plugin uids from must hold no user or group: an account
    at 2,000,000,500 (an /etc/passwd of a child's own mount namespace) is E033 for a range
    over it, none for the default range moved past it; uid 0 is no valid range (E001)."""
    import ast
    import os
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("the child makes a mount namespace (root, as CI)")
    assert "django_webfetch.E033" not in ids(checks.check_plugins())
    settings.WEBFETCH_PLUGIN_UID_RANGE = (0, 1 << 20)
    assert "django_webfetch.E001" in ids(checks.check_settings())
    with open("/etc/passwd") as fh:
        passwd = fh.read()
    extra = tmp_path / "passwd"
    extra.write_text(passwd + "plugin-squatter:x:2000000500:2000000500::/:/usr/sbin/nologin\n")
    done = subprocess.run(
        [sys.executable, "-c", _E033_CHILD, str(extra)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert found[2_000_001_000] == [], found
    [(code, message)] = found[2_000_000_000]
    assert code == "django_webfetch.E033" and "2000000500" in message, message


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
    # The hint says what unticking does here: isolation, or no run at all.
    from django_webfetch.plugins.runtime.host import capabilities

    if capabilities().get("isolated"):
        assert messages[0].hint == "Untick 'trusted' to run it in an isolated plugin process."
    else:
        assert "unticking 'trusted' stops the plugin from running here" in messages[0].hint


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


@pytest.mark.django_db
def test_w030_asks_whether_the_plugin_directory_is_configured(example):
    """A new user's instance of a plugin this process does not see: W030's hint names the
    likeliest cause (the directory is not in WEBFETCH_PLUGIN_DIRS of this process)."""
    PluginInstance.objects.create(plugin="gone", alias="gone")
    (w030,) = [
        m
        for m in checks.check_plugin_instances(databases=["default"])
        if m.id == "django_webfetch.W030"
    ]
    assert w030.hint.startswith("Is its directory in WEBFETCH_PLUGIN_DIRS of this process?")


@pytest.mark.django_db
def test_an_instance_not_trusted_now_is_w034_only(example):
    """W032 says a trusted instance's code runs in the site's processes; for an instance
    W034 names (not trusted now: its code does not run there) it would be untrue, so only
    W034 is emitted for it."""
    held = PluginInstance.objects.create(plugin="example", alias="held", trusted=True)
    stale = PluginInstance.objects.create(plugin="example", alias="stale", trusted=True)
    PluginInstance.objects.filter(pk=stale.pk).update(trusted_version="0.1")
    assert held.trust_holds()
    found = {
        (m.id, m.obj.alias)
        for m in checks.check_plugin_instances(databases=["default"])
        if m.id in ("django_webfetch.W032", "django_webfetch.W034")
    }
    assert found == {("django_webfetch.W032", "held"), ("django_webfetch.W034", "stale")}
