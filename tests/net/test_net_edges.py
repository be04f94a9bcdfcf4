"""Edges of the net/ core: the CLI, resolver failures, address-entry allowlists, budget
exhaustion, incomplete bodies, the proxy path and the transport's defensive branches.

Everything that connects runs in the namespace lab against real servers.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from ipaddress import ip_address

import httpcore
import httpx
import pytest

from django_webfetch.net import (
    AddressNotAllowed,
    EgressDenied,
    EgressPolicy,
    FetchError,
    FetchTimeout,
    PolicyError,
    PortNotAllowed,
    ResolutionError,
    UnresolvableHost,
    UrlGuard,
    explain,
    fetch,
)
from django_webfetch.net.__main__ import main
from django_webfetch.net.guard import ResolvedDestination
from django_webfetch.net.resolve import DnsResolver
from django_webfetch.net.transport import DeadlineStream, PinnedBackend, ResponseStream
from django_webfetch.net.urlparse import parse_url

V4, V4_B = "11.0.0.10", "11.0.0.12"
NOWHERE = "11.0.0.99"  # public-looking, bound nowhere in the lab


# -- the command line -------------------------------------------------------------------


def test_cli_explain_refusal_exit_code(capsys):
    assert main(["explain", "http://0x7f.1/"]) == 1  # 1: refused (issue 9 item 13)
    assert "DENIED (legacy_numeric_host)" in capsys.readouterr().out


@pytest.mark.lab
def test_cli_explain_allowed(lab, capsys):
    lab.dns.set("cli.lab.example", a=[V4])
    args = ["explain", "http://cli.lab.example/", "--nameserver", lab.DNS_V4]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ALLOWED" in out
    assert f"{V4}=public" in out


@pytest.mark.lab
def test_cli_fetch_prints_the_body(lab, capsys):
    lab.dns.set("cli.lab.example", a=[V4])
    args = ["fetch", lab.url("cli.lab.example", "/plain", scheme="https")]
    args += ["--nameserver", lab.DNS_V4, "--ca-file", lab.ca_file]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.out == "hello from the lab\n"
    assert f"via {V4}" in captured.err


@pytest.mark.lab
def test_cli_fetch_refused_and_failed(lab, capsys):
    lab.dns.set("cli.lab.example", a=[V4])
    ns = ["--nameserver", lab.DNS_V4]
    assert main(["fetch", "http://10.0.0.1/", *ns]) == 1
    assert "refused: address_class:private" in capsys.readouterr().err
    assert main(["fetch", lab.url("cli.lab.example", "/json"), *ns]) == 2
    assert "failed: media_type" in capsys.readouterr().err
    assert (
        main(["fetch", lab.url("cli.lab.example", "/plain"), "--deny", "cli.lab.example", *ns]) == 1
    )


@pytest.mark.lab
def test_cli_explain_without_resolving_sends_no_query(lab, capsys):
    lab.dns.set("cli.lab.example", a=[V4])
    ns = ["--nameserver", lab.DNS_V4]
    assert main(["explain", "http://cli.lab.example/", "--no-resolve", *ns]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("ALLOWED SO FAR (not resolved")
    assert lab.dns.queries == []
    assert main(["explain", "http://cli.lab.example/", *ns]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "ALLOWED"
    assert lab.dns.lookups("cli.lab.example") == 1


# -- resolution -------------------------------------------------------------------------


@pytest.mark.lab
def test_system_resolver_configuration_is_used_when_no_nameservers(lab):
    # The lab namespace's resolv.conf names the lab DNS server; dnspython reads it.
    lab.dns.set("sys.lab.example", a=[V4])
    dest = UrlGuard().check("http://sys.lab.example/", EgressPolicy(proxy_env=()))
    assert [str(a) for a in dest.addresses] == [V4]


def test_policy_refuses_nameservers_that_are_not_ip_literals():
    with pytest.raises(PolicyError):
        EgressPolicy(nameservers=("dns.example",))
    assert EgressPolicy(nameservers=("2606:4700:10:0::53",)).nameservers == ("2606:4700:10::53",)


@pytest.mark.lab
def test_resolver_edge_cases(lookup, lab):
    resolver = DnsResolver(lab.nameservers)
    with pytest.raises(ResolutionError):
        lookup(resolver, "x.lab.example", timeout=0)
    with pytest.raises(UnresolvableHost):
        lookup(resolver, "a" * 64 + ".lab.example", timeout=2)
    lab.dns.yxdomain("yx.lab.example")
    with pytest.raises(ResolutionError) as info:
        lookup(resolver, "yx.lab.example", timeout=2)
    assert info.value.code == "dns_error"


@pytest.mark.lab
def test_resolver_budget_is_checked_between_queries(lookup, lab):
    lab.dns.set("slowclock.lab.example", a=[V4])
    ticks = iter([0.0, 0.1, 10.0, 10.0])
    resolver = DnsResolver(lab.nameservers, clock=lambda: next(ticks))
    with pytest.raises(ResolutionError):
        lookup(resolver, "slowclock.lab.example", timeout=5)


@pytest.mark.lab
def test_explain_reports_resolver_failures(lab):
    lab.dns.servfail("broken.lab.example")
    decision = explain("http://broken.lab.example/", policy=lab.policy())
    assert not decision.allowed
    assert decision.reason == "dns_error"
    assert {s.name: s.verdict for s in decision.steps}["resolve"] == "fail"
    lab.dns.nxdomain("gone.lab.example")
    decision = explain("http://gone.lab.example/", policy=lab.policy())
    assert decision.reason == "unresolvable"
    assert "no A/AAAA answer" in decision.as_text()


# -- allowlists of addresses decide on the resolved addresses ------------------------------


@pytest.mark.lab
def test_address_allowlist_entry_matches_every_resolved_address(lab):
    lab.dns.set("one.lab.example", a=[V4])
    lab.dns.set("two.lab.example", a=[V4, V4_B])
    p = lab.policy(allowlist=(V4,))
    assert [str(a) for a in UrlGuard().check("http://one.lab.example/", p).addresses] == [V4]
    with pytest.raises(AddressNotAllowed) as info:
        UrlGuard().check("http://two.lab.example/", p)
    assert info.value.reason == "not_allowlisted"
    decision = explain("http://one.lab.example/", policy=p)
    assert "decided on the resolved addresses" in decision.as_text()


@pytest.mark.lab
def test_address_allowlist_entry_with_port(lab):
    lab.dns.set("one.lab.example", a=[V4])
    result = fetch(
        "http://one.lab.example:8080/plain", policy=lab.policy(allowlist=(f"{V4}:8080",))
    )
    assert result.status == 200
    with pytest.raises(PortNotAllowed):
        UrlGuard().check("http://one.lab.example:8080/", lab.policy(allowlist=(V4,)))


# -- budget and bodies ------------------------------------------------------------------


@pytest.mark.lab
def test_zero_budget_refuses_before_anything(lab):
    lab.dns.set("z.lab.example", a=[V4])
    with pytest.raises(FetchTimeout):
        fetch("http://z.lab.example/plain", policy=lab.policy(total_timeout=0))
    assert lab.dns.queries == []
    with pytest.raises(FetchTimeout):
        UrlGuard().check("http://z.lab.example/", lab.policy(), deadline=time.monotonic() - 1)


@pytest.mark.lab
def test_incomplete_body_is_a_fetch_error(lab):
    lab.dns.set("t.lab.example", a=[V4])
    events = []
    with pytest.raises(FetchError) as info:
        fetch("http://t.lab.example/truncated", policy=lab.policy(), observer=events.append)
    assert info.value.code == "fetch_error"
    assert [e.decision for e in events] == ["allowed", "failed"]


@pytest.mark.lab
def test_connection_falls_through_to_the_next_checked_address(lab):
    lab.dns.set("fall.lab.example", a=[NOWHERE, V4])
    result = fetch("http://fall.lab.example/plain", policy=lab.policy(connect_timeout=1))
    assert result.hops[-1].address == V4


# -- proxies: only with allow_via_proxy and a non-empty allowlist -------------------------


@pytest.mark.lab
def test_allowed_proxy_carries_the_request(lab):
    lab.dns.set("via.lab.example", a=[V4])
    policy = EgressPolicy(
        nameservers=lab.nameservers,
        proxy_env=(),
        proxy=f"http://{V4_B}:80",
        allow_via_proxy=True,
        allowlist=("via.lab.example",),
    )
    result = fetch("http://via.lab.example/plain", policy=policy)
    assert result.body == b"hello from the lab\n"
    # The request went to the proxy (absolute-form request target), not to the host.
    assert lab.accepts(address=V4_B)
    assert not lab.accepts(address=V4)
    assert lab.requests[-1].path.startswith("http://via.lab.example/")


# -- the transport's defensive branches -------------------------------------------------


def _dest():
    return ResolvedDestination(url=parse_url("http://pin.example/"), addresses=(ip_address(V4),))


def test_backend_refuses_another_target_and_unix_sockets():
    backend = PinnedBackend(
        _dest(), connect_timeout=1, deadline=time.monotonic() + 5, on_connect=None
    )
    with pytest.raises(httpcore.ConnectError):
        backend.connect_tcp("other.example", 80)
    with pytest.raises(httpcore.ConnectError):
        backend.connect_tcp("pin.example", 81)
    with pytest.raises(httpcore.ConnectError):
        backend.connect_unix_socket("/run/docker.sock")
    backend.sleep(0)


def test_backend_with_no_time_left_never_connects():
    backend = PinnedBackend(
        _dest(), connect_timeout=1, deadline=time.monotonic() - 1, on_connect=None
    )
    with pytest.raises(httpcore.ConnectTimeout):
        backend.connect_tcp("pin.example", 80)


def test_deadline_stream_clamps_and_refuses_after_the_deadline():
    from httpcore._backends.sync import SyncStream

    left, right = socket.socketpair()
    try:
        stream = DeadlineStream(SyncStream(left), time.monotonic() + 5)
        stream.write(b"ping")
        assert right.recv(4) == b"ping"
        right.sendall(b"pong")
        assert stream.read(4, timeout=None) == b"pong"
        assert stream.get_extra_info("socket") is left
        expired = DeadlineStream(SyncStream(left), time.monotonic() - 1)
        with pytest.raises(httpcore.ReadTimeout):
            expired.read(1)
        with pytest.raises(httpcore.WriteTimeout):
            expired.write(b"x")
        stream.close()
    finally:
        right.close()


def test_response_stream_maps_errors_and_closes_plain_iterables():
    def broken():
        yield b"a"
        raise httpcore.ReadError("reset")

    stream = ResponseStream(broken())
    with pytest.raises(FetchError) as caught:
        list(stream)
    assert caught.value.failure == "connection_reset"
    plain = ResponseStream([b"x"])
    assert list(plain) == [b"x"]
    plain.close()

    def other():
        yield b"a"
        raise KeyError("not a transport error")

    with pytest.raises(KeyError):
        list(ResponseStream(other()))


@pytest.mark.lab
def test_pinned_transport_without_connect_callback(lab):
    from django_webfetch.net.transport import PinnedTransport

    dest = ResolvedDestination(
        url=parse_url("http://pin.lab.example/plain"), addresses=(ip_address(V4),)
    )
    transport = PinnedTransport(dest, deadline=time.monotonic() + 5)
    response = transport.handle_request(httpx.Request("GET", "http://pin.lab.example/plain"))
    try:
        assert response.status_code == 200
        assert response.read() == b"hello from the lab\n"
    finally:
        response.close()
        transport.close()
    assert lab.requests[-1].host == "pin.lab.example"


# -- caller headers (an endpoint's credentials) -----------------------------------------


@pytest.mark.lab
def test_caller_headers_reach_the_first_origin_only(lab):
    from urllib.parse import quote

    lab.dns.set("auth.lab.example", a=[V4])
    lab.dns.set("elsewhere.lab.example", a=[V4_B])
    secret = {"Authorization": "Bearer s3cret", "X-Api-Key": "k"}
    result = fetch(lab.url("auth.lab.example", "/echo"), policy=lab.policy(), headers=secret)
    assert b"header: Authorization: Bearer s3cret" in result.body
    # Same origin after a redirect: still sent.
    same = quote("/echo", safe="")
    result = fetch(
        lab.url("auth.lab.example", f"/redirect/302?to={same}"), policy=lab.policy(), headers=secret
    )
    assert b"Bearer s3cret" in result.body
    # Another host chosen by a redirect: never sent.
    other = quote("http://elsewhere.lab.example/echo", safe="")
    result = fetch(
        lab.url("auth.lab.example", f"/redirect/302?to={other}"),
        policy=lab.policy(),
        headers=secret,
    )
    assert b"s3cret" not in result.body
    assert b"X-Api-Key" not in result.body
    assert lab.requests[-1].host == "elsewhere.lab.example"


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "internal.example"},
        {"Transfer-Encoding": "chunked"},
        {"accept-encoding": "br"},
        {"Bad Name": "x"},
        {"": "x"},
        {"X-Injected": "a\r\nHost: evil"},
        {"X-Nul": "a\x00"},
        {"X-Del": "a\x7f"},
    ],
)
def test_caller_headers_that_would_change_routing_or_framing_are_refused(headers):
    with pytest.raises(PolicyError):
        fetch("http://11.0.0.10/", policy=EgressPolicy(proxy_env=()), headers=headers)


@pytest.mark.lab
def test_proxy_name_is_resolved_through_dnspython_and_pinned(lab):
    # The operator's proxy is a name: the guard resolves it through the lab DNS (never
    # getaddrinfo) and the transport connects only to that address.
    lab.dns.set("via.lab.example", a=[V4])
    lab.dns.set("proxy.lab.example", a=[V4_B])
    policy = EgressPolicy(
        nameservers=lab.nameservers,
        proxy_env=(),
        proxy="http://proxy.lab.example:80",
        allow_via_proxy=True,
        allowlist=("via.lab.example",),
    )
    dest = UrlGuard().check("http://via.lab.example/plain", policy)
    assert [str(a) for a in dest.proxy_addresses] == [V4_B]
    result = fetch("http://via.lab.example/plain", policy=policy)
    assert result.body == b"hello from the lab\n"
    assert result.hops[-1].address == V4_B
    assert lab.dns.lookups("proxy.lab.example", "A") >= 1
    assert not [x for x in lab.lookups if "proxy.lab.example" in str(x)]  # no getaddrinfo
    assert lab.accepts(address=V4_B) and not lab.accepts(address=V4)


@pytest.mark.lab
@pytest.mark.parametrize(
    ("proxy", "reason"),
    [
        ("http://169.254.169.254:80", "address_class:metadata"),
        ("http://user:pw@proxy.lab.example:80", "proxy"),
        ("socks5://proxy.lab.example:1080", "proxy"),
    ],
)
def test_unusable_or_metadata_proxies_are_refused(lab, proxy, reason):
    lab.dns.set("via.lab.example", a=[V4])
    policy = EgressPolicy(
        nameservers=lab.nameservers,
        proxy_env=(),
        proxy=proxy,
        allow_via_proxy=True,
        allowlist=("via.lab.example",),
    )
    with pytest.raises(EgressDenied) as info:
        fetch("http://via.lab.example/plain", policy=policy)
    assert info.value.reason == reason
    assert not lab.accepts()


def test_explain_without_resolution_does_not_resolve_the_proxy():
    policy = EgressPolicy(
        proxy_env=(),
        proxy="http://proxy.example:3128",
        allow_via_proxy=True,
        allowlist=("via.example",),
    )
    decision = explain("http://via.example/", policy=policy, resolve=False)
    assert decision.allowed
    assert decision.destination is not None
    assert decision.destination.proxy == "http://proxy.example:3128/"
    assert decision.destination.proxy_addresses == ()


# -- the event-loop side of the same transport (``AsyncPinned*``): the same checks ----------


def test_async_backend_refuses_another_target_and_unix_sockets():
    from django_webfetch.net.transport import AsyncPinnedBackend

    async def scenario():
        backend = AsyncPinnedBackend(
            _dest(), connect_timeout=1, deadline=time.monotonic() + 5, on_connect=None
        )
        with pytest.raises(httpcore.ConnectError):
            await backend.connect_tcp("other.example", 80)
        with pytest.raises(httpcore.ConnectError):
            await backend.connect_tcp("pin.example", 81)
        with pytest.raises(httpcore.ConnectError):
            await backend.connect_unix_socket("/run/docker.sock")
        await backend.sleep(0)
        expired = AsyncPinnedBackend(
            _dest(), connect_timeout=1, deadline=time.monotonic() - 1, on_connect=None
        )
        with pytest.raises(httpcore.ConnectTimeout):
            await expired.connect_tcp("pin.example", 80)

    asyncio.run(scenario())


@pytest.mark.lab
def test_async_backend_tries_the_checked_addresses_in_order(lab):
    """An address that refuses is skipped for the next checked one; only checked ones."""
    from django_webfetch.net.transport import AsyncPinnedBackend

    dest = ResolvedDestination(
        url=parse_url("http://pin.example/"), addresses=(ip_address("11.0.0.99"), ip_address(V4))
    )
    connected: list[str] = []

    async def scenario():
        backend = AsyncPinnedBackend(
            dest, connect_timeout=1, deadline=time.monotonic() + 5, on_connect=connected.append
        )
        stream = await backend.connect_tcp("pin.example", 80)
        # One request on it: its answer proves the lab server accepted the connection.
        await stream.write(b"GET /plain HTTP/1.1\r\nHost: pin.example\r\nConnection: close\r\n\r\n")
        assert (await stream.read(12)).startswith(b"HTTP/1.")
        await stream.aclose()

    asyncio.run(scenario())
    assert connected == [V4]
    assert [a.local for a in lab.accepts()] == [V4]


def test_async_deadline_stream_clamps_and_refuses_after_the_deadline():
    from anyio.abc import UNIXSocketStream
    from httpcore._backends.anyio import AnyIOStream

    from django_webfetch.net.transport import AsyncDeadlineStream

    async def scenario():
        left, right = socket.socketpair()
        try:
            inner = AnyIOStream(await UNIXSocketStream.from_socket(left))
            stream = AsyncDeadlineStream(inner, time.monotonic() + 5)
            await stream.write(b"ping")
            assert right.recv(4) == b"ping"
            right.sendall(b"pong")
            assert await stream.read(4, timeout=None) == b"pong"
            assert stream.get_extra_info("socket") is not None
            expired = AsyncDeadlineStream(inner, time.monotonic() - 1)
            with pytest.raises(httpcore.ReadTimeout):
                await expired.read(1)
            with pytest.raises(httpcore.WriteTimeout):
                await expired.write(b"x")
            with pytest.raises(httpcore.ConnectTimeout):
                await expired.start_tls(ssl.create_default_context(), "pin.example")
            await stream.aclose()
        finally:
            right.close()

    asyncio.run(scenario())


def test_async_response_stream_maps_errors_and_closes_plain_iterables():
    from django_webfetch.net.transport import AsyncResponseStream

    async def broken():
        yield b"a"
        raise httpcore.ReadError("reset")

    class Plain:
        """An async iterable with no ``aclose``."""

        def __aiter__(self):
            return self

        async def __anext__(self):
            raise StopAsyncIteration

    async def scenario():
        with pytest.raises(FetchError) as caught:
            async for _ in AsyncResponseStream(broken()):
                pass
        assert caught.value.failure == "connection_reset"
        plain = AsyncResponseStream(Plain())
        assert [chunk async for chunk in plain] == []
        await plain.aclose()
        closable = AsyncResponseStream(broken())
        await closable.aclose()

    asyncio.run(scenario())


@pytest.mark.lab
def test_async_hop_is_released_once(lab):
    """``AsyncPinnedHop.aclose`` twice: one record, one release (base: the hop's door)."""
    from django_webfetch.net.base import EgressTransport

    lab.dns.set("pin.lab.example", a=[V4])
    events = []

    async def scenario():
        base = EgressTransport()
        hop = await base.open_hop_async(
            "http://pin.lab.example/plain",
            lab.policy(),
            deadline=time.monotonic() + 5,
            observer=events.append,
        )
        async with hop:
            response = await hop.send(httpx.Request("GET", "http://pin.lab.example/plain"))
            assert (await response.aread()) == b"hello from the lab\n"
            hop.fetched(status=response.status_code)
        assert hop.closed
        await hop.aclose()

    asyncio.run(scenario())
    assert [e.decision for e in events] == ["allowed", "fetched"]


@pytest.mark.lab
def test_async_lookup_of_a_dropped_name_times_out(lab):
    """The server never answers: the awaited exchange gives up at its deadline."""
    lab.dns.drop("drop.lab.example")
    with pytest.raises(ResolutionError) as info:
        asyncio.run(DnsResolver(lab.nameservers).resolve_async("drop.lab.example", timeout=0.5))
    assert info.value.failure == "dns_timeout"
