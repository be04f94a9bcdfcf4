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
def test_get_and_post_are_pinned_to_the_checked_address(make_client, lab, scheme):
    lab.dns.set("api.lab.example", a=[V4])
    events = []
    with make_client(lab.policy(), observer=events.append) as client:
        got = client.get(lab.url("api.lab.example", "/echo", scheme))
        posted = client.post(lab.url("api.lab.example", "/echo", scheme), json={"q": 1})
    assert got.status_code == 200
    assert "host: api.lab.example" in got.text
    assert "request-line: POST /echo HTTP/1.1" in posted.text
    assert {a.local for a in lab.accepts()} == {V4}
    assert [e.decision for e in events] == ["allowed", "fetched", "allowed", "fetched"]
    assert events[1].status == 200 and events[1].addresses == (V4,)
    _assert_public_only(lab)


def test_a_caller_set_host_header_is_replaced_by_the_checked_name(make_client, lab):
    lab.dns.set("api.lab.example", a=[V4])
    with make_client(lab.policy()) as client:
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
def test_non_public_answers_are_refused_before_any_connect(make_client, lab, host, answer):
    lab.dns.set(host, **answer)
    events = []
    with (
        make_client(lab.policy(), observer=events.append) as client,
        pytest.raises(EgressDenied) as info,
    ):
        client.get(lab.url(host, "/page"))
    assert info.value.reason.startswith(("address_class", "mixed_answer"))
    assert lab.accepts() == []
    assert [e.decision for e in events] == ["denied"]


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1/", "http://[::1]/", "http://0x7f.1/", "file:///etc/passwd"]
)
def test_literal_and_legacy_forms_are_refused(make_client, lab, url):
    with make_client(lab.policy()) as client, pytest.raises((EgressDenied, httpx.HTTPError)):
        client.get(url)
    assert lab.accepts() == []


def test_redirects_are_returned_not_followed(make_client, lab):
    lab.dns.set("api.lab.example", a=[V4])
    lab.dns.set("inside.lab.example", a=["10.0.0.5"])
    with make_client(lab.policy()) as client:
        response = client.get(
            lab.url("api.lab.example", "/redirect/302?to=http://inside.lab.example/")
        )
        assert response.status_code == 302
        assert response.headers["location"] == "http://inside.lab.example/"
        # A follow-up is a new request, checked again.
        with pytest.raises(AddressNotAllowed):
            client.get(response.headers["location"])
    assert {a.local for a in lab.accepts()} == {V4}


def test_even_a_client_that_follows_redirects_gets_every_hop_checked(make_transport_client, lab):
    lab.dns.set("api.lab.example", a=[V4])
    lab.dns.set("inside.lab.example", a=["10.0.0.5"])
    with (
        make_transport_client(lab.policy(), follow_redirects=True) as client,
        pytest.raises(AddressNotAllowed),
    ):
        client.get(lab.url("api.lab.example", "/redirect/302?to=http://inside.lab.example/"))
    assert {a.local for a in lab.accepts()} == {V4}


def test_the_policy_callable_is_read_for_every_request(make_client, lab):
    lab.dns.set("api.lab.example", a=[V4])
    grants = {"deny": ()}

    def policy(request):
        return lab.policy(denylist=grants["deny"])

    with make_client(policy) as client:
        assert client.get(lab.url("api.lab.example", "/plain")).status_code == 200
        grants["deny"] = ("api.lab.example",)
        with pytest.raises(EgressDenied) as info:
            client.get(lab.url("api.lab.example", "/plain"))
    assert info.value.reason == "denylist"
    assert len(lab.accepts()) == 1


def test_dns_rebinding_between_requests_is_caught(make_client, lab):
    lab.dns.set("rebind.lab.example", a=[V4])
    with make_client(lab.policy()) as client:
        assert client.get(lab.url("rebind.lab.example", "/plain")).status_code == 200
        lab.dns.set("rebind.lab.example", a=["127.0.0.1"])
        with pytest.raises(AddressNotAllowed):
            client.get(lab.url("rebind.lab.example", "/plain"))
    assert {a.local for a in lab.accepts()} == {V4}


def test_compression_bomb_stops_at_the_cap(make_client, lab):
    lab.dns.set("api.lab.example", a=[V4])
    with (
        make_client(lab.policy(), max_response_bytes=1 << 20) as client,
        pytest.raises(ResponseTooLarge),
    ):
        client.get(lab.url("api.lab.example", "/gzip-bomb"))


def test_unasked_content_coding_is_refused(make_client, lab):
    lab.dns.set("api.lab.example", a=[V4])
    with make_client(lab.policy()) as client, pytest.raises(UnsupportedContentEncoding):
        client.get(lab.url("api.lab.example", "/br"))


