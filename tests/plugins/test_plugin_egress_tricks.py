"""Attacks on the plugin egress design, each against the real lab (DESIGN.md §8).

Look-alike hosts, case and trailing dots, IDN, ports, userinfo, IP literals of a granted
host's address, DNS rebinding between two requests, a caller-set Host header, oversized
answers, Unix and UDP sockets, borrowing another instance's client, hostile manifests.
"""

from __future__ import annotations

import pytest

from django_webfetch.models import EgressEvent
from django_webfetch.net.errors import EgressDenied, ResponseTooLarge
from django_webfetch.plugins import services
from django_webfetch.plugins.manifest import ManifestError, parse_manifest
from django_webfetch.tools import ToolContext, run_tool

pytestmark = pytest.mark.django_db

APPROVED = ToolContext(approved=True, call_id="attack")


def run(name, user, **arguments):
    return run_tool(name, arguments, user=user, context=APPROVED)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        # IDN: refused on the plugin's string (``idn``) as net.fetch refuses it, before
        # httpx could turn it into its xn-- form.
        ("http://bücher.lab.example/plain", "invalid_url"),
        ("http://granted.lab.example@ungranted.lab.example/plain", "invalid_url"),  # userinfo
        ("http://ungranted.lab.example#@granted.lab.example/plain", "egress_not_granted"),
        ("http://11.0.0.10/plain", "egress_not_granted"),  # granted.lab.example's address
        ("http://[::ffff:11.0.0.10]/plain", "egress_not_granted"),
        ("http://0x0b00000a/plain", "invalid_url"),  # legacy numeric form of 11.0.0.10
        ("http://granted.lab.example:80@ungranted.lab.example/", "invalid_url"),
        ("https://granted.lab.example:8443/plain", "port"),
        ("ftp://granted.lab.example/plain", "scheme"),
        ("file:///etc/passwd", "scheme"),  # the guard's verdict, not httpx's
        ("http://granted.lab.example\\@ungranted.lab.example/", "invalid_url"),
        ("http://granted%2elab.example/plain", "invalid_url"),
        ("http://granted.lab.example.ungranted.lab.example/plain", "egress_not_granted"),
        ("http://x.api.lab.example.ungranted.lab.example/plain", "egress_not_granted"),
    ],
)
def test_url_tricks_never_reach_an_ungranted_host(plugin_lab, url, reason):
    instance = services.install("example")
    plugin_lab.dns.set("granted.lab.example.ungranted.lab.example", a=[plugin_lab.PUBLIC_V4[2]])
    plugin_lab.dns.set("x.api.lab.example.ungranted.lab.example", a=[plugin_lab.PUBLIC_V4[2]])
    with pytest.raises(EgressDenied) as caught:
        instance.http.get(url)
    assert caught.value.reason == reason
    assert plugin_lab.accepts() == []
    # The full detail is on record, the plugin saw only the policy's name.
    assert EgressEvent.objects.filter(plugin_instance=instance, decision="denied").exists()


def test_dns_rebinding_between_two_requests(plugin_lab):
    """Each request is resolved and checked again; the second answer (private) is refused."""
    instance = services.install("example")
    plugin_lab.dns.sequence(
        "granted.lab.example",
        [{"a": [plugin_lab.PUBLIC_V4[0]]}, {"a": ["10.0.0.10"]}],
    )
    assert instance.http.get("http://granted.lab.example/plain").status_code == 200
    with pytest.raises(EgressDenied) as caught:
        instance.http.get("http://granted.lab.example/plain")
    assert caught.value.reason == "address_class"
    assert plugin_lab.private_accepts() == []


def test_caller_host_header_cannot_pick_another_virtual_host(plugin_lab, editor_user):
    services.install("example")
    result = run(
        "example_send",
        editor_user,
        url="http://granted.lab.example/echo",
        headers={"Host": "ungranted.lab.example"},
    )
    assert result.ok
    assert "ungranted.lab.example" not in result.content
    assert "granted.lab.example" in result.content


def test_oversized_answer_is_cut(plugin_lab, settings):
    settings.WEBFETCH_MAX_RESPONSE_BYTES = 10_000
    instance = services.install("example")
    with pytest.raises(ResponseTooLarge) as caught:
        instance.http.get("http://granted.lab.example/bytes/200000")
    assert caught.value.detail == "" and caught.value.__context__ is None


