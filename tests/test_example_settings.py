"""Issue 31 item 6: the example project reads the self-hosted recipe's
``WEBFETCH_ASSISTANT_CONTEXT_TOKENS`` from the environment (docs/assistant.rst)."""

from __future__ import annotations

import importlib
import sys

import pytest

from django_webfetch.conf import conf
from django_webfetch.exceptions import WebFetchConfigurationError


def _example_settings(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("WEBFETCH_ASSISTANT_CONTEXT_TOKENS", raising=False)
    else:
        monkeypatch.setenv("WEBFETCH_ASSISTANT_CONTEXT_TOKENS", value)
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
