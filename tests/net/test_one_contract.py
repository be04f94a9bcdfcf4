"""One egress contract on every path, end to end in the lab.

The same URL strings (``egress_corpus``) go through ``net.fetch`` and through every other
way out that ``net/`` hands out: the guarded httpx clients (sync and async, following
redirects or not) and the httpx2 bridge used by the LLM SDKs.  Every path must give the
verdict ``net.fetch`` gives (the same reason code, or the same success), and a URL
``net.fetch`` refuses must reach no lab server on any path.  The plugin client runs the
same corpus in ``tests/plugins/test_one_contract.py``.

Then the error contract: a duplicate ``Location``, an unparseable ``Location`` and a
non-ASCII header value map into the project's error tree on every path, the audit record
is closed and the pinned connection released.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_webfetch.net import (
    fetch,
    guarded_async_client,
    guarded_client,
    guarded_httpx2_client,
)
from django_webfetch.net.base import PinnedHop
from django_webfetch.net.rawurl import RAW_URL

from .egress_corpus import corpus, port_spellings, verdict

pytestmark = pytest.mark.lab

HOST = "corpus.lab.example"
V4 = "11.0.0.10"
V6 = "2606:4700:10::10"
CORPUS = corpus(HOST, V4, V6)


def _dns(lab) -> None:
    lab.dns.set(HOST, a=[V4], aaaa=[V6])
    lab.dns.set("xn--bcher-kva.lab.example", a=[V4])
    lab.dns.set("ungranted.lab.example", a=["11.0.0.12"])
    lab.dns.set("kelvin.lab.example", a=[V4])


def _async(coro_factory: Callable[[], object]) -> Callable[[], object]:
    return lambda: asyncio.run(coro_factory())  # type: ignore[arg-type]


def _paths(policy, events: list) -> dict[str, Callable[[str], Callable[[], object]]]:
    """Every way out of ``net/`` but ``net.fetch``: URL -> a call that sends it."""

    def sync(follow: bool) -> Callable[[str], Callable[[], object]]:
        def send(url: str) -> Callable[[], object]:
            def call() -> object:
                with guarded_client(policy, observer=events.append) as client:
                    return client.get(url, follow_redirects=follow).read()

            return call

        return send

    def asynchronous(follow: bool) -> Callable[[str], Callable[[], object]]:
        def send(url: str) -> Callable[[], object]:
            async def call() -> object:
                async with guarded_async_client(policy, observer=events.append) as client:
                    response = await client.get(url, follow_redirects=follow)
                    return await response.aread()

            return _async(call)

        return send

    def bridge(url: str) -> Callable[[], object]:
        async def call() -> object:
            inner = guarded_async_client(policy, observer=events.append)
            async with guarded_httpx2_client(inner, timeout=10) as client:
                response = await client.get(url)
                return await response.aread()

        return _async(call)

    return {
        "sync": sync(False),
        "sync_follow": sync(True),
        "async": asynchronous(False),
        "async_follow": asynchronous(True),
        "bridge": bridge,
    }


def _assert_closed(events: list) -> None:
    """Every hop's record was closed: each "allowed" is followed by fetched/failed."""
    open_hops = 0
    for event in events:
        if event.decision == "allowed":
            open_hops += 1
        elif event.decision in ("fetched", "failed") and open_hops:
            open_hops -= 1
    assert open_hops == 0, [(e.decision, e.reason) for e in events]


def _agree(lab, url: str) -> str:
    policy = lab.policy()
    expected = verdict(lambda: fetch(url, policy=policy, follow_redirects=False))
    before = len(lab.accepts())
    events: list = []
    got = {name: verdict(send(url)) for name, send in _paths(policy, events).items()}
    assert got == dict.fromkeys(got, expected), (url, expected, got)
    if expected not in ("ok", "fetch_error"):
        assert len(lab.accepts()) == before, (url, "a refused URL reached a server")
        assert all(e.decision != "fetched" for e in events), url
    if expected not in ("ok", "fetch_error", "timeout"):
        denied = {e.reason for e in events if e.decision == "denied"}
        assert denied == {expected}, (url, denied)
    _assert_closed(events)
    return expected


@pytest.mark.parametrize("url", CORPUS, ids=[ascii(u)[1:-1][:60] for u in CORPUS])
def test_every_path_gives_net_fetchs_verdict(lab, url):
    _dns(lab)
    _agree(lab, url)
    lab.check_no_private_traffic()


def test_the_corpus_covers_the_reported_spellings(lab):
    """The cases the review found, and both verdict kinds, are in the corpus."""
    _dns(lab)
    for url, reason in [
        (f"http://{V4}:\uff18\uff10/plain", "port"),
        (f"http://{V4}:8_0/plain", "port"),
        (f"http://{V4}:\u0668\u0660/plain", "port"),
        ("http://b\u00fccher.lab.example/plain", "idn"),
        (f"http://{HOST}/plain", "ok"),
    ]:
        assert url in CORPUS
        assert _agree(lab, url) == reason
    assert len(port_spellings(80)) > 60  # every decimal-digit script


