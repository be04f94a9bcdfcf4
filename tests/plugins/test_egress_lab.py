"""The example plugin's tools against the network-namespace lab (DESIGN.md §8).

Real DNS, real HTTP servers on public-looking and private addresses, the live policy from
the database: a plugin reaches exactly declaration ∩ grant, through the host-owned client.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from django_webfetch.models import EgressEvent, PluginInstance
from django_webfetch.plugins import services
from django_webfetch.tools import ToolContext, run_tool
from tests.settle import settled_call

pytestmark = pytest.mark.django_db

APPROVED = ToolContext(approved=True, call_id="plugin-call")


def run(name, user, **arguments):
    return run_tool(name, arguments, user=user, context=APPROVED)


def payload(result):
    """The JSON the example tool returned, from inside the fence."""
    assert result.ok, result
    body = result.content.split(">>>\n", 2)[-1].rsplit("\n<<<END", 1)[0]
    return json.loads(body)


def when_idle(action):
    """Run a DB write from the test thread while the tool's thread may hold SQLite's
    shared-cache table lock for a moment (it writes audit rows): retry briefly."""
    from django.db import OperationalError

    deadline = time.monotonic() + 10
    while True:
        try:
            return action()
        except OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def events(**filters):
    return list(
        EgressEvent.objects.filter(**filters)
        .order_by("pk")
        .values_list("decision", "reason", "url_host")
    )


def test_no_grant_no_network(plugin_lab, editor_user):
    instance = services.bind("example", alias="example", egress="none")
    result = run("example_fetch", editor_user, url="http://granted.lab.example/plain")
    assert result.error == "egress_denied"
    assert result.meta == {"reason": "egress_not_granted"}
    # Nothing was resolved, nothing connected.
    assert plugin_lab.connected_addresses(include_dns=True) == set()
    event = EgressEvent.objects.get()
    assert (event.decision, event.reason, event.url_host) == (
        "denied",
        "egress_not_granted",
        "granted.lab.example",
    )
    assert event.plugin_instance == instance
    assert event.plugin_ref == instance.reference
    assert "no effective grant" in event.detail


def test_grant_allows_the_declared_host(plugin_lab, editor_user):
    instance = services.install("example")
    result = run("example_fetch", editor_user, url="http://granted.lab.example/plain")
    assert payload(result)["status"] == 200
    assert "UNTRUSTED EXTERNAL WEB CONTENT" in result.content
    assert events(plugin_instance=instance) == [
        ("allowed", "allowed", "granted.lab.example"),
        ("fetched", "ok", "granted.lab.example"),
    ]
    assert [r.path for r in plugin_lab.requests] == ["/plain"]


def test_suffix_grant_never_matches_the_apex_or_lookalikes(plugin_lab, editor_user):
    services.install("example")
    assert (
        payload(run("example_fetch", editor_user, url="http://x.api.lab.example/plain"))["status"]
        == 200
    )
    plugin_lab.dns.set("api.lab.example", a=[plugin_lab.PUBLIC_V4[4]])
    plugin_lab.dns.set("x.api.lab.example.evil.example", a=[plugin_lab.PUBLIC_V4[4]])
    plugin_lab.dns.set("xapi.lab.example", a=[plugin_lab.PUBLIC_V4[4]])
    for url in (
        "http://api.lab.example/plain",  # the apex of *.api.lab.example
        "http://x.api.lab.example.evil.example/plain",
        "http://xapi.lab.example/plain",
        "http://granted.lab.example:8080/plain",  # no ports beyond the default
    ):
        result = run("example_fetch", editor_user, url=url)
        assert result.error == "egress_denied", url
    assert plugin_lab.accepts(plugin_lab.PUBLIC_V4[4]) == []


def test_case_is_the_same_host(plugin_lab, editor_user):
    services.install("example")
    url = "http://GRANTED.Lab.Example/plain"
    assert payload(run("example_fetch", editor_user, url=url))["status"] == 200


def test_trailing_dot_is_the_same_host_for_the_grant(plugin_lab, editor_user):
    instance = services.install("example")
    # The absolute form of an ungranted name is still ungranted.
    result = run("example_fetch", editor_user, url="http://ungranted.lab.example./plain")
    assert result.meta == {"reason": "egress_not_granted"}
    # The absolute form of a granted name is the granted host: the transport sends the
    # checked URL, so the request reaches the granted server with the checked Host.
    ok = run("example_fetch", editor_user, url="http://granted.lab.example./plain")
    assert payload(ok)["status"] == 200
    assert events(plugin_instance=instance)[1][:2] == ("allowed", "allowed")
    assert [r.host for r in plugin_lab.requests][-1] == "granted.lab.example"


def test_granted_but_undeclared_is_refused(plugin_lab, editor_user):
    instance = services.bind("example", alias="example", egress="none")
    instance.egress_hosts = ["ungranted.lab.example", "granted.lab.example"]
    instance.save()
    assert instance.effective() == ("granted.lab.example",)
    result = run("example_fetch", editor_user, url="http://ungranted.lab.example/plain")
    assert result.meta == {"reason": "egress_not_granted"}
    assert events(plugin_instance=instance)[-1][:2] == ("denied", "not_allowlisted")
    assert plugin_lab.accepts(plugin_lab.PUBLIC_V4[2]) == []


def test_declared_but_not_granted_is_refused(plugin_lab, editor_user):
    instance = services.bind("example", alias="example", egress="none")
    instance.egress_hosts = ["granted.lab.example"]
    instance.save()
    result = run("example_fetch", editor_user, url="http://x.api.lab.example/plain")
    assert result.meta == {"reason": "egress_not_granted"}


def test_group_denylist_still_applies(plugin_lab, editor_user, host_entry_factory):
    services.install("example")
    host_entry_factory(group="example", value="granted.lab.example", list="deny")
    result = run("example_fetch", editor_user, url="http://granted.lab.example/plain")
    assert result.meta == {"reason": "denylist"}


def test_group_allowlist_grants_nothing(plugin_lab, editor_user, host_entry_factory):
    services.bind("example", alias="example", egress="none")
    host_entry_factory(group="example", value="granted.lab.example", list="allow")
    result = run("example_fetch", editor_user, url="http://granted.lab.example/plain")
    assert result.meta == {"reason": "egress_not_granted"}


def test_private_target_needs_egress_allow_private(plugin_lab, editor_user):
    instance = services.install("example")
    result = run("example_fetch", editor_user, url="http://intranet.lab.example/plain")
    assert result.meta == {"reason": "address_class"}
    assert events(plugin_instance=instance)[-1][:2] == ("denied", "address_class:private")
    assert plugin_lab.private_accepts() == []

    instance.egress_allow_private = ["intranet.lab.example"]
    instance.save()
    plugin_lab.expect_private_accepts = True
    result = run("example_fetch", editor_user, url="http://intranet.lab.example/plain")
    assert payload(result)["status"] == 200
    assert [a.local for a in plugin_lab.private_accepts()] == ["10.0.0.10"]


def test_egress_allow_private_only_for_granted_hosts(plugin_lab):
    from django.core.exceptions import ValidationError

    instance = services.bind("example", alias="example", egress="none")
    instance.egress_allow_private = ["intranet.lab.example"]
    with pytest.raises(ValidationError, match="Only granted hosts"):
        instance.save()
    instance.egress_allow_private = ["*.api.lab.example"]
    instance.egress_hosts = ["*.api.lab.example"]
    with pytest.raises(ValidationError, match="exact hosts"):
        instance.save()


def test_metadata_refused_even_with_egress_allow_private(plugin_lab, editor_user):
    instance = services.install("example")
    instance.egress_allow_private = ["metadata.lab.example"]
    instance.save()
    result = run("example_fetch", editor_user, url="http://metadata.lab.example/latest")
    assert result.meta == {"reason": "address_class"}
    assert events(plugin_instance=instance)[-1][:2] == ("denied", "address_class:metadata")
    assert plugin_lab.accepts("169.254.169.254") == []


def test_mixed_answer_refused_even_with_egress_allow_private(plugin_lab, editor_user):
    instance = services.install("example")
    instance.egress_allow_private = ["mixed.lab.example"]
    instance.save()
    result = run("example_fetch", editor_user, url="http://mixed.lab.example/plain")
    assert result.meta == {"reason": "address_class"}
    assert events(plugin_instance=instance)[-1][:2] == ("denied", "mixed_answer")


def test_redirect_is_returned_and_the_follow_up_checked_again(plugin_lab, editor_user):
    services.install("example")
    url = "http://redirector.lab.example/redirect/302?to=http://ungranted.lab.example/plain"
    result = payload(run("example_follow", editor_user, url=url))
    assert result == {"first": 302, "second_error": "egress_not_granted"}
    assert [r.path.split("?")[0] for r in plugin_lab.requests] == ["/redirect/302"]
    assert plugin_lab.accepts(plugin_lab.PUBLIC_V4[2]) == []


def test_redirect_to_a_granted_host_is_a_new_request(plugin_lab, editor_user):
    services.install("example")
    url = "http://redirector.lab.example/redirect/302?to=http://granted.lab.example/plain"
    assert payload(run("example_follow", editor_user, url=url)) == {"first": 302, "second": 200}


def test_refusal_is_redacted_for_the_plugin(plugin_lab):
    """The plugin sees the policy's name only: no address, URL, detail or chained cause."""
    from django_webfetch.net.errors import EgressDenied

    instance = services.install("example")
    with pytest.raises(EgressDenied) as caught:
        instance.http.get("http://metadata.lab.example/latest")
    exc = caught.value
    assert type(exc) is EgressDenied
    assert (exc.reason, exc.url, exc.detail) == ("address_class", "", "")
    assert exc.__cause__ is None and exc.__context__ is None
    assert "169.254" not in str(exc)
    event = EgressEvent.objects.get(decision="denied")
    assert event.addresses == ["169.254.169.254"]


