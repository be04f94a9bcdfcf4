"""A model server on this machine (``http://127.0.0.1:<port>/v1``, as llama.cpp and Ollama are
run) is usable after one explicit, audited decision: the endpoint's private-address
exemption.  Without it the guard refuses it, and the admin, the checks and ``manage.py
webfetch explain`` say so first, naming the rule.  A model-chosen URL never reaches it.

The scripted OpenAI-compatible server listens on loopback (plain HTTP), the app reaches it
through the guard with the real ``openai`` SDK.  ``ALLOWED_HOSTS`` names 127.0.0.1 and
localhost, as the example project's does: the endpoint is a host of this installation.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from django_webfetch.assistant import checks
from django_webfetch.assistant.providers.http import SELF_HOSTED_NOTE
from django_webfetch.models import AssistantRun, ConfiguredEndpoint, EgressEvent
from django_webfetch.net import explain

from . import helpers
from .provider import ProviderServer, Turn, offered_tools, tool_results

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture(scope="module")
def local_server():
    server = ProviderServer("127.0.0.1", None, port=0)
    yield server
    server.stop()


@pytest.fixture
def site(settings, local_server):
    settings.ROOT_URLCONF = "tests.runs.urls"
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    local_server.reset()
    return local_server


@pytest.fixture
def endpoint(site, group_factory, endpoint_factory):
    group_factory("assistant", enabled=True, scope="configured_endpoint")

    def make(allow_private):
        return endpoint_factory(
            f"http://127.0.0.1:{site.port}/v1",
            group="assistant",
            provider_kind="openai-compatible",
            model_name="qwen2.5-0.5b-instruct",
            auth_header_value="",
            allow_private=allow_private,
        )

    return make


def ask(editor, content):
    api = APIClient()
    api.force_login(editor)
    return helpers.ask(api, content)


def explain_command(url):
    from io import StringIO

    out = StringIO()
    try:
        call_command("webfetch", "explain", url, "--group", "assistant", stdout=out)
        code = 0
    except CommandError as exc:
        code = exc.returncode
    return code, out.getvalue()


def test_a_model_server_on_loopback_works_with_the_exemption(site, endpoint, editor):
    ep = endpoint(allow_private=True)
    site.add(Turn(text="Hello from the local model."))
    run = ask(editor, "Say hello")
    assert run["state"] == "completed", run
    assert run["provider"] == "openai-compatible"
    assert run["final_message"]["content"] == "Hello from the local model."
    [request] = site.requests
    assert request.kind == "openai" and request.body["model"] == "qwen2.5-0.5b-instruct"
    # The audit log names the operator's decision on the request that rode on it.
    [event] = EgressEvent.objects.filter(group_slug="assistant", decision="fetched")
    assert (event.url_host, event.port) == ("127.0.0.1", site.port)
    assert SELF_HOSTED_NOTE in event.detail
    # The checks and the CLI agree.
    assert checks.check_assistant(databases=["default"]) == []
    code, out = explain_command(ep.base_url)
    assert code == 0, out
    assert "self-hosted endpoint (operator)" in out and "ALLOWED" in out


def test_a_model_server_named_localhost_works_with_the_exemption(
    settings, site, group_factory, endpoint_factory, editor
):
    # ``localhost`` is loopback by a fixed rule (RFC 6761), never a DNS question: a server
    # that cannot be reached here stands in for DNS, so a regression sends nothing out.
    settings.WEBFETCH_DNS_NAMESERVERS = ("127.0.0.9",)
    group_factory("assistant", enabled=True, scope="configured_endpoint")
    ep = endpoint_factory(
        f"http://localhost:{site.port}/v1",
        group="assistant",
        provider_kind="openai-compatible",
        model_name="llama3.2",
        auth_header_value="",
        allow_private=True,
    )
    site.add(Turn(text="Hello from localhost."))
    run = ask(editor, "Say hello")
    assert run["state"] == "completed", run
    assert run["final_message"]["content"] == "Hello from localhost."
    [event] = EgressEvent.objects.filter(group_slug="assistant", decision="fetched")
    assert (event.url_host, event.port) == ("localhost", site.port)
    assert "127.0.0.1" in event.addresses
    code, out = explain_command(ep.base_url)
    assert code == 0 and "ALLOWED" in out, out
    # Without the operator's decision the same name is refused before any connection.
    ConfiguredEndpoint.objects.filter(pk=ep.pk).update(allow_private=False)
    site.add(Turn(text="never sent"))
    refused = ask(editor, "Say hello again")
    assert (refused["state"], refused["error_code"]) == ("failed", "egress_denied"), refused
    assert len(site.requests) == 1


def test_without_the_exemption_everything_names_the_rule(site, endpoint, editor, client, superuser):
    ep = endpoint(allow_private=False)
    site.add(Turn(text="never sent"))
    run = ask(editor, "Say hello")
    assert (run["state"], run["error_code"]) == ("failed", "egress_denied"), run
    assert "own_site" in run["error_message"]
    assert site.requests == []
    assert EgressEvent.objects.filter(
        group_slug="assistant", decision="denied", reason="own_site"
    ).exists()

    [warning] = checks.check_assistant(databases=["default"])
    assert warning.id == "django_webfetch.W041" and "rule: own_site" in warning.msg

    code, out = explain_command(ep.base_url)
    assert code == 1 and "DENIED (own_site)" in out

    client.force_login(superuser)
    form = {
        "group": ep.group.pk,
        "name": "llama.cpp",
        "base_url": f"http://127.0.0.1:{site.port}/v1",
        "provider_kind": "openai-compatible",
        "model_name": "qwen",
        "auth_header_name": "Authorization",
        "enabled": "on",
    }
    refused = client.post("/admin/django_webfetch/configuredendpoint/add/", form)
    assert refused.status_code == 200
    page = refused.content.decode()
    assert "would refuse this endpoint for its scope (rule: own_site)" in page
    assert "allow private addresses" in page
    assert ConfiguredEndpoint.objects.filter(name="llama.cpp").count() == 0
    # The one explicit decision: tick the exemption.
    saved = client.post(
        "/admin/django_webfetch/configuredendpoint/add/", {**form, "allow_private": "on"}
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert ConfiguredEndpoint.objects.get(name="llama.cpp").allow_private


def test_not_an_own_host_the_rule_is_the_address_class(site, endpoint, settings, client, superuser):
    settings.ALLOWED_HOSTS = ["testserver"]
    ep = endpoint(allow_private=False)
    code, out = explain_command(ep.base_url)
    assert code == 1 and "DENIED (address_class:loopback)" in out
    [warning] = checks.check_assistant(databases=["default"])
    assert "rule: address_class:loopback" in warning.msg
    client.force_login(superuser)
    page = client.post(
        f"/admin/django_webfetch/configuredendpoint/{ep.pk}/change/",
        {
            "group": ep.group.pk,
            "name": ep.name,
            "base_url": ep.base_url,
            "provider_kind": "openai-compatible",
            "model_name": "qwen",
            "auth_header_name": "Authorization",
            "enabled": "on",
        },
    ).content.decode()
    assert "(rule: address_class:loopback)" in page


def test_a_model_chosen_url_never_reaches_the_own_host(site, endpoint, group_factory, editor):
    """The exemption is the operator's, on the endpoint: a URL the model chooses (the web
    tool) or a path of the site's own app on another port stays refused."""
    from django_webfetch.egress import policy_for

    endpoint(allow_private=True)
    group_factory("web", enabled=True)
    web = policy_for("web")
    assert explain(f"http://127.0.0.1:{site.port}/v1/models", policy=web).reason == "own_site"
    assistant = policy_for("assistant")
    # Another port of the same host is not the endpoint.
    assert explain("http://127.0.0.1:8000/admin/", policy=assistant).reason == "own_site"
    assert explain(f"http://127.0.0.1:{site.port}/v1/models", policy=assistant).allowed

    # End to end: the model asks for the local server's URL; the call is refused before a
    # human sees it and the server only ever gets the provider requests.
    site.add(
        Turn(tool_calls=[("fetch_external_url", {"url": f"http://127.0.0.1:{site.port}/v1/x"})]),
        lambda record: Turn(text="Result: " + " ".join(tool_results(record))),
    )
    run = ask(editor, "read my local server")
    assert run["state"] == "completed", run
    assert offered_tools(site.requests[0]) == ["fetch_external_url"]
    [call] = run["steps"][0]["tool_calls"]
    assert (call["state"], call["reason"]) == ("failed", "own_site")
    assert [r.path for r in site.requests] == ["/v1/chat/completions"] * 2
    assert AssistantRun.objects.get(pk=run["id"]).state == "completed"
