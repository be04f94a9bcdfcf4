"""A new provider kind is one new module (here: the class below) plus its registration: the
endpoint's field, the admin, the checks and a run accept it with no other change."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from django_webfetch.assistant import checks, providers
from django_webfetch.assistant.providers import Provider, register, unregister
from django_webfetch.models import AssistantRun, ConfiguredEndpoint

from .helpers import ask
from .provider import Turn

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


class LabChatProvider(Provider):
    """A provider kind written from the base class alone: the OpenAI wire format, built
    here rather than by subclassing a built-in kind."""

    kind: ClassVar[str] = "lab-chat"
    name: ClassVar[str] = "Lab chat"
    choice_label: ClassVar[str] = "Lab chat (tests)"
    sdk: ClassVar[str] = "openai"
    built: ClassVar[list[str]] = []

    def build_model(self, *, http_client: Any, timeout: float) -> Any:
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        type(self).built.append(self.config.model_name)
        client = AsyncOpenAI(**self.sdk_options(http_client, timeout))
        return OpenAIChatModel(
            self.config.model_name, provider=OpenAIProvider(openai_client=client)
        )


@pytest.fixture
def lab_chat():
    register(LabChatProvider)
    LabChatProvider.built.clear()
    yield LabChatProvider
    unregister(LabChatProvider.kind)


def test_the_registry_is_the_only_list_of_kinds(lab_chat):
    assert providers.provider_kinds() == ("openai", "openai-compatible", "anthropic", "lab-chat")
    assert "lab-chat" in providers.PROVIDER_KINDS
    assert "offline" not in providers.PROVIDER_KINDS  # the planner needs no endpoint
    field = ConfiguredEndpoint._meta.get_field("provider_kind")
    assert ("lab-chat", "Lab chat (tests)") in list(field.choices)
    unregister("lab-chat")
    assert "lab-chat" not in providers.PROVIDER_KINDS
    assert ("lab-chat", "Lab chat (tests)") not in list(field.choices)


def test_register_refuses_a_malformed_or_taken_kind(lab_chat):
    class Shouting(Provider):
        kind = "LOUD kind"

    class Impostor(Provider):
        kind = "openai"

    with pytest.raises(ValueError, match="is not"):
        register(Shouting)
    with pytest.raises(ValueError, match="already registered by OpenAIProvider"):
        register(Impostor)
    assert register(LabChatProvider) is LabChatProvider  # the same class again: no change


def test_an_unregistered_kind_is_refused_by_the_model(group_factory, endpoint_factory):
    group_factory("assistant", enabled=True, scope="configured_endpoint")
    with pytest.raises(ValidationError) as info:
        endpoint_factory("https://llm.example.net/v1", group="assistant", provider_kind="lab-chat")
    assert "provider_kind" in info.value.message_dict


def admin_add(client, group, kind):
    return client.post(
        "/admin/django_webfetch/configuredendpoint/add/",
        {
            "group": group.pk,
            "name": f"{kind} endpoint",
            "base_url": "https://llm.example.net/v1",
            "provider_kind": kind,
            "model_name": "lab-model",
            "auth_header_name": "Authorization",
            "auth_header_value": "sk-secret",
            "enabled": "on",
        },
    )


def test_the_admin_and_the_checks_accept_a_registered_kind(
    client, superuser, group_factory, settings
):
    settings.ROOT_URLCONF = "tests.runs.urls"
    group = group_factory("assistant", enabled=True, scope="configured_endpoint")
    client.force_login(superuser)
    refused = admin_add(client, group, "lab-chat")
    assert refused.status_code == 200
    assert "Select a valid choice" in refused.content.decode()
    assert (
        "lab-chat"
        not in client.get("/admin/django_webfetch/configuredendpoint/add/").content.decode()
    )

    register(LabChatProvider)
    try:
        page = client.get("/admin/django_webfetch/configuredendpoint/add/").content.decode()
        assert 'value="lab-chat"' in page and "Lab chat (tests)" in page
        assert admin_add(client, group, "lab-chat").status_code == 302
        assert ConfiguredEndpoint.objects.get(provider_kind="lab-chat").model_name == "lab-model"
        assert checks.check_assistant(databases=["default"]) == []
        config = providers.configured_provider()
        assert (config.kind, config.label) == ("lab-chat", "Lab chat: lab-model")
    finally:
        unregister("lab-chat")
    # Its module gone, the endpoint is not usable: the checks say so, the planner answers.
    assert [m.id for m in checks.check_assistant(databases=["default"])] == ["django_webfetch.W040"]
    assert providers.configured_provider().offline


def test_a_run_uses_the_new_kind(lab_chat, configure_provider, provider_server, editor, settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    configure_provider("lab-chat")
    provider_server.add(Turn(text="Answered by the lab-chat kind."))
    api = APIClient()
    api.force_login(editor)
    run = ask(api, "hello")
    assert run["state"] == "completed", run
    assert run["provider"] == "lab-chat"
    assert run["final_message"]["content"] == "Answered by the lab-chat kind."
    assert lab_chat.built == ["lab-model"]
    [request] = provider_server.requests
    assert request.kind == "openai" and request.body["model"] == "lab-model"
    assert AssistantRun.objects.get(pk=run["id"]).provider_label == "Lab chat: lab-model"
