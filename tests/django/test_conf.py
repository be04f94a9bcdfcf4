from __future__ import annotations

import pytest

from django_webfetch.conf import SETTING_NAMES, conf
from django_webfetch.exceptions import WebFetchConfigurationError


def test_defaults(settings):
    assert conf.WEBFETCH_DNS_NAMESERVERS is None
    assert conf.WEBFETCH_DNS_PORT == 53
    assert conf.WEBFETCH_CA_FILE is None
    assert conf.WEBFETCH_PROXY is None
    assert conf.WEBFETCH_NAT64_PREFIXES == ()
    assert conf.WEBFETCH_TIMEOUT == 20.0
    assert conf.WEBFETCH_CONNECT_TIMEOUT == 5.0
    assert conf.WEBFETCH_MAX_RESPONSE_BYTES == 2 * 1024 * 1024
    assert conf.WEBFETCH_MAX_REDIRECTS == 3
    assert conf.WEBFETCH_EVENT_RETENTION_DAYS == 90
    assert conf.WEBFETCH_ASYNC_RUNS is False
    assert conf.WEBFETCH_ALLOW_SELF_APPROVAL is False
    assert conf.WEBFETCH_APPROVAL_TTL == 86400
    assert conf.WEBFETCH_USER_AGENT is None


def test_read_on_access(settings):
    settings.WEBFETCH_TIMEOUT = 7
    assert conf.WEBFETCH_TIMEOUT == 7.0
    settings.WEBFETCH_DNS_NAMESERVERS = ["192.0.2.53"]
    assert conf.WEBFETCH_DNS_NAMESERVERS == ("192.0.2.53",)


def test_bounds_are_clamped_to_the_hard_ceilings(settings):
    settings.WEBFETCH_TIMEOUT = 600
    settings.WEBFETCH_CONNECT_TIMEOUT = 60
    settings.WEBFETCH_MAX_RESPONSE_BYTES = 10**9
    settings.WEBFETCH_MAX_REDIRECTS = 50
    assert conf.WEBFETCH_TIMEOUT == 20.0
    assert conf.WEBFETCH_CONNECT_TIMEOUT == 5.0
    assert conf.WEBFETCH_MAX_RESPONSE_BYTES == 2 * 1024 * 1024
    assert conf.WEBFETCH_MAX_REDIRECTS == 3


def test_bounds_may_be_lowered(settings):
    settings.WEBFETCH_MAX_RESPONSE_BYTES = 1000
    assert conf.WEBFETCH_MAX_RESPONSE_BYTES == 1000


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WEBFETCH_TIMEOUT", "20"),
        ("WEBFETCH_TIMEOUT", -1),
        ("WEBFETCH_MAX_REDIRECTS", 2.5),
        ("WEBFETCH_MAX_RESPONSE_BYTES", True),
        ("WEBFETCH_DNS_NAMESERVERS", "192.0.2.53"),
        ("WEBFETCH_DNS_NAMESERVERS", [53]),
        ("WEBFETCH_DNS_PORT", 0),
        ("WEBFETCH_NAT64_PREFIXES", "64:ff9b::/96"),
        ("WEBFETCH_CA_FILE", 1),
        ("WEBFETCH_PROXY", ["http://proxy"]),
        ("WEBFETCH_ASYNC_RUNS", "yes"),
        ("WEBFETCH_ALLOW_SELF_APPROVAL", 1),
        ("WEBFETCH_APPROVAL_TTL", "1h"),
        ("WEBFETCH_EVENT_RETENTION_DAYS", None),
        ("WEBFETCH_USER_AGENT", "bad\nagent"),
    ],
)
def test_invalid_values_raise_configuration_error(settings, name, value):
    setattr(settings, name, value)
    with pytest.raises(WebFetchConfigurationError, match=name):
        getattr(conf, name)


def test_setting_names_listed():
    assert "WEBFETCH_TIMEOUT" in SETTING_NAMES
    assert len(SETTING_NAMES) >= 26


def test_worker_sweep_every(settings):
    """``WEBFETCH_WORKER_SWEEP_EVERY``: 15 s by default, ``0`` turns the workers' sweep off,
    otherwise 1..600 s (clamped); anything else names the setting."""
    assert conf.WEBFETCH_WORKER_SWEEP_EVERY == 15.0
    settings.WEBFETCH_WORKER_SWEEP_EVERY = 0
    assert conf.WEBFETCH_WORKER_SWEEP_EVERY == 0.0
    settings.WEBFETCH_WORKER_SWEEP_EVERY = 5000
    assert conf.WEBFETCH_WORKER_SWEEP_EVERY == 600.0
    for bad in (0.5, -1, "15", True):
        settings.WEBFETCH_WORKER_SWEEP_EVERY = bad
        with pytest.raises(WebFetchConfigurationError, match="WEBFETCH_WORKER_SWEEP_EVERY"):
            conf.WEBFETCH_WORKER_SWEEP_EVERY  # noqa: B018 - read to validate