def test_post_with_json_body(plugin_lab, editor_user):
    services.install("example")
    result = run("example_post", editor_user, url="http://granted.lab.example/echo")
    assert result.ok
    assert "POST /echo" in result.content


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_grant_removed_while_running(plugin_lab, editor_user):
    """The grant is re-read on every request: removing it stops the next one, no restart."""
    instance = services.install("example")
    outcome = {}

    def tool():
        outcome["result"] = run(
            "example_repeat",
            editor_user,
            url="http://granted.lab.example/plain",
            times=2,
            pause=1.5,
        )

    worker = threading.Thread(target=tool)
    worker.start()
    plugin_lab.wait_for(lambda: len(plugin_lab.requests) == 1)
    when_idle(lambda: PluginInstance.objects.filter(pk=instance.pk).update(egress_hosts=[]))
    worker.join(20)
    assert payload(outcome["result"]) == {"results": [200, "egress_not_granted"]}
    assert len(plugin_lab.requests) == 1


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_instance_disabled_while_running(plugin_lab, editor_user):
    instance = services.install("example")
    outcome = {}

    def tool():
        outcome["result"] = run(
            "example_repeat",
            editor_user,
            url="http://granted.lab.example/plain",
            times=2,
            pause=1.5,
        )

    worker = threading.Thread(target=tool)
    worker.start()
    plugin_lab.wait_for(lambda: len(plugin_lab.requests) == 1)
    when_idle(lambda: PluginInstance.objects.filter(pk=instance.pk).update(enabled=False))
    worker.join(20)
    assert payload(outcome["result"]) == {"results": [200, "egress_not_granted"]}


