"""End-to-end tests of the guarded fetch against the lab's real DNS, HTTP and HTTPS servers.

Nothing here relaxes the guard: policies come from ``lab.policy()`` (lab DNS server, lab CA,
possibly *lower* bounds).  What happened on the wire is asserted through the servers' accept
and request logs and the socket audit hook, never by trusting the code under test.
"""

from __future__ import annotations

import socket
import time
import tracemalloc
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from django_webfetch.net import (
    EgressDenied,
    FetchError,
    FetchTimeout,
    ResolutionError,
    ResponseTooLarge,
    TooManyRedirects,
    UnsupportedContentEncoding,
    UnsupportedMediaType,
    UrlGuard,
    WebFetchError,
    explain,
    fetch,
)
from django_webfetch.net.ipclass import classify
from tests.lab import content
from tests.lab.plugin import Lab

pytestmark = pytest.mark.lab

V4, V4_B, V4_C = "11.0.0.10", "11.0.0.12", "11.0.0.14"
V6, V6_B = "2606:4700:10::10", "2606:4700:10::12"
NOWHERE = "11.0.0.99"  # public-looking, on no interface: connecting fails at once
MIB = 1 << 20

#: The guarded clients' per-operation timeout (``net.guarded._client_kwargs``): a wait the
#: fetch's deadline did not end would end there (or at the server's pace) instead.
_OTHER_BOUND = 20.0


def _tcp(lab) -> list[tuple[str, int]]:
    """TCP connects of the test process (DNS over TCP excluded)."""
    return [
        (c.address, c.port)
        for c in lab.connects
        if c.event == "connect"
        and c.proto == "tcp"
        and not (c.address in (lab.DNS_V4, lab.DNS_V6) and c.port == 53)
    ]


def _assert_public_only(lab) -> None:
    """Every packet the process sent went to a public address or to the lab DNS server."""
    for c in lab.connects:
        if c.address in (lab.DNS_V4, lab.DNS_V6) and c.port == 53:
            continue
        assert classify(c.address) == "public", c
    assert not lab.private_accepts()


def _assert_no_system_lookup(lab) -> None:
    """No name went through getaddrinfo & co (IP literals may: they are no lookup)."""
    import ipaddress

    for lookup in lab.lookups:
        ipaddress.ip_address(lookup.host.strip("[]").split("%")[0])


# -- plain pages --------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("family", ["v4", "v6"])
def test_plain_page(lab, scheme, family):
    address = V4 if family == "v4" else V6
    name = "www.lab.example"
    lab.dns.set(name, **({"a": [address]} if family == "v4" else {"aaaa": [address]}))
    url = lab.url(name, "/page", scheme)
    result = fetch(url, policy=lab.policy())

    assert result.status == 200
    assert (result.url, result.final_url) == (url, url)
    assert (result.media_type, result.charset) == ("text/html", "utf-8")
    assert result.body == content.page_html()
    assert [(h.url, h.status, h.address, h.location) for h in result.hops] == [
        (url, 200, address, None)
    ]
    port = 443 if scheme == "https" else 80
    # Exactly one connection, to exactly the resolved address, with the name on top.
    assert [(a.local, a.port, a.kind) for a in lab.accepts()] == [(address, port, scheme)]
    assert _tcp(lab) == [(address, port)]
    (request,) = lab.requests
    assert (request.method, request.path, request.host) == ("GET", "/page", name)
    assert request.sni == (name if scheme == "https" else None)
    assert "gzip" in request.headers["accept-encoding"]
    assert "br" not in request.headers["accept-encoding"]
    # One lookup per record type, through the lab DNS server only.
    assert (lab.dns.lookups(name, "A"), lab.dns.lookups(name, "AAAA")) == (1, 1)
    _assert_public_only(lab)
    _assert_no_system_lookup(lab)


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("address", [V4, V6])
def test_public_ip_literal(lab, scheme, address):
    result = fetch(lab.url(address, "/echo", scheme), policy=lab.policy())
    assert result.status == 200
    assert f"local: {address} " in result.body.decode()
    assert _tcp(lab) == [(address, 443 if scheme == "https" else 80)]
    assert lab.dns.queries == []  # a literal is never looked up
    (request,) = lab.requests
    assert request.host == (f"[{address}]" if ":" in address else address)
    assert request.sni is None  # no SNI for an address (RFC 6066 §3)


def test_every_address_is_checked_and_only_those_are_tried(lab):
    # The first address has no server (connect fails at once): the transport may move on,
    # but only within the checked set.
    lab.dns.set("two.lab.example", a=[NOWHERE, V4_B])
    result = fetch(lab.url("two.lab.example", "/plain"), policy=lab.policy())
    assert result.body == b"hello from the lab\n"
    assert result.hops[0].address == V4_B
    assert {addr for addr, _ in _tcp(lab)} <= {NOWHERE, V4_B}
    assert [a.local for a in lab.accepts()] == [V4_B]


def test_unreachable_address_is_a_fetch_error(lab):
    lab.dns.set("nowhere.lab.example", a=[NOWHERE])
    with pytest.raises(FetchError) as info:
        fetch(lab.url("nowhere.lab.example", "/plain"), policy=lab.policy())
    assert not isinstance(info.value, FetchTimeout)
    assert _tcp(lab) == [(NOWHERE, 80)]


