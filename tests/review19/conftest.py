"""Fixtures of the review19 findings: a hostile plugin that runs the code it is given."""

from __future__ import annotations

import os
from typing import Any

import pytest

SITE = os.path.join(os.path.dirname(__file__), "probe_site")


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch, lab_settings: Any, group_factory: Any) -> Any:
    """The r19probe plugin installed; ``probe(code)`` runs ``code`` in its plugin process
    (with the audit hook's host window open, as tests/plugins/hostile_site does) and
    returns the runtime's CallOutcome."""
    from django_webfetch.plugins import registry, services
    from django_webfetch.plugins.client import PluginHttp
    from django_webfetch.plugins.runtime.host import execute
    from django_webfetch.tools import default_registry

    monkeypatch.syspath_prepend(SITE)
    lab_settings.dns.set("granted.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    group_factory("r19probe", scope="external_filtered", enabled=True)
    registry.reset()
    default_registry.reset()
    instance = services.install("r19probe")

    def run(code: str) -> Any:
        http = PluginHttp(instance.pk, group="r19probe", tool="r19probe_run")
        call = {
            "tool": "r19probe_run",
            "arguments": {"code": code},
            "config": {},
            "plugin": "r19probe",
            "alias": instance.alias,
            "reference": instance.reference,
        }
        return execute(registry.origin("r19probe"), ("r19", instance.pk), call, http)

    run.instance = instance  # type: ignore[attr-defined]
    yield run
    registry.reset()
    default_registry.reset()
