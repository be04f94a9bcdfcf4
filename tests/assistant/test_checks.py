from __future__ import annotations

import pytest

from django_webfetch.assistant import checks

pytestmark = pytest.mark.django_db


def ids(messages):
    return [m.id for m in messages]


def test_nothing_while_the_group_is_disabled():
    assert checks.check_assistant(databases=["default"]) == []


def test_database_only():
    assert checks.check_assistant() == []


def test_e040_assistant_enabled_without_pydantic_ai(group_factory, monkeypatch):
    group_factory("assistant", enabled=True, scope="configured_endpoint")
    monkeypatch.setattr(checks, "_pydantic_ai_installed", lambda: False)
    assert "django_webfetch.E040" in ids(checks.check_assistant(databases=["default"]))


def test_w040_assistant_without_a_usable_endpoint(group_factory, endpoint_factory):
    group_factory("assistant", enabled=True, scope="configured_endpoint")
    assert ids(checks.check_assistant(databases=["default"])) == ["django_webfetch.W040"]
    endpoint_factory("https://llm.example.net/v1", group="assistant", provider_kind="openai")
    assert ids(checks.check_assistant(databases=["default"])) == ["django_webfetch.W040"]
    endpoint_factory(
        "https://llm.example.net/v1", group="assistant", provider_kind="openai", model_name="m"
    )
    assert checks.check_assistant(databases=["default"]) == []


def test_registered():
    from django.core.checks import registry

    assert checks.check_assistant in registry.registry.get_checks(include_deployment_checks=True)