@pytest.mark.parametrize(
    "path, status",
    [("/status/200", 200), ("/status/404", 404), ("/status/500", 500), ("/status/203", 203)],
)
def test_status_is_reported(lab, path, status):
    lab.dns.set("s.lab.example", a=[V4])
    result = fetch(lab.url("s.lab.example", path), policy=lab.policy())
    assert result.status == status


def test_non_default_port_needs_an_allowlist_entry(lab):
    lab.dns.set("p.lab.example", a=[V4])
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url("p.lab.example", "/plain", port=8080), policy=lab.policy())
    assert info.value.reason == "port"
    assert _tcp(lab) == []
    result = fetch(
        lab.url("p.lab.example", "/echo", "https", port=8443),
        policy=lab.policy(allowlist=("p.lab.example:8443",)),
    )
    assert "host: p.lab.example:8443" in result.body.decode()
    assert [(a.local, a.port) for a in lab.accepts()] == [(V4, 8443)]


def test_proxy_from_the_policy_environment_is_refused(lab):
    lab.dns.set("px.lab.example", a=[V4])
    policy = lab.policy(proxy_env=(("HTTP_PROXY", f"http://{V4_B}:8080"),))
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url("px.lab.example", "/plain"), policy=policy)
    assert info.value.reason == "proxy"
    assert _tcp(lab) == []


def test_proxy_from_the_process_environment_is_refused(lab, monkeypatch):
    lab.dns.set("px.lab.example", a=[V4])
    monkeypatch.setenv("HTTPS_PROXY", f"http://{V4_B}:8080")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url("px.lab.example", "/plain", "https"), policy=lab.policy(proxy_env=None))
    assert info.value.reason == "proxy"
    assert _tcp(lab) == []


def test_large_dns_answer_falls_back_to_tcp(lab):
    # 60 A records do not fit a 512-byte UDP answer: the lab server truncates, the resolver
    # must retry over TCP, and the answer is still checked as a whole.
    many = [V4] + [f"11.0.1.{i}" for i in range(1, 60)]
    lab.dns.set("many.lab.example", a=many)
    result = fetch(lab.url("many.lab.example", "/plain"), policy=lab.policy())
    assert result.hops[0].address == V4
    assert "tcp" in {q.transport for q in lab.dns.queries}
    lab.dns.set("many.lab.example", a=[*many, "10.0.0.10"])
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url("many.lab.example", "/plain"), policy=lab.policy())
    assert info.value.reason == "mixed_answer"


def test_tls_handshake_that_never_completes_hits_the_budget(lab):
    # A listener that never accepts: the kernel completes the TCP handshake, nobody answers
    # the ClientHello.
    tarpit = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with tarpit:
        tarpit.bind(("11.0.0.15", 9443))
        tarpit.listen(8)
        lab.dns.set("tarpit.lab.example", a=["11.0.0.15"])
        started = time.monotonic()
        with pytest.raises(FetchTimeout):
            fetch(
                lab.url("tarpit.lab.example", "/", "https", port=9443),
                policy=lab.policy(allowlist=("tarpit.lab.example:9443",), total_timeout=2),
            )
        # Under half the clients' per-operation timeout (20 s), the other bound that could
        # end the wait: the budget did, however busy the machine (no one-second margin).
        assert time.monotonic() - started < _OTHER_BOUND / 2
    assert _tcp(lab) == [("11.0.0.15", 9443)]


# -- TLS ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["x.untrusted.lab.example", "deep.a.lab.example"])
def test_certificate_must_verify_for_the_name(lab, name):
    lab.dns.set(name, a=[V4])
    with pytest.raises(FetchError) as info:
        fetch(lab.url(name, "/plain", "https"), policy=lab.policy())
    assert not isinstance(info.value, FetchTimeout)
    assert lab.requests == []  # the request never went out
    assert _tcp(lab) == [(V4, 443)]


def test_certificate_is_not_trusted_without_the_lab_ca(lab):
    lab.dns.set("a.lab.example", a=[V4])
    with pytest.raises(FetchError):
        fetch(lab.url("a.lab.example", "/plain", "https"), policy=lab.policy(ca_file=None))
    assert lab.requests == []


# -- redirects ----------------------------------------------------------------------------
FOLLOWED = [301, 302, 303, 307, 308]
NOT_FOLLOWED = [300, 305]  # 305 Use Proxy must never be honoured; 300 is no redirect


def _redirect_url(lab, code: int, to: str, host: str = "r.lab.example") -> str:
    return Lab.url(host, f"/redirect/{code}?to={quote(to, safe='')}")


@pytest.mark.parametrize("code", FOLLOWED)
def test_redirect_is_followed_through_the_guard(lab, code):
    lab.dns.set("r.lab.example", a=[V4])
    lab.dns.set("b.lab.example", a=[V4_B])
    target = lab.url("b.lab.example", "/plain", "https")
    result = fetch(_redirect_url(lab, code, target), policy=lab.policy())
    assert result.final_url == target
    assert result.body == b"hello from the lab\n"
    assert [(h.status, h.address) for h in result.hops] == [(code, V4), (200, V4_B)]
    assert [(a.local, a.port) for a in lab.accepts()] == [(V4, 80), (V4_B, 443)]
    assert [r.host for r in lab.requests] == ["r.lab.example", "b.lab.example"]
    assert lab.dns.lookups("b.lab.example") == 1
    _assert_public_only(lab)


