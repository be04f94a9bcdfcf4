from __future__ import annotations

import pytest

from django_webfetch.assistant import services
from django_webfetch.models import ConfiguredEndpoint
from tests.settle import settled_run

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture(autouse=True)
def urls(settings):
    settings.ROOT_URLCONF = "tests.runs.urls"


def test_runs_and_conversations_are_readable_records(client, superuser, editor):
    conversation = services.create_conversation(editor, "admin view")
    run = services.post_message(conversation, "hello", user=editor)
    assert settled_run(run).state == "completed"
    client.force_login(superuser)
    for url in (
        "/admin/django_webfetch/assistantrun/",
        f"/admin/django_webfetch/assistantrun/{run.pk}/change/",
        "/admin/django_webfetch/conversation/",
        f"/admin/django_webfetch/conversation/{conversation.pk}/change/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
    page = client.get(f"/admin/django_webfetch/assistantrun/{run.pk}/change/").content.decode()
    assert "run_started" in page and "completed" in page
    assert client.get("/admin/django_webfetch/assistantrun/add/").status_code == 403


def test_the_provider_is_configured_in_the_admin(client, superuser, group_factory):
    group = group_factory("assistant", enabled=True, scope="configured_endpoint")
    client.force_login(superuser)
    response = client.post(
        "/admin/django_webfetch/configuredendpoint/add/",
        {
            "group": group.pk,
            "name": "local vLLM",
            "base_url": "https://llm.example.net/v1",
            "provider_kind": "openai-compatible",
            "model_name": "qwen",
            "auth_header_name": "Authorization",
            "auth_header_value": "sk-secret",
            "enabled": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    endpoint = ConfiguredEndpoint.objects.get(name="local vLLM")
    assert (endpoint.provider_kind, endpoint.model_name) == ("openai-compatible", "qwen")
    page = client.get(f"/admin/django_webfetch/configuredendpoint/{endpoint.pk}/change/")
    assert "sk-secret" not in page.content.decode()
    from django_webfetch.assistant.providers import configured_provider

    provider = configured_provider()
    assert (provider.kind, provider.model_name, provider.api_key) == (
        "openai-compatible",
        "qwen",
        "sk-secret",
    )
    assert "sk-secret" not in repr(provider)