# -- defence in depth: the audit hook ---------------------------------------------------------


def test_raw_socket_is_refused_and_recorded(plugin_lab, editor_user):
    instance = services.install("example")
    result = run("example_raw_socket", editor_user, host=plugin_lab.PUBLIC_V4[0])
    assert result.error == "egress_denied"
    assert result.meta == {"reason": "unguarded_network"}
    assert plugin_lab.accepts() == []
    event = EgressEvent.objects.get(plugin_instance=instance)
    assert (event.decision, event.reason, event.url_host, event.port) == (
        "denied",
        "unguarded_network",
        plugin_lab.PUBLIC_V4[0],
        80,
    )
    # create_connection resolves first: refused at the lookup, before any connect.
    assert event.detail.startswith("socket.getaddrinfo")


def test_raw_socket_by_name_is_refused_at_the_lookup(plugin_lab, editor_user, isolation):
    services.install("example")
    isolation.apply()
    result = run("example_raw_socket", editor_user, host="granted.lab.example")
    assert result.meta == {"reason": "unguarded_network"}
    # The audit hook sees the lookup in this process; a plugin process's is its own.
    seen = ["granted.lab.example"] if isolation.trusted else []
    assert [lookup.host for lookup in plugin_lab.lookups] == seen
    assert plugin_lab.dns.queries == []
    assert plugin_lab.accepts() == []
    assert EgressEvent.objects.get().detail.startswith("socket.getaddrinfo")