@pytest.mark.parametrize("code", NOT_FOLLOWED)
def test_other_3xx_are_not_followed(lab, code):
    lab.dns.set("r.lab.example", a=[V4])
    lab.dns.set("b.lab.example", a=[V4_B])
    result = fetch(
        _redirect_url(lab, code, lab.url("b.lab.example", "/plain")), policy=lab.policy()
    )
    assert result.status == code
    assert len(result.hops) == 1
    assert [a.local for a in lab.accepts()] == [V4]
    assert lab.dns.lookups("b.lab.example") == 0


def test_304_without_location_is_not_followed(lab):
    lab.dns.set("r.lab.example", a=[V4])
    try:
        result = fetch(lab.url("r.lab.example", "/redirect/304"), policy=lab.policy())
    except WebFetchError as exc:  # no content type: refusing it is fine too
        assert isinstance(exc, UnsupportedMediaType)
    else:
        assert result.status == 304 and result.body == b""
    assert [a.local for a in lab.accepts()] == [V4]


@pytest.mark.parametrize(
    "location, final_path",
    [
        (None, "/plain?from=relative"),
        ("/plain", "/plain"),
        ("../../plain", "/plain"),
        ("./plain?x=1#frag", "/plain?x=1"),
    ],
)
def test_relative_location(lab, location, final_path):
    lab.dns.set("rel.lab.example", a=[V4])
    path = "/redirect-relative" + (f"?to={quote(location, safe='')}" if location else "")
    result = fetch(lab.url("rel.lab.example", path), policy=lab.policy())
    assert result.final_url == lab.url("rel.lab.example", final_path)
    assert [r.path for r in lab.requests][-1] == final_path


def test_long_location_is_followed_exactly_or_refused(lab):
    lab.dns.set("rel.lab.example", a=[V4])
    target = "/plain?" + "a" * 3000
    try:
        result = fetch(
            lab.url("rel.lab.example", f"/redirect-relative?to={quote(target, safe='')}"),
            policy=lab.policy(),
        )
    except WebFetchError:
        return  # refusing an overlong Location is fine
    assert result.final_url == lab.url("rel.lab.example", target)
    assert lab.requests[-1].path == target


def test_scheme_relative_location_goes_through_the_guard(lab):
    lab.dns.set("rel.lab.example", a=[V4])
    lab.dns.set("b.lab.example", a=[V4_B])
    result = fetch(
        lab.url("rel.lab.example", "/redirect-relative?to=//b.lab.example/plain"),
        policy=lab.policy(),
    )
    assert result.final_url == "http://b.lab.example/plain"
    assert result.hops[-1].address == V4_B


def test_chain_of_three_is_followed(lab):
    lab.dns.set("c.lab.example", a=[V4])
    result = fetch(lab.url("c.lab.example", "/chain/3"), policy=lab.policy())
    assert result.status == 200
    assert [r.path for r in lab.requests] == ["/chain/3", "/chain/2", "/chain/1", "/chain/0"]
    # A fresh, re-checked connection per hop.
    assert len(lab.accepts()) == 4
    assert lab.dns.lookups("c.lab.example") == 4


def test_fourth_redirect_is_too_many(lab):
    lab.dns.set("c.lab.example", a=[V4])
    with pytest.raises(TooManyRedirects):
        fetch(lab.url("c.lab.example", "/chain/4"), policy=lab.policy())
    assert [r.path for r in lab.requests] == ["/chain/4", "/chain/3", "/chain/2", "/chain/1"]


def test_lower_redirect_limit(lab):
    lab.dns.set("c.lab.example", a=[V4])
    with pytest.raises(TooManyRedirects):
        fetch(lab.url("c.lab.example", "/chain/1"), policy=lab.policy(max_redirects=0))
    assert len(lab.requests) == 1


def test_chain_across_hosts_and_schemes(lab):
    lab.dns.set("c.lab.example", a=[V4])
    lab.dns.set("end.lab.example", aaaa=[V6_B])
    final = lab.url("end.lab.example", "/plain", "https")
    result = fetch(
        lab.url("c.lab.example", f"/chain/2?final={quote(final, safe='')}"), policy=lab.policy()
    )
    assert result.final_url == final
    assert [(a.local, a.port) for a in lab.accepts()] == [(V4, 80), (V4, 80), (V6_B, 443)]
    assert lab.requests[-1].sni == "end.lab.example"


