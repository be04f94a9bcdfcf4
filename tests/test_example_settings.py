"""The example project reads settings from the environment: issue 31 item 6, the
self-hosted recipe's ``WEBFETCH_ASSISTANT_CONTEXT_TOKENS`` (docs/assistant.rst); README
trial 9, the resolver's ``WEBFETCH_DNS_NAMESERVERS`` (README, "Try a web fetch on a machine
without outside DNS")."""

from __future__ import annotations

import importlib
import sys

import pytest

from django_webfetch.conf import conf
from django_webfetch.exceptions import WebFetchConfigurationError


def _example_settings(monkeypatch, value, name="WEBFETCH_ASSISTANT_CONTEXT_TOKENS"):
    if value is None:
        monkeypatch.delenv(name, raising=False)
    else:
        monkeypatch.setenv(name, value)
    monkeypatch.delitem(sys.modules, "example_project.settings", raising=False)
    return importlib.import_module("example_project.settings")


def test_the_example_reads_the_context_window_from_the_environment(monkeypatch, settings):
    example = _example_settings(monkeypatch, "4096")
    settings.WEBFETCH_ASSISTANT_CONTEXT_TOKENS = example.WEBFETCH_ASSISTANT_CONTEXT_TOKENS
    assert conf.WEBFETCH_ASSISTANT_CONTEXT_TOKENS == 4096

    example = _example_settings(monkeypatch, None)
    settings.WEBFETCH_ASSISTANT_CONTEXT_TOKENS = example.WEBFETCH_ASSISTANT_CONTEXT_TOKENS
    assert conf.WEBFETCH_ASSISTANT_CONTEXT_TOKENS is None  # unset: unknown, the default

    example = _example_settings(monkeypatch, "4k")
    settings.WEBFETCH_ASSISTANT_CONTEXT_TOKENS = example.WEBFETCH_ASSISTANT_CONTEXT_TOKENS
    with pytest.raises(WebFetchConfigurationError, match="WEBFETCH_ASSISTANT_CONTEXT_TOKENS"):
        _ = conf.WEBFETCH_ASSISTANT_CONTEXT_TOKENS


def test_the_example_reads_the_nameservers_from_the_environment(
    monkeypatch, settings, group_factory
):
    from django_webfetch.egress import policy_for

    group_factory("web", enabled=True)
    name = "WEBFETCH_DNS_NAMESERVERS"
    example = _example_settings(monkeypatch, " 11.0.0.53, 2001:4860:4860::8888 ,", name)
    settings.WEBFETCH_DNS_NAMESERVERS = example.WEBFETCH_DNS_NAMESERVERS
    assert policy_for("web").nameservers == ("11.0.0.53", "2001:4860:4860::8888")

    example = _example_settings(monkeypatch, None, name)
    settings.WEBFETCH_DNS_NAMESERVERS = example.WEBFETCH_DNS_NAMESERVERS
    assert policy_for("web").nameservers is None  # unset: the system's resolv.conf