def test_gzip_body_is_decoded_and_headers_match_it(make_client, lab):
    lab.dns.set("api.lab.example", a=[V4])
    with (
        make_client(lab.policy(), max_response_bytes=4 << 20) as client,
        pytest.raises(ResponseTooLarge),
    ):
        # 1 GiB of zeros: decoded under the cap, never inflated in the client.
        client.get(lab.url("api.lab.example", "/deflate-bomb"))


def test_the_deadline_bounds_a_slow_body(make_client, lab):
    lab.dns.set("api.lab.example", a=[V4])
    with make_client(lab.policy(), timeout=1.5) as client, pytest.raises(FetchTimeout):
        client.get(lab.url("api.lab.example", "/slow"))


def test_transport_failures_are_ours_not_httpx(make_client, lab):
    lab.dns.set("gone.lab.example", a=["11.0.0.99"])
    with make_client(lab.policy(connect_timeout=1.0)) as client, pytest.raises(FetchError):
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


def test_the_checked_url_is_sent_not_the_callers_spelling(make_client, lab):
    lab.dns.set("api.lab.example", a=[V4])
    with make_client(lab.policy()) as client:
        response = client.get("http://API.lab.example./a/../echo")
    assert response.status_code == 200
    assert "request-line: GET /echo HTTP/1.1" in response.text
    assert "host: api.lab.example" in response.text


def test_async_closing_twice_records_one_event(lab):
    lab.dns.set("api.lab.example", a=[V4])
    events = []
    transport = AsyncGuardedTransport(lab.policy(), observer=events.append)

    async def scenario():
        request = httpx.Request("GET", lab.url("api.lab.example", "/plain"))
        response = await transport.handle_async_request(request)
        body = await response.aread()
        await response.stream.aclose()
        await response.stream.aclose()
        return body

    assert asyncio.run(scenario()) == b"hello from the lab\n"
    assert [e.decision for e in events] == ["allowed", "fetched"]
    assert events[-1].bytes == len(b"hello from the lab\n")


# -- async only: the event loop, not threads, carries the streams ----------------------------


def _client_threads() -> int:
    """``threading.active_count()`` but the lab servers' threads (one per accepted
    connection or DNS query, named ``lab-*``), from one snapshot of the thread list."""
    import threading

    return sum(1 for t in threading.enumerate() if not t.name.startswith("lab-"))


async def _first_byte(client, url: str, started: asyncio.Event | None = None) -> None:
    async with client.stream("GET", url) as response:
        async for _ in response.aiter_raw():
            if started is not None:
                started.set()
            await asyncio.sleep(3600)  # hold the stream open until cancelled


def test_cancelling_mid_stream_releases_the_connection_and_closes_the_record(lab):
    """A task cancelled while it reads a body (an SDK call abandoned) leaves no open hop:
    the record is closed once, with the bytes read (as a sync body closed early), and the
    socket is closed (the server sees the client leave, ``aborted``)."""
    lab.dns.set("api.lab.example", a=[V4])
    events = []

    async def scenario():
        async with guarded_async_client(lab.policy(), observer=events.append) as client:
            started = asyncio.Event()
            task = asyncio.create_task(
                _first_byte(client, lab.url("api.lab.example", "/slow"), started)
            )
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(scenario())
    assert [e.decision for e in events] == ["allowed", "fetched"]
    assert (events[-1].status, events[-1].addresses, events[-1].bytes) == (200, (V4,), 1)
    lab.wait_requests_done(timeout=10)
    [record] = lab.requests
    assert record.done.is_set() and record.aborted


def test_forty_concurrent_streams_use_no_extra_thread(lab):
    """40 requests streaming at once from a slow lab server (each mid-body, its DNS
    answered, its TLS or TCP connection open) run on the loop's thread alone: the process
    has no more threads than before they started (no anyio worker, no executor for
    ``getaddrinfo``).  Counted, not timed."""
    lab.dns.set("api.lab.example", a=[V4], aaaa=[V6])
    streams = 40

    async def scenario():
        before = _client_threads()
        async with guarded_async_client(lab.policy()) as client:
            started = [asyncio.Event() for _ in range(streams)]
            tasks = [
                asyncio.create_task(
                    _first_byte(client, lab.url("api.lab.example", "/slow", scheme), event)
                )
                for event, scheme in zip(started, ["http", "https"] * (streams // 2), strict=True)
            ]
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), 60)
            during = _client_threads()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return before, during

    before, during = asyncio.run(scenario())
    assert during == before
    assert len(lab.accepts()) == streams
    _assert_public_only(lab)