REFUSED_TARGETS = [
    # (location, DNS setup, accepted reasons)
    ("http://10.0.0.10/", None, {"address_class:private"}),
    ("http://192.168.1.10/", None, {"address_class:private"}),
    ("http://100.64.0.10/", None, {"address_class:shared"}),
    ("http://169.254.169.254/latest/meta-data/", None, {"address_class:metadata"}),
    ("http://127.0.0.1/", None, {"address_class:loopback"}),
    ("http://[::1]/", None, {"address_class:loopback"}),
    ("http://[fd00::10]/", None, {"address_class:ula"}),
    ("http://[::ffff:10.0.0.10]/", None, None),
    ("http://internal.lab.example/", {"a": ["192.168.1.10"]}, {"address_class:private"}),
    ("http://meta.lab.example/", {"a": ["169.254.169.254"]}, {"address_class:metadata"}),
    ("http://ula.lab.example/", {"aaaa": ["fd00::10"]}, {"address_class:ula"}),
    ("http://gone.lab.example/", {"nxdomain": True}, {"unresolvable"}),
    ("http://2130706433/", None, {"legacy_numeric_host"}),
    ("http://0x7f.1/", None, {"legacy_numeric_host"}),
    ("file:///etc/passwd", None, {"scheme"}),
    ("gopher://b.lab.example:70/_GET", None, {"scheme"}),
    ("ftp://b.lab.example/", None, {"scheme"}),
    ("javascript:alert(1)", None, {"scheme", "invalid_url"}),
    ("http://user@b.lab.example/", {"a": [V4_B]}, {"userinfo"}),
    ("http://b.lab.example:8080/", {"a": [V4_B]}, {"port"}),
]


@pytest.mark.parametrize(
    "location, dns_entry, reasons", REFUSED_TARGETS, ids=[t[0] for t in REFUSED_TARGETS]
)
def test_redirect_to_a_refused_target(lab, location, dns_entry, reasons):
    lab.dns.set("r.lab.example", a=[V4])
    if dns_entry is not None:
        host = location.split("/")[2].split("@")[-1].split(":")[0]
        lab.dns.sequence(host, [dns_entry])
    with pytest.raises(EgressDenied) as info:
        fetch(_redirect_url(lab, 302, location), policy=lab.policy())
    exc = info.value
    if reasons is None:
        assert exc.reason.startswith("address_class:")
    else:
        assert exc.reason in reasons
    assert exc.hop == 1
    assert location not in str(exc)  # no server-chosen text in the message
    assert _tcp(lab) == [(V4, 80)]
    _assert_public_only(lab)


POLICY_LIST_CASES = [
    # (policy overrides, redirect target host, expected reason or None when followed)
    ({"own_site_hosts": ("own.lab.example",)}, "own.lab.example", "own_site"),
    ({"denylist": ("b.lab.example",)}, "b.lab.example", "denylist"),
    ({"denylist": (V4_B,)}, "b.lab.example", "denylist"),
    ({"denylist": ("*.deny.lab.example",)}, "x.deny.lab.example", "denylist"),
    ({"allowlist": ("r.lab.example",)}, "b.lab.example", "not_allowlisted"),
    ({"allowlist": ("*.lab.example",)}, "b.lab.example", None),
    ({"allowlist": ("r.lab.example", V4_B)}, "b.lab.example", None),
    ({"allowlist": ("*",)}, "b.lab.example", "invalid_list"),
]


@pytest.mark.parametrize(
    "overrides, host, reason", POLICY_LIST_CASES, ids=[f"{o}->{h}" for o, h, _ in POLICY_LIST_CASES]
)
def test_policy_lists_apply_to_every_hop(lab, overrides, host, reason):
    lab.dns.set("r.lab.example", a=[V4])
    lab.dns.set(host, a=[V4_B])
    url = _redirect_url(lab, 302, f"http://{host}/plain")
    if reason == "invalid_list":  # an invalid list refuses everything, the first hop too
        with pytest.raises(EgressDenied) as info:
            fetch(url, policy=lab.policy(**overrides))
        assert info.value.reason == reason
        assert _tcp(lab) == []
        return
    if reason is None:
        result = fetch(url, policy=lab.policy(**overrides))
        assert result.hops[-1].address == V4_B
        return
    with pytest.raises(EgressDenied) as info:
        fetch(url, policy=lab.policy(**overrides))
    assert (info.value.reason, info.value.hop) == (reason, 1)
    assert _tcp(lab) == [(V4, 80)]


@pytest.mark.parametrize(
    "target",
    [
        "file:///etc/passwd",
        "gopher://b.lab.example/",
        "ftp://b.lab.example/",
        "javascript:alert(1)",
    ],
)
def test_redirect_scheme_scenario(lab, target):
    lab.dns.set("r.lab.example", a=[V4])
    with pytest.raises(EgressDenied) as info:
        fetch(
            lab.url("r.lab.example", f"/redirect-scheme?to={quote(target, safe='')}"),
            policy=lab.policy(),
        )
    assert info.value.reason in {"scheme", "invalid_url"}
    assert len(lab.accepts()) == 1


# -- bounds -------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/slow", "/slow-headers"])
def test_slow_loris_hits_the_total_budget(lab, path):
    lab.dns.set("slow.lab.example", a=[V4])
    started = time.monotonic()
    with pytest.raises(FetchTimeout):
        fetch(lab.url("slow.lab.example", path), policy=lab.policy(total_timeout=3))
    assert time.monotonic() - started < _OTHER_BOUND / 2


