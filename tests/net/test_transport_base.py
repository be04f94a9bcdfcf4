"""The transport base (``net.base``) and the one foreign-error table (``net.foreign``).

The table is exercised with the real exception classes of every library it names; the hop
lifecycle with a real ``PinnedTransport`` that is never sent on (no network is touched).
"""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from ipaddress import ip_address

import dns.exception
import h11
import httpcore
import httpx
import pytest

from django_webfetch.net import (
    FOREIGN_ERRORS,
    EgressPolicy,
    EgressTransport,
    FetchError,
    FetchTimeout,
    InvalidURL,
    PinnedTransport,
    ResolutionError,
    TooManyRedirects,
    WebFetchError,
    foreign_errors,
)
from django_webfetch.net.__main__ import main
from django_webfetch.net.base import PinnedHop
from django_webfetch.net.foreign import translate
from django_webfetch.net.guard import ResolvedDestination
from django_webfetch.net.rawurl import same_origin, syntax_verdict
from django_webfetch.net.urlparse import DEFAULT_PORTS, parse_url

_REQUEST = httpx.Request("GET", "http://pin.example/")

#: (a foreign exception, the project's class it must become, its failure sub-code)
CASES = [
    (httpx.ReadTimeout("slow", request=_REQUEST), FetchTimeout, "read_timeout"),
    (httpcore.ConnectTimeout("slow"), FetchTimeout, "connect_timeout"),
    (TimeoutError("slow"), FetchTimeout, "fetch_failed"),
    (httpx.TooManyRedirects("loop", request=_REQUEST), TooManyRedirects, ""),
    (httpx.InvalidURL("bad"), InvalidURL, ""),
    (httpx.UnsupportedProtocol("ftp"), InvalidURL, ""),
    (httpcore.UnsupportedProtocol("ftp"), InvalidURL, ""),
    (httpx.RemoteProtocolError("illegal header", request=_REQUEST), FetchError, "protocol_error"),
    (httpx.StreamConsumed(), FetchError, "fetch_failed"),
    (httpcore.RemoteProtocolError("peer closed"), FetchError, "connection_closed"),
    (httpcore.ReadError("reset"), FetchError, "connection_reset"),
    (h11.RemoteProtocolError("garbage", 400), FetchError, "protocol_error"),
    (h11.LocalProtocolError("bad header"), FetchError, "protocol_error"),
    (ssl.SSLCertVerificationError("bad cert"), FetchError, "tls_certificate"),
    (ConnectionRefusedError(111, "refused"), FetchError, "connect_refused"),
    (UnicodeEncodeError("ascii", "\u00e9", 0, 1, "not ascii"), FetchError, "protocol_error"),
    (dns.exception.Timeout(), ResolutionError, "dns_timeout"),
    (dns.exception.SyntaxError("bad name"), ResolutionError, "dns_failure"),
]


@pytest.mark.parametrize(
    ("foreign", "kind", "failure"), CASES, ids=[type(case[0]).__name__ for case in CASES]
)
def test_every_foreign_error_becomes_the_projects(foreign, kind, failure):
    with pytest.raises(WebFetchError) as caught, foreign_errors():
        raise foreign
    assert type(caught.value) is kind
    assert caught.value.failure == failure
    assert caught.value.__cause__ is foreign
    # The server's or library's text never reaches the message.
    assert "\u00e9" not in str(caught.value) and "garbage" not in str(caught.value)


def test_the_table_names_every_library_and_ours_pass_through():
    named = {kind.__module__.split(".")[0] for kinds, _ in FOREIGN_ERRORS for kind in kinds}
    assert {"httpx", "httpcore", "h11", "ssl", "dns", "builtins"} <= named
    ours = FetchError("ours")
    assert translate(ours) is ours
    with pytest.raises(FetchError) as caught, foreign_errors():
        raise ours
    assert caught.value is ours


