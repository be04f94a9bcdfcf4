"""The one guarded httpx transport (``net.guarded``), end to end in the lab.

Every request through it is checked by the whole guard and pinned; nothing here relaxes
the policy.  What reached the wire is read from the lab servers' logs and the audit hook.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from django_webfetch.net import (
    AddressNotAllowed,
    EgressDenied,
    FetchError,
    FetchTimeout,
    ResponseTooLarge,
    UnsupportedContentEncoding,
)
from django_webfetch.net.guarded import (
    AsyncGuardedTransport,
    GuardedTransport,
    guarded_async_client,
    guarded_client,
)
from django_webfetch.net.ipclass import classify

pytestmark = pytest.mark.lab

V4, V4_B = "11.0.0.10", "11.0.0.12"
V6 = "2606:4700:10::10"


def _assert_public_only(lab) -> None:
    for c in lab.connects:
        if c.address in (lab.DNS_V4, lab.DNS_V6) and c.port == 53:
            continue
        assert classify(c.address) == "public", c
    assert not lab.private_accepts()


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_get_and_post_are_pinned_to_the_checked_address(lab, scheme):
    lab.dns.set("api.lab.example", a=[V4])
    events = []
    with guarded_client(lab.policy(), observer=events.append) as client:
        got = client.get(lab.url("api.lab.example", "/echo", scheme))
        posted = client.post(lab.url("api.lab.example", "/echo", scheme), json={"q": 1})
    assert got.status_code == 200
    assert "host: api.lab.example" in got.text
    assert "request-line: POST /echo HTTP/1.1" in posted.text
    assert {a.local for a in lab.accepts()} == {V4}
    assert [e.decision for e in events] == ["allowed", "fetched", "allowed", "fetched"]
    assert events[1].status == 200 and events[1].addresses == (V4,)
    _assert_public_only(lab)


def test_a_caller_set_host_header_is_replaced_by_the_checked_name(lab):
    lab.dns.set("api.lab.example", a=[V4])
    with guarded_client(lab.policy()) as client:
        response = client.get(
            lab.url("api.lab.example", "/echo"), headers={"Host": "internal.corp"}
        )
    assert "host: api.lab.example" in response.text
    assert "internal.corp" not in response.text


@pytest.mark.parametrize(
    "host, answer",
    [
        ("loop.lab.example", {"a": ["127.0.0.1"]}),
        ("ten.lab.example", {"a": ["10.0.0.5"]}),
        ("meta.lab.example", {"a": ["169.254.169.254"]}),
        ("mixed.lab.example", {"a": [V4, "10.0.0.5"]}),
    ],
)
def test_non_public_answers_are_refused_before_any_connect(lab, host, answer):
    lab.dns.set(host, **answer)
    events = []
    with (
        guarded_client(lab.policy(), observer=events.append) as client,
        pytest.raises(EgressDenied) as info,
    ):
        client.get(lab.url(host, "/page"))
    assert info.value.reason.startswith(("address_class", "mixed_answer"))
    assert lab.accepts() == []
    assert [e.decision for e in events] == ["denied"]


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1/", "http://[::1]/", "http://0x7f.1/", "file:///etc/passwd"]
)
def test_literal_and_legacy_forms_are_refused(lab, url):
    with guarded_client(lab.policy()) as client, pytest.raises((EgressDenied, httpx.HTTPError)):
        client.get(url)
    assert lab.accepts() == []


def test_redirects_are_returned_not_followed(lab):
    lab.dns.set("api.lab.example", a=[V4])
    lab.dns.set("inside.lab.example", a=["10.0.0.5"])
    with guarded_client(lab.policy()) as client:
        response = client.get(
            lab.url("api.lab.example", "/redirect/302?to=http://inside.lab.example/")
        )
        assert response.status_code == 302
        assert response.headers["location"] == "http://inside.lab.example/"
        # A follow-up is a new request, checked again.
        with pytest.raises(AddressNotAllowed):
            client.get(response.headers["location"])
    assert {a.local for a in lab.accepts()} == {V4}


def test_even_a_client_that_follows_redirects_gets_every_hop_checked(lab):
    lab.dns.set("api.lab.example", a=[V4])
    lab.dns.set("inside.lab.example", a=["10.0.0.5"])
    transport = GuardedTransport(lab.policy())
    with (
        httpx.Client(transport=transport, follow_redirects=True) as client,
        pytest.raises(AddressNotAllowed),
    ):
        client.get(lab.url("api.lab.example", "/redirect/302?to=http://inside.lab.example/"))
    assert {a.local for a in lab.accepts()} == {V4}


def test_the_policy_callable_is_read_for_every_request(lab):
    lab.dns.set("api.lab.example", a=[V4])
    grants = {"deny": ()}

    def policy(request):
        return lab.policy(denylist=grants["deny"])

    with guarded_client(policy) as client:
        assert client.get(lab.url("api.lab.example", "/plain")).status_code == 200
        grants["deny"] = ("api.lab.example",)
        with pytest.raises(EgressDenied) as info:
            client.get(lab.url("api.lab.example", "/plain"))
    assert info.value.reason == "denylist"
    assert len(lab.accepts()) == 1


def test_dns_rebinding_between_requests_is_caught(lab):
    lab.dns.set("rebind.lab.example", a=[V4])
    with guarded_client(lab.policy()) as client:
        assert client.get(lab.url("rebind.lab.example", "/plain")).status_code == 200
        lab.dns.set("rebind.lab.example", a=["127.0.0.1"])
        with pytest.raises(AddressNotAllowed):
            client.get(lab.url("rebind.lab.example", "/plain"))
    assert {a.local for a in lab.accepts()} == {V4}


def test_compression_bomb_stops_at_the_cap(lab):
    lab.dns.set("api.lab.example", a=[V4])
    with (
        guarded_client(lab.policy(), max_response_bytes=1 << 20) as client,
        pytest.raises(ResponseTooLarge),
    ):
        client.get(lab.url("api.lab.example", "/gzip-bomb"))


def test_unasked_content_coding_is_refused(lab):
    lab.dns.set("api.lab.example", a=[V4])
    with guarded_client(lab.policy()) as client, pytest.raises(UnsupportedContentEncoding):
        client.get(lab.url("api.lab.example", "/br"))


def test_gzip_body_is_decoded_and_headers_match_it(lab):
    lab.dns.set("api.lab.example", a=[V4])
    with (
        guarded_client(lab.policy(), max_response_bytes=4 << 20) as client,
        pytest.raises(ResponseTooLarge),
    ):
        # 1 GiB of zeros: decoded under the cap, never inflated in the client.
        client.get(lab.url("api.lab.example", "/deflate-bomb"))


def test_the_deadline_bounds_a_slow_body(lab):
    lab.dns.set("api.lab.example", a=[V4])
    with guarded_client(lab.policy(), timeout=1.5) as client, pytest.raises(FetchTimeout):
        client.get(lab.url("api.lab.example", "/slow"))


def test_transport_failures_are_ours_not_httpx(lab):
    lab.dns.set("gone.lab.example", a=["11.0.0.99"])
    with guarded_client(lab.policy(connect_timeout=1.0)) as client, pytest.raises(FetchError):
        client.get(lab.url("gone.lab.example", "/plain"))


def test_the_async_transport_runs_the_same_guard(lab):
    lab.dns.set("api.lab.example", aaaa=[V6])
    lab.dns.set("inside.lab.example", a=["192.168.1.1"])

    async def scenario():
        async with guarded_async_client(lab.policy()) as client:
            ok = await client.post(lab.url("api.lab.example", "/echo"), content=b"x" * 10)
            with pytest.raises(AddressNotAllowed):
                await client.get(lab.url("inside.lab.example", "/"))
            return ok

    response = asyncio.run(scenario())
    assert response.status_code == 200
    assert "request-line: POST /echo HTTP/1.1" in response.text
    assert {a.local for a in lab.accepts()} == {V6}
    _assert_public_only(lab)


def test_async_streaming_is_bounded(lab):
    lab.dns.set("api.lab.example", a=[V4_B])
    transport = AsyncGuardedTransport(lab.policy(), max_response_bytes=100_000)

    async def scenario():
        url = lab.url("api.lab.example", "/page2m")
        async with (
            httpx.AsyncClient(transport=transport) as client,
            client.stream("GET", url) as r,
        ):
            async for _ in r.aiter_bytes():
                pass

    with pytest.raises(ResponseTooLarge):
        asyncio.run(scenario())


def test_timeout_must_be_positive():
    with pytest.raises(ValueError):
        GuardedTransport(None, timeout=0)  # type: ignore[arg-type]


def test_closing_twice_records_one_event(lab):
    lab.dns.set("api.lab.example", a=[V4])
    events = []
    transport = GuardedTransport(lab.policy(), observer=events.append)
    response = transport.handle_request(httpx.Request("GET", lab.url("api.lab.example", "/plain")))
    assert response.read() == b"hello from the lab\n"
    response.stream.close()
    response.stream.close()
    assert [e.decision for e in events] == ["allowed", "fetched"]
    assert events[-1].bytes == len(b"hello from the lab\n")


def test_the_checked_url_is_sent_not_the_callers_spelling(lab):
    lab.dns.set("api.lab.example", a=[V4])
    with guarded_client(lab.policy()) as client:
        response = client.get("http://API.lab.example./a/../echo")
    assert response.status_code == 200
    assert "request-line: GET /echo HTTP/1.1" in response.text
    assert "host: api.lab.example" in response.text