def test_endless_body_stops_at_the_cap(lab):
    lab.dns.set("big.lab.example", a=[V4])
    started = time.monotonic()
    with pytest.raises(ResponseTooLarge):
        fetch(lab.url("big.lab.example", "/endless"), policy=lab.policy())
    # The cap ended it, not a timeout: far sooner than the other bound (a busy machine
    # only slows the read; the bytes below are the proof).
    assert time.monotonic() - started < _OTHER_BOUND / 2
    lab.wait_requests_done()
    (record,) = lab.requests
    assert record.aborted
    assert record.bytes_sent < 32 * MIB  # the cap plus socket buffers, not 256 MiB


def test_huge_content_length_is_not_read(lab):
    lab.dns.set("big.lab.example", a=[V4])
    with pytest.raises(ResponseTooLarge):
        fetch(lab.url("big.lab.example", "/huge-length"), policy=lab.policy())
    lab.wait_requests_done()
    (record,) = lab.requests
    assert record.aborted
    assert record.bytes_sent < 32 * MIB


@pytest.mark.parametrize("cap", [None, 1000])
def test_body_cap_boundary(lab, cap):
    lab.dns.set("cap.lab.example", a=[V4])
    limit = cap or 2 * MIB
    policy = lab.policy(max_body_bytes=cap) if cap else lab.policy()
    path = "/page2m" if cap is None else f"/bytes/{limit}"
    assert len(fetch(lab.url("cap.lab.example", path), policy=policy).body) == limit
    with pytest.raises(ResponseTooLarge):
        fetch(lab.url("cap.lab.example", f"/bytes/{limit + 1}"), policy=policy)


@pytest.mark.parametrize("path", ["/gzip-bomb", "/deflate-bomb"])
def test_compression_bomb_stops_at_the_cap_in_bounded_memory(lab, path):
    lab.dns.set("bomb.lab.example", a=[V4])
    content.gzip_bomb(), content.deflate_bomb()  # built before measuring
    url = lab.url("bomb.lab.example", path)
    policy = lab.policy()
    tracemalloc.start()
    try:
        with pytest.raises(ResponseTooLarge):
            fetch(url, policy=policy)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB"


def test_brotli_is_refused(lab):
    lab.dns.set("br.lab.example", a=[V4])
    with pytest.raises(UnsupportedContentEncoding):
        fetch(lab.url("br.lab.example", "/br"), policy=lab.policy())


def test_wrong_type_is_refused_at_the_headers(lab):
    lab.dns.set("t.lab.example", a=[V4])
    with pytest.raises(UnsupportedMediaType) as info:
        fetch(lab.url("t.lab.example", "/wrong-type"), policy=lab.policy())
    assert info.value.media_type == "application/octet-stream"
    lab.wait_requests_done()
    (record,) = lab.requests
    assert record.aborted  # the client hung up instead of reading 64 MiB
    assert record.bytes_sent < 32 * MIB


@pytest.mark.parametrize("path, media_type", [("/json", "application/json"), ("/no-type", "")])
def test_other_media_types(lab, path, media_type):
    lab.dns.set("t.lab.example", a=[V4])
    with pytest.raises(UnsupportedMediaType) as info:
        fetch(lab.url("t.lab.example", path), policy=lab.policy())
    assert info.value.media_type == media_type
    if media_type:
        result = fetch(lab.url("t.lab.example", path), policy=lab.policy(media_types=(media_type,)))
        assert result.body == b'{"lab": true}\n'


# -- DNS ----------------------------------------------------------------------------------
def test_rebinding_connects_only_to_the_checked_address(lab):
    lab.dns.sequence("rebind.lab.example", [{"a": [V4]}, {"a": ["10.0.0.10"]}])
    result = fetch(lab.url("rebind.lab.example", "/plain"), policy=lab.policy())
    assert result.hops[0].address == V4
    assert lab.dns.lookups("rebind.lab.example", "A") == 1  # one lookup for the hop
    assert [a.local for a in lab.accepts()] == [V4]
    _assert_public_only(lab)


def test_rebinding_between_hops_is_caught_by_the_next_check(lab):
    lab.dns.sequence("rebind.lab.example", [{"a": [V4]}, {"a": ["10.0.0.10"]}])
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url("rebind.lab.example", "/redirect/302?to=/plain"), policy=lab.policy())
    assert info.value.reason == "address_class:private"
    assert info.value.hop == 1
    assert lab.dns.lookups("rebind.lab.example", "A") == 2  # exactly one per hop
    assert [a.local for a in lab.accepts()] == [V4]
    _assert_public_only(lab)


def test_rebinding_v6(lab):
    lab.dns.sequence("rebind6.lab.example", [{"aaaa": [V6]}, {"aaaa": ["fd00::10"]}])
    result = fetch(lab.url("rebind6.lab.example", "/plain", "https"), policy=lab.policy())
    assert result.hops[0].address == V6
    assert [a.local for a in lab.accepts()] == [V6]
    _assert_public_only(lab)