def test_a_programming_error_is_not_renamed():
    assert translate(KeyError("bug")) is None
    with pytest.raises(KeyError), foreign_errors():
        raise KeyError("bug")


def test_the_scheme_rule_has_one_home():
    assert dict(DEFAULT_PORTS) == {"http": 80, "https": 443}
    with pytest.raises(TypeError):
        DEFAULT_PORTS["ftp"] = 21  # type: ignore[index]


def _hop(events: list) -> PinnedHop:
    destination = ResolvedDestination(
        url=parse_url("http://pin.example/"), addresses=(ip_address("11.0.0.10"),)
    )
    return PinnedHop(
        EgressTransport(),
        destination,
        EgressPolicy(),
        time.monotonic() + 5,
        0,
        time.monotonic(),
        events.append,
    )


def test_a_hop_is_recorded_allowed_then_closed_once():
    events: list = []
    hop = _hop(events)
    assert isinstance(hop.connection, PinnedTransport)
    assert hop.address is None
    hop.fetched(status=200, size=3)
    with pytest.raises(RuntimeError):
        hop.failed(FetchError())
    hop.close()
    hop.close()
    assert [(e.decision, e.reason) for e in events] == [("allowed", "allowed"), ("fetched", "ok")]
    assert events[1].addresses == ("11.0.0.10",)


def test_a_hop_closed_unfinished_is_recorded_failed():
    events: list = []
    _hop(events).close()
    assert [e.decision for e in events] == ["allowed", "failed"]
    assert events[1].reason == "fetch_error"


def test_a_foreign_exception_leaving_a_hop_is_recorded_with_its_mapped_code():
    events: list = []
    with pytest.raises(httpx.ReadTimeout), _hop(events):
        raise httpx.ReadTimeout("slow", request=_REQUEST)
    assert events[-1].decision == "failed" and events[-1].reason == "timeout"
    assert events[-1].failure == "read_timeout"


def test_an_unmapped_exception_leaving_a_hop_is_still_recorded():
    events: list = []
    with pytest.raises(KeyError), _hop(events):
        raise KeyError("bug")
    assert [e.decision for e in events] == ["allowed", "failed"]
    assert events[-1].detail == "KeyError"


def test_a_hop_finished_inside_the_block_is_not_recorded_twice():
    events: list = []
    with pytest.raises(KeyError), _hop(events) as hop:
        hop.failed(FetchError(), status=502)
        raise KeyError("after")
    assert [e.decision for e in events] == ["allowed", "failed"]


def test_cli_refuses_an_unbuildable_policy(capsys):
    assert main(["explain", "--nameserver", "not-an-ip", "http://pin.example/"]) == 2
    assert capsys.readouterr().err.startswith("usage:")


@dataclass
class _SentURL:
    scheme: str
    raw_host: bytes
    port: int | None


def test_same_origin_compares_what_httpx_built_with_the_checked_origin():
    assert same_origin(_SentURL("http", b"Pin.Example.", None), "http", "pin.example", 80)
    assert same_origin(
        _SentURL("http", b"2606:4700:10:0::10", 80), "http", "[2606:4700:10::10]", 80
    )
    assert not same_origin(_SentURL("https", b"pin.example", None), "http", "pin.example", 80)
    assert not same_origin(_SentURL("http", b"pin.example", 8080), "http", "pin.example", 80)
    assert not same_origin(_SentURL("http", "b\u00fccher".encode(), None), "http", "bucher", 80)


def test_syntax_verdict_is_the_guards_on_the_callers_string():
    assert syntax_verdict("http://pin.example:\uff18\uff10/").reason == "port"
    assert syntax_verdict("http://b\u00fccher.example/").reason == "idn"
    assert syntax_verdict("file:///etc/passwd").reason == "scheme"
    # A string the guard can parse but the client library could not: still refused.
    assert syntax_verdict("http://pin.example/").reason == "invalid_url"
    assert syntax_verdict(b"http://pin.example/").reason == "invalid_url"