def test_gzip_bomb_is_cut(plugin_lab):
    instance = services.install("example")
    with pytest.raises(ResponseTooLarge):
        instance.http.get("http://granted.lab.example/gzip-bomb")


def test_unix_socket_is_refused(plugin_lab, editor_user, tmp_path, isolation):
    """In-process the audit hook refuses the connect and records it; a plugin process
    cannot make the socket (seccomp: ``socket()`` is refused for every family)."""
    import socket

    path = str(tmp_path / "docker.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    server.settimeout(0.2)
    try:
        services.install("example")
        isolation.apply()
        result = run("example_unix", editor_user, path=path)
        if isolation.trusted:
            assert result.meta == {"reason": "unguarded_network"}
        else:
            assert result.error == "plugin_error"
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    if isolation.trusted:
        event = EgressEvent.objects.get()
        assert event.url_host == "" and path in event.detail


def test_udp_is_refused(plugin_lab, editor_user):
    services.install("example")
    result = run("example_udp", editor_user, address=plugin_lab.DNS_V4)
    assert result.meta == {"reason": "unguarded_network"}
    assert plugin_lab.dns.queries == []


def test_a_tool_cannot_borrow_another_instances_client(plugin_lab, editor_user, isolation):
    """In-process the client refuses another instance's grant; a plugin process has no
    database and no client but its own RPC (importing the host's client fails)."""
    services.bind("example", alias="example", egress="none")
    other = services.install("example", alias="other")
    isolation.apply()
    assert other.http.get("http://granted.lab.example/plain").status_code == 200  # host code
    result = run(
        "example_borrow", editor_user, instance=other.pk, url="http://granted.lab.example/plain"
    )
    if isolation.trusted:
        assert result.meta == {"reason": "egress_not_granted"}
    else:
        assert result.error == "plugin_error"
    assert len(plugin_lab.requests) == 1


def test_hostile_manifests():
    cyclic: dict = {"name": "a", "version": "1"}
    cyclic["description"] = cyclic
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    for manifest in (cyclic, {"name": "a", "version": "1", "egress": deep}, "not a mapping"):
        with pytest.raises(ManifestError):
            parse_manifest(manifest)


def test_a_plugin_cannot_join_a_built_in_group():
    def handler(plugin, arguments):
        return ""

    for group in ("web", "system", "code", "rag"):
        with pytest.raises(ManifestError, match="built-in group"):
            parse_manifest(
                {
                    "name": "a",
                    "version": "1",
                    "tools": [
                        {"name": "t", "description": "d", "handler": handler, "group": group}
                    ],
                }
            )


@pytest.mark.parametrize(
    ("prefixes", "aaaa", "reason"),
    [
        ((), "64:ff9b::a00:a", "address_class:nat64"),  # no prefix declared: refused whole
        (("64:ff9b::/96",), "64:ff9b::a9fe:a9fe", "address_class:metadata"),
        (("64:ff9b::/96",), "64:ff9b::7f00:1", "address_class:loopback"),  # not allowed
        # overlapping prefixes: the worst decoding decides (here metadata under the /48)
        (
            ("2001:db8:a00::/48", "2001:db8::/32"),
            "2001:db8:a00:a9fe:a9:fe00::",
            "address_class:metadata",
        ),
    ],
)
def test_nat64_answers_for_a_private_granted_host(plugin_lab, settings, prefixes, aaaa, reason):
    """``egress_allow_private`` opens private decodings only; the NAT64 settings apply to
    plugins as to every tool."""
    settings.WEBFETCH_NAT64_PREFIXES = list(prefixes)
    instance = services.install("example")
    instance.egress_allow_private = ["intranet.lab.example"]
    if aaaa.startswith("64:ff9b::7f"):
        instance.egress_allow_private = []
    instance.save()
    plugin_lab.dns.set("intranet.lab.example", aaaa=[aaaa])
    with pytest.raises(EgressDenied) as caught:
        instance.http.get("http://intranet.lab.example/plain")
    assert caught.value.reason == "address_class"
    event = EgressEvent.objects.get(plugin_instance=instance)
    assert event.reason == reason
    assert plugin_lab.accepts() == []