@pytest.mark.parametrize(
    "records",
    [
        {"a": [V4, "10.0.0.10"]},
        {"a": [V4], "aaaa": ["fd00::10"]},
        {"a": ["127.0.0.1"], "aaaa": [V6]},
        {"a": [V4, "169.254.169.254"]},
    ],
    ids=["v4+private", "v4+ula", "loopback+v6", "v4+metadata"],
)
def test_mixed_answer_is_refused(lab, records):
    lab.dns.set("mixed.lab.example", **records)
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url("mixed.lab.example", "/plain"), policy=lab.policy())
    assert info.value.reason in {"mixed_answer", "address_class:metadata"}
    assert _tcp(lab) == []


NON_PUBLIC_ANSWERS = [
    "0.0.0.0",
    "0.1.2.3",
    "127.0.0.2",
    "10.255.255.255",
    "172.16.0.1",
    "192.168.1.10",
    "100.64.0.10",
    "169.254.1.1",
    "169.254.169.254",
    "100.100.100.200",
    "168.63.129.16",
    "192.0.0.8",
    "192.0.2.1",
    "198.18.0.1",
    "198.51.100.7",
    "203.0.113.9",
    "224.0.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "::",
    "::1",
    "::ffff:11.0.0.10",
    "::11.0.0.10",
    "64:ff9b::b00:a",
    "64:ff9b:1::b00:a",
    "2002:b00:a::1",
    "2001::1",
    "2001:10::1",
    "2001:db8::1",
    "3fff::1",
    "100::1",
    "fc00::1",
    "fd00::10",
    "fd00:ec2::254",
    "fe80::1",
    "fec0::1",
    "ff02::1",
]


@pytest.mark.parametrize("address", NON_PUBLIC_ANSWERS)
def test_non_public_dns_answer_is_refused(lab, address):
    lab.dns.set("np.lab.example", **({"aaaa": [address]} if ":" in address else {"a": [address]}))
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url("np.lab.example", "/plain"), policy=lab.policy())
    assert info.value.reason.startswith("address_class:")
    assert info.value.reason != "address_class:public"
    assert _tcp(lab) == []


@pytest.mark.parametrize("name", ["localhost", "LOCALHOST.", "api.localhost", "a.b.localhost"])
def test_localhost_names_are_loopback_and_never_asked(lab, name):
    # RFC 6761 §6.3: a fixed answer. A DNS server that answers otherwise is never asked, so
    # it cannot turn ``localhost`` into a public (or any other) address.
    lab.dns.set(name, a=[V4])
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url(name, "/plain"), policy=lab.policy())
    assert info.value.reason == "address_class:loopback"
    assert lab.dns.lookups(name) == 0 and lab.dns.lookups(name, "AAAA") == 0
    assert _tcp(lab) == []
    assert lab.accepts() == []
    _assert_no_system_lookup(lab)


@pytest.mark.parametrize("name", ["etc-hosts-only.example", "hosts-only.lab.example"])
def test_names_only_in_etc_hosts_are_unresolvable(lab, name):
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url(name, "/plain"), policy=lab.policy())
    assert info.value.reason in {"unresolvable", "own_site"}
    assert _tcp(lab) == []
    assert lab.accepts() == []
    _assert_no_system_lookup(lab)
    if info.value.reason == "unresolvable":
        assert lab.dns.lookups(name) == 1  # asked the DNS server, not the hosts file


@pytest.mark.parametrize("setup", ["nxdomain", "nodata", "unknown", "empty"])
def test_no_address_is_unresolvable(lab, setup):
    name = "none.lab.example"
    if setup == "nxdomain":
        lab.dns.nxdomain(name)
    elif setup == "nodata":
        lab.dns.nodata(name)
    elif setup == "empty":
        lab.dns.set(name)
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url(name, "/plain"), policy=lab.policy())
    assert info.value.reason == "unresolvable"
    assert _tcp(lab) == []


def test_servfail_is_a_resolution_error(lab):
    lab.dns.servfail("sf.lab.example")
    with pytest.raises((ResolutionError, EgressDenied)) as info:
        fetch(lab.url("sf.lab.example", "/plain"), policy=lab.policy())
    if isinstance(info.value, EgressDenied):
        assert info.value.reason == "unresolvable"
    assert _tcp(lab) == []


def test_dropped_query_runs_into_the_budget(lab):
    lab.dns.drop("drop.lab.example")
    started = time.monotonic()
    with pytest.raises((ResolutionError, FetchTimeout)):
        fetch(lab.url("drop.lab.example", "/plain"), policy=lab.policy(total_timeout=2))
    # The budget ended the wait for an answer that never comes: far sooner than the
    # other bound, whatever the machine's load.
    assert time.monotonic() - started < _OTHER_BOUND / 2
    assert _tcp(lab) == []


@pytest.mark.parametrize(
    "target, entry, outcome",
    [
        ("end.lab.example", {"a": [V4_C]}, "ok"),
        ("end.lab.example", {"a": ["192.168.1.10"]}, "address_class:private"),
        ("end.lab.example", {"nxdomain": True}, "unresolvable"),
    ],
)
def test_cname_chain(lab, target, entry, outcome):
    lab.dns.cname("alias.lab.example", "mid.lab.example")
    lab.dns.cname("mid.lab.example", target)
    lab.dns.sequence(target, [entry])
    url = lab.url("alias.lab.example", "/echo")
    if outcome == "ok":
        result = fetch(url, policy=lab.policy())
        assert "host: alias.lab.example" in result.body.decode()
        assert [a.local for a in lab.accepts()] == [V4_C]
    else:
        with pytest.raises(EgressDenied) as info:
            fetch(url, policy=lab.policy())
        assert info.value.reason == outcome
        assert _tcp(lab) == []