_SCHEMES = st.sampled_from(["http", "HTTP", "hTtP", "https", "ftp", "http:", "htt\u0440"])
_HOSTS = st.sampled_from(
    [HOST, HOST.upper(), V4, f"[{V6}]", "b\u00fccher.lab.example", "corpus\u3002lab.example"]
)
_PORTS = st.sampled_from(["", ":", ":80", ":443", ":8_0", ":\uff18\uff10", ":\u0668\u0660"])
_PATHS = st.sampled_from(["/plain", "/plain?x=1", "\\plain", "/%2e%2e/plain", "#@x", "?@x"])
_USERINFO = st.sampled_from(["", "", "", "u@", "@", "u:p@"])


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    scheme=_SCHEMES,
    separator=st.sampled_from(["://", ":/", ":\\\\", "://"]),
    userinfo=_USERINFO,
    host=_HOSTS,
    port=_PORTS,
    path=_PATHS,
)
def test_composed_urls_get_one_verdict_on_every_path(
    lab, scheme, separator, userinfo, host, port, path
):
    _dns(lab)
    _agree(lab, f"{scheme}{separator}{userinfo}{host}{port}{path}")


# -- the error contract --------------------------------------------------------------------


def _open_hops() -> list[PinnedHop]:
    """Hops still alive whose record is open or whose connection is held."""
    return [o for o in gc.get_objects() if isinstance(o, PinnedHop) and not o.closed]


def _error_cases(lab) -> dict[str, tuple[str, str, bool]]:
    """name -> (URL, expected verdict, whether a redirect is followed to get it)."""
    base = f"http://{HOST}"
    first, second = quote(f"{base}/plain"), quote("http://ungranted.lab.example/plain")
    idn = quote("http://b\u00fccher.lab.example/plain")
    return {
        "duplicate_location": (f"{base}/locations", "invalid_url", True),
        "duplicate_absolute_location": (
            f"{base}/locations?to={first}&to={second}",
            "invalid_url",
            True,
        ),
        "unparseable_location": (
            f"{base}/redirect/302?to={quote('http://[::1')}",
            "host_syntax",
            False,
        ),
        "non_ascii_location": (f"{base}/redirect/302?to={idn}", "idn", True),
    }


@pytest.mark.parametrize(
    "case",
    [
        "duplicate_location",
        "duplicate_absolute_location",
        "unparseable_location",
        "non_ascii_location",
    ],
)
def test_redirect_errors_map_close_the_record_and_release_the_connection(lab, case):
    _dns(lab)
    url, expected, followed = _error_cases(lab)[case]
    policy = lab.policy()
    assert verdict(lambda: fetch(url, policy=policy)) == expected
    for name, send in _paths(policy, events := []).items():
        events.clear()
        got = verdict(send(url))
        follows = name.endswith("_follow")
        if followed and not follows:
            # Not following: the 3xx is the answer, as net.fetch(follow_redirects=False).
            assert got == "ok", (name, got)
            assert verdict(lambda: fetch(url, policy=policy, follow_redirects=False)) == "ok"
        else:
            assert got == expected, (name, got)
            assert [e.reason for e in events if e.decision == "denied"] == [expected], name
        assert {"allowed", "fetched"} <= {e.decision for e in events}, name
        _assert_closed(events)
        assert _open_hops() == [], name
    # Nothing but the redirecting hop was ever requested.
    assert {r.path.split("?")[0] for r in lab.requests} <= {"/locations", "/redirect/302"}


def test_a_non_ascii_header_value_is_passed_as_bytes_on_every_path(lab):
    """``/headers`` sends a Content-Language value with a byte outside ASCII: httpx used to
    raise ``UnicodeEncodeError`` rebuilding the headers; now every path answers."""
    _dns(lab)
    policy = lab.policy()
    url = f"http://{HOST}/headers"
    assert verdict(lambda: fetch(url, policy=policy)) == "ok"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name, send in _paths(policy, events := []).items():
            events.clear()
            assert verdict(send(url)) == "ok", name
            assert [e.decision for e in events] == ["allowed", "fetched"], name
            assert _open_hops() == [], name
    with guarded_client(policy) as client:
        response = client.get(url)
    assert response.headers.raw[-1][1].startswith(b"\x85") or any(
        value.startswith(b"\x85") for _, value in response.headers.raw
    )


# -- the kept string is only ever a narrowing --------------------------------------------


def test_a_forged_kept_string_cannot_send_a_request_elsewhere(lab):
    """The kept string names the checked host; httpx's URL another: refused, nothing sent."""
    _dns(lab)
    events: list = []
    request = httpx.Request(
        "GET", "http://ungranted.lab.example/plain", extensions={RAW_URL: f"http://{HOST}/plain"}
    )
    with guarded_client(lab.policy(), observer=events.append) as client:
        assert verdict(lambda: client.send(request)) == "invalid_url"
    assert lab.accepts() == []
    assert [(e.decision, e.reason) for e in events] == [("denied", "invalid_url")]


def test_params_merged_into_the_callers_url_are_sent_to_the_checked_origin(lab):
    _dns(lab)
    with guarded_client(lab.policy()) as client:
        response = client.get(f"http://{HOST}/echo", params={"b": "2"})
    assert "request-line: GET /echo?b=2 HTTP/1.1" in response.text
    assert f"host: {HOST}" in response.text


def test_a_url_object_the_caller_parsed_is_checked_as_httpx_holds_it(lab):
    _dns(lab)
    with guarded_client(lab.policy()) as client:
        response = client.get(httpx.URL(f"http://{HOST}/plain"))
    assert response.status_code == 200
    assert lab.requests[-1].host == HOST