def test_httpx_imported_by_the_plugin_is_refused(plugin_lab, editor_user):
    services.install("example")
    url = f"http://{plugin_lab.PUBLIC_V4[0]}/plain"
    result = run("example_raw_httpx", editor_user, url=url)
    assert result.meta == {"reason": "unguarded_network"}
    assert plugin_lab.accepts() == []


def test_subprocess_is_refused(plugin_lab, editor_user):
    services.install("example")
    result = run("example_subprocess", editor_user)
    assert result.meta == {"reason": "unguarded_network"}
    assert EgressEvent.objects.get().detail.startswith("subprocess.Popen")


def test_thread_started_by_the_plugin_inherits_the_refusal(plugin_lab, editor_user):
    services.install("example")
    result = run("example_thread", editor_user, address=plugin_lab.PUBLIC_V4[0])
    # The thread's connect was refused; the tool itself returned normally, but the
    # attempt fails the call and is recorded.
    assert result.meta == {"reason": "unguarded_network"}
    assert plugin_lab.accepts() == []


def test_host_code_outside_the_plugin_is_not_affected(plugin_lab, editor_user):
    import socket

    services.install("example")
    run("example_raw_socket", editor_user, host=plugin_lab.PUBLIC_V4[0])
    # After the tool, the same operation from host code works as before.
    with socket.create_connection((plugin_lab.PUBLIC_V4[0], 80), timeout=2):
        pass
    assert plugin_lab.wait_for(lambda: plugin_lab.accepts(plugin_lab.PUBLIC_V4[0]))


def test_tool_of_an_unbound_plugin_fails_closed(plugin_lab, editor_user):
    """Not offered while no instance exists (``tool_not_installed``:
    tests/plugins/test_owned_tool_names_and_groups.py); run anyway, it has no instance to run
    with."""
    from django_webfetch.tools import default_registry

    result = run("example_fetch", editor_user, url="http://granted.lab.example/plain")
    assert result.error == "tool_unavailable"
    assert default_registry.why_not_offered(editor_user, "example_fetch")[0] == (
        "tool_not_installed"
    )
    direct = default_registry.get("example_fetch").execute(
        {"url": "http://granted.lab.example/plain"}, APPROVED
    )
    assert direct.error == "plugin_not_bound"
    assert plugin_lab.connected_addresses(include_dns=True) == set()


def test_runs_execute_passes_the_plugin_instance(plugin_lab, editor_user, settings):
    from django_webfetch import runs

    instance = services.install("example")
    group = instance.default_group()
    from django_webfetch.models import ToolGroup

    ToolGroup.objects.filter(slug=group).update(skip_approval_with_allowlist=True)
    # Approval is decided by the group (issue 9): the skip flag needs a group allowlist too.
    from django_webfetch.models import HostListEntry

    HostListEntry.objects.create(
        group=ToolGroup.objects.get(slug=group), list="allow", value="granted.lab.example"
    )
    call = settled_call(
        runs.request_call(
            "example_fetch", {"url": "http://granted.lab.example/plain"}, user=editor_user
        )
    )
    assert call.state == "succeeded", call.result
    assert EgressEvent.objects.filter(plugin_instance=instance, call_id=str(call.pk)).count() == 2


def test_networked_plugin_tool_needs_approval_by_default(plugin_lab, editor_user):
    from django_webfetch import runs

    services.install("example")
    call = runs.request_call(
        "example_fetch", {"url": "http://granted.lab.example/plain"}, user=editor_user
    )
    assert call.state == "awaiting_approval"
    assert plugin_lab.requests == []


def test_timing_does_not_leak_between_instances(plugin_lab, editor_user):
    """Two bindings of one plugin: each reaches only its own grant."""
    services.install("example")
    other = services.bind("example", alias="other", egress="none")
    other.egress_hosts = ["x.api.lab.example"]
    other.save()
    assert other.http.get("http://x.api.lab.example/plain").status_code == 200
    from django_webfetch.net.errors import EgressDenied

    with pytest.raises(EgressDenied, match="egress_not_granted"):
        other.http.get("http://granted.lab.example/plain")
    time.sleep(0)