# -- refused before any packet ------------------------------------------------------------
NUMERIC_AND_PRIVATE = [
    # legacy numeric forms, some of them of a *public* lab address
    ("http://2130706433/", "legacy_numeric_host"),
    ("http://184549386/", "legacy_numeric_host"),  # 11.0.0.10
    ("http://0x0b00000a/", "legacy_numeric_host"),
    ("http://0177.0.0.1/", "legacy_numeric_host"),
    ("http://011.0.0.012/", "legacy_numeric_host"),
    ("http://0x7f.1/", "legacy_numeric_host"),
    ("http://127.1/", "legacy_numeric_host"),
    ("http://11.10/", "legacy_numeric_host"),
    ("http://11.0.10/", "legacy_numeric_host"),
    ("http://0xb.0.0.0xa/", "legacy_numeric_host"),
    ("http://4294967296/", "legacy_numeric_host"),
    # private, loopback, metadata and other non-public literals
    ("http://127.0.0.1/", "address_class:loopback"),
    ("http://[::1]/", "address_class:loopback"),
    ("http://10.0.0.10/", "address_class:private"),
    ("http://192.168.1.10/", "address_class:private"),
    ("http://100.64.0.10/", "address_class:shared"),
    ("http://169.254.169.254/", "address_class:metadata"),
    ("http://[fd00::10]/", "address_class:ula"),
    ("http://0.0.0.0/", None),
    ("http://[::]/", None),
    ("http://[::ffff:127.0.0.1]/", None),
    ("http://[::ffff:7f00:1]/", None),
    ("http://[::ffff:11.0.0.10]/", None),
    ("http://[64:ff9b::a00:a]/", None),
    ("http://[2002:a00:a::]/", None),
    ("http://[fe80::1%25lo]/", None),
    # URL confusion
    ("http://11.0.0.10@10.0.0.10/", "userinfo"),
    ("http://@11.0.0.10/", "userinfo"),
    ("http://11.0.0.10\\@10.0.0.10/", None),
    ("http://10.0.0.10#@11.0.0.10/", None),
    ("http://%31%30.0.0.10/", None),
    ("http://１０.0.0.10/", None),
]


@pytest.mark.parametrize(
    "url, reason", NUMERIC_AND_PRIVATE, ids=[u for u, _ in NUMERIC_AND_PRIVATE]
)
def test_refused_with_zero_connects(lab, url, reason):
    with pytest.raises(EgressDenied) as info:
        fetch(url, policy=lab.policy())
    if reason is not None:
        assert info.value.reason == reason
    assert lab.connects == []  # not even a DNS packet
    assert lab.accepts() == []


# -- explain and the guard ----------------------------------------------------------------
def test_explain_resolves_but_never_connects(lab):
    lab.dns.set("ex.lab.example", a=[V4], aaaa=[V6])
    decision = explain(lab.url("ex.lab.example", "/page"), policy=lab.policy())
    assert decision.allowed and decision.destination is not None
    assert {str(a) for a in decision.destination.addresses} == {V4, V6}
    assert _tcp(lab) == []
    assert lab.accepts() == []


def test_explain_refusal(lab):
    decision = explain("http://0x7f.1/", policy=lab.policy())
    assert not decision.allowed
    assert decision.reason == "legacy_numeric_host"
    assert lab.connects == []


def test_guard_check_returns_the_pin(lab):
    lab.dns.set("g.lab.example", a=[V4, V4_B], aaaa=[V6])
    destination = UrlGuard().check(lab.url("g.lab.example", "/x", "https"), lab.policy())
    assert (destination.host, destination.port) == ("g.lab.example", 443)
    assert [str(a) for a in destination.addresses] == [V4, V4_B, V6]
    assert _tcp(lab) == []


# -- property: whatever the URL, only public addresses are ever contacted -----------------
_NAMES = {
    "pub.lab.example": {"a": [V4]},
    "pub6.lab.example": {"aaaa": [V6]},
    "priv.lab.example": {"a": ["10.0.0.10"]},
    "meta.lab.example": {"a": ["169.254.169.254"]},
    "mixed.lab.example": {"a": [V4, "192.168.1.10"]},
    "loop.lab.example": {"a": ["127.0.0.1"], "aaaa": ["::1"]},
    "ula.lab.example": {"aaaa": ["fd00::10"]},
}
_NAME_HOSTS = st.sampled_from(
    [
        *_NAMES,
        "nx.lab.example",
        "etc-hosts-only.example",
        "hosts-only.lab.example",
        "localhost",
        "PUB.LAB.EXAMPLE",
        "pub.lab.example.",
    ]
)
_LITERAL_HOSTS = st.sampled_from(
    [
        V4,
        V4_B,
        f"[{V6}]",
        "10.0.0.10",
        "127.0.0.1",
        "169.254.169.254",
        "100.64.0.10",
        "[fd00::10]",
        "[::1]",
        "[::ffff:10.0.0.10]",
        "0.0.0.0",
        "2130706433",
        "0x7f.1",
        "127.1",
        "0177.0.0.1",
        "184549386",
        "0x0b00000a",
        "11.0.0.010",
        "[::ffff:11.0.0.10]",
        "[64:ff9b::a00:a]",
        "[::ffff:7f00:1]",
        "[2002:a00:a::]",
    ]
)
_HOSTS = st.one_of(
    _NAME_HOSTS,
    _LITERAL_HOSTS,
    _NAME_HOSTS,
    _LITERAL_HOSTS,
    st.from_regex(r"\A[a-z0-9.\-\[\]:%@]{0,24}\Z"),
)
_SIMPLE_PATHS = st.sampled_from(
    [
        "/plain",
        "/status/200",
        "/echo",
        "/redirect/302?to=/plain",
        "/chain/2",
        "/json",
        "/br",
        "/",
        "",
    ]
)
_REDIRECTS = st.builds(
    lambda code, host: f"/redirect/{code}?to={quote('http://' + host + '/plain')}",
    st.sampled_from(FOLLOWED),
    st.sampled_from([*_NAMES, "10.0.0.10", "127.1", "[::1]", "169.254.169.254"]),
)
_PATHS = st.one_of(
    _SIMPLE_PATHS,
    _REDIRECTS,
    _SIMPLE_PATHS,
    _REDIRECTS,
    st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), max_size=12),
    st.text(max_size=6),
)
_STRUCTURED = st.builds(
    lambda scheme, userinfo, host, port, path: f"{scheme}{userinfo}{host}{port}{path}",
    st.sampled_from(
        ["http://"] * 4
        + ["https://"] * 3
        + ["HTTP://", "file://", "gopher://", "//", "http:/", "http:\\\\"]
    ),
    st.sampled_from([""] * 8 + ["user@", "@", "a:b@", "11.0.0.10@"]),
    _HOSTS,
    st.sampled_from([""] * 8 + [":80", ":443", ":8080", ":0", ":65536", ":x"]),
    _PATHS,
)
_URLS = st.one_of(_STRUCTURED, _STRUCTURED, _STRUCTURED, st.text(max_size=40))


_WELL_FORMED = st.builds(
    lambda scheme, host, path: f"{scheme}://{host}{path}",
    st.sampled_from(["http", "https"]),
    st.one_of(_NAME_HOSTS, _LITERAL_HOSTS),
    st.one_of(_SIMPLE_PATHS, _REDIRECTS),
)
_PROPERTY_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _check_only_public_contacted(lab, url: str) -> None:
    lab.reset()
    for name, entry in _NAMES.items():
        lab.dns.sequence(name, [entry])
    try:
        result = fetch(url, policy=lab.policy(total_timeout=3))
    except EgressDenied as exc:
        event(f"denied: {exc.reason}")
    except WebFetchError as exc:
        event(f"failed: {type(exc).__name__}")
    else:
        event(f"fetched: {result.status}")
    if _tcp(lab):
        event("connected")
    for c in lab.connects:
        if c.address in (lab.DNS_V4, lab.DNS_V6) and c.port == 53:
            continue
        assert classify(c.address) == "public", (url, c)
    assert not lab.private_accepts(), url
    _assert_no_system_lookup(lab)


@pytest.mark.unmeasured("a property: the table tests of this module cover these lines")
@_PROPERTY_SETTINGS
@given(url=_URLS)
def test_property_arbitrary_urls_contact_only_public_addresses(lab, url):
    _check_only_public_contacted(lab, url)


@pytest.mark.unmeasured("a property: the table tests of this module cover these lines")
@_PROPERTY_SETTINGS
@given(url=_WELL_FORMED)
def test_property_well_formed_urls_contact_only_public_addresses(lab, url):
    _check_only_public_contacted(lab, url)


def _decision(call) -> object:
    """The guard's verdict, comparable across drivers: the checked destination, or the
    refusal's reason, or the failure's code."""
    try:
        destination = call()
    except EgressDenied as exc:
        return ("denied", exc.reason, exc.hop)
    except WebFetchError as exc:
        return ("failed", exc.code, exc.failure)
    return ("allowed", destination.url.geturl(), destination.addresses, destination.categories)


@pytest.mark.unmeasured("a property: the table tests of net/ cover these lines")
@_PROPERTY_SETTINGS
@given(url=st.one_of(_URLS, _WELL_FORMED))
def test_property_the_async_guard_decides_as_the_sync_guard(lab, url):
    """``UrlGuard.check_async`` is the same rules as ``check`` (one generator, two drivers,
    ``net.steps``): arbitrary URLs, the lab's real DNS, the same verdict either way."""
    import asyncio

    from django_webfetch.net import UrlGuard

    for name, entry in _NAMES.items():
        lab.dns.sequence(name, [entry])
    guard, policy = UrlGuard(), lab.policy(total_timeout=3)
    blocking = _decision(lambda: guard.check(url, policy, hop=1))
    awaited = _decision(lambda: asyncio.run(guard.check_async(url, policy, hop=1)))
    event(f"{blocking[0]}: {blocking[1] if blocking[0] != 'allowed' else ''}")
    assert awaited == blocking, url
