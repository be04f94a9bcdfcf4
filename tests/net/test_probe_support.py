"""What ``probe_url`` needs from the core (issue 11), tested on the real lab servers.

* the ``own_site`` private-address exemption: own-site hosts only, ``own_site`` scope only,
  metadata and mixed answers still refused, never decided by the address alone;
* "report, do not follow" redirects: the 3xx and its Location come back, the target is never
  requested;
* a fixed, bounded set of response headers on ``FetchResult``;
* ``refuse_media_types=False``: the status of a response of any media type, body unread.
"""

from __future__ import annotations

import httpx
import pytest

from django_webfetch.net import (
    REPORTED_HEADERS,
    EgressDenied,
    EgressPolicy,
    PolicyError,
    Scope,
    TooManyRedirects,
    UnsupportedMediaType,
    UrlGuard,
    explain,
    fetch,
)
from django_webfetch.net.fetcher import reported_headers

V4, V4_B = "11.0.0.10", "11.0.0.12"
PRIVATE = "10.0.0.10"
SITE = "site.lab.example"


def own_policy(lab, **kw):
    kw.setdefault("scope", Scope.OWN_SITE)
    kw.setdefault("own_site_hosts", (SITE,))
    kw.setdefault("allow_private_own_site", True)
    return lab.policy(**kw)


# -- the invariant ----------------------------------------------------------------------------


@pytest.mark.parametrize("scope", [s for s in Scope if s is not Scope.OWN_SITE])
def test_private_own_site_is_only_valid_for_the_own_site_scope(scope):
    with pytest.raises(PolicyError, match="own_site scope"):
        EgressPolicy(scope=scope, allow_private_own_site=True)


def test_private_own_site_must_be_a_bool():
    with pytest.raises(PolicyError, match="True or False"):
        EgressPolicy(scope=Scope.OWN_SITE, allow_private_own_site=1)  # type: ignore[arg-type]
    assert EgressPolicy().allow_private_own_site is False


# -- the exemption, without DNS ---------------------------------------------------------------


def _reason(url, policy):
    with pytest.raises(EgressDenied) as info:
        UrlGuard().check(url, policy)
    return info.value.reason


def test_private_ip_literal_own_host_is_allowed_only_with_the_exemption():
    base = {"scope": Scope.OWN_SITE, "own_site_hosts": ("127.0.0.1", "10.1.2.3:8000")}
    exempt = EgressPolicy(**base, allow_private_own_site=True, proxy_env=())
    assert UrlGuard().check("http://127.0.0.1/", exempt).addresses[0].exploded == "127.0.0.1"
    assert UrlGuard().check("http://10.1.2.3:8000/x", exempt).port == 8000
    strict = EgressPolicy(**base, proxy_env=())
    assert _reason("http://127.0.0.1/", strict) == "address_class:loopback"


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.4/",  # another private address: not a host of this site
        "http://127.0.0.2/",  # a neighbour of an own-site address
        "http://[::1]/",  # the same machine under another address
        "http://169.254.169.254/",
        "http://localhost/",
    ],
)
def test_exemption_is_never_decided_by_the_address_alone(url):
    policy = EgressPolicy(
        scope=Scope.OWN_SITE,
        own_site_hosts=("127.0.0.1",),
        allow_private_own_site=True,
        proxy_env=(),
    )
    assert _reason(url, policy) == "not_own_site"


@pytest.mark.parametrize(
    "address", ["169.254.169.254", "169.254.170.2", "100.100.100.200", "168.63.129.16"]
)
def test_metadata_stays_refused_even_when_listed_as_an_own_host(address):
    policy = EgressPolicy(
        scope=Scope.OWN_SITE,
        own_site_hosts=(address,),
        allow_private_own_site=True,
        proxy_env=(),
    )
    assert _reason(f"http://{address}/", policy) == "address_class:metadata"


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("0.0.0.0", "address_class:unspecified"),
        ("169.254.1.1", "address_class:link_local"),
        ("224.0.0.1", "address_class:multicast"),
        ("192.0.2.1", "address_class:documentation"),
    ],
)
def test_only_private_classes_are_exempt(address, reason):
    policy = EgressPolicy(
        scope=Scope.OWN_SITE,
        own_site_hosts=(address,),
        allow_private_own_site=True,
        proxy_env=(),
    )
    assert _reason(f"http://{address}/", policy) == reason


def test_explain_shows_the_exempt_private_category():
    policy = EgressPolicy(
        scope=Scope.OWN_SITE,
        own_site_hosts=("10.9.9.9",),
        allow_private_own_site=True,
        proxy_env=(),
    )
    result = explain("http://10.9.9.9/", policy=policy)
    assert result.allowed
    assert "10.9.9.9=private" in result.as_text()


# -- the exemption against real DNS -----------------------------------------------------------


@pytest.mark.lab
def test_own_host_on_a_private_address_is_fetched(lab):
    lab.expect_private_accepts = True
    lab.dns.set(SITE, a=[PRIVATE])
    result = fetch(lab.url(SITE, "/status/500"), policy=own_policy(lab))
    assert result.status == 500
    [request] = lab.requests
    assert (request.local, request.host, request.private) == (PRIVATE, SITE, True)


@pytest.mark.lab
def test_own_host_without_the_exemption_is_refused_on_its_private_address(lab):
    lab.dns.set(SITE, a=[PRIVATE])
    policy = own_policy(lab, allow_private_own_site=False)
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url(SITE, "/plain"), policy=policy)
    assert info.value.reason == "address_class:private"
    assert lab.requests == []


@pytest.mark.lab
@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"a": [V4, PRIVATE]}, "mixed_answer"),
        ({"a": ["169.254.169.254"]}, "address_class:metadata"),
        ({"a": [PRIVATE], "aaaa": ["fd00:ec2::254"]}, "address_class:metadata"),
        ({"a": ["0.0.0.0"]}, "address_class:unspecified"),
    ],
)
def test_own_host_answers_that_stay_refused(lab, answer, reason):
    lab.dns.set(SITE, **answer)
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url(SITE, "/plain"), policy=own_policy(lab))
    assert info.value.reason == reason
    assert lab.requests == []


@pytest.mark.lab
def test_another_name_for_a_private_address_is_not_exempt(lab):
    # Same address as the own host, but a name that is not one of this site's hosts.
    lab.dns.set(SITE, a=[PRIVATE])
    lab.dns.set("alias.lab.example", a=[PRIVATE])
    with pytest.raises(EgressDenied) as info:
        fetch(lab.url("alias.lab.example", "/plain"), policy=own_policy(lab))
    assert info.value.reason == "not_own_site"
    assert lab.requests == []


@pytest.mark.lab
def test_redirect_from_an_own_host_to_another_private_host_is_refused(lab):
    lab.expect_private_accepts = True
    lab.dns.set(SITE, a=[PRIVATE])
    lab.dns.set("intranet.lab.example", a=["192.168.1.10"])
    url = lab.url(SITE, "/redirect/302?to=http://intranet.lab.example/")
    with pytest.raises(EgressDenied) as info:
        fetch(url, policy=own_policy(lab))
    assert (info.value.reason, info.value.hop) == ("not_own_site", 1)
    assert [r.local for r in lab.requests] == [PRIVATE]


# -- report, do not follow --------------------------------------------------------------------


@pytest.mark.lab
@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_redirect_is_reported_not_followed(lab, code):
    lab.dns.set("www.lab.example", a=[V4])
    lab.dns.set("target.lab.example", a=[V4_B])
    target = "http://target.lab.example/plain"
    result = fetch(
        lab.url("www.lab.example", f"/redirect/{code}?to={target}"),
        policy=lab.policy(),
        follow_redirects=False,
    )
    assert result.status == code
    assert result.redirect_reported
    assert result.location == target
    assert result.body == b"" and result.media_type == ""
    assert len(result.hops) == 1
    assert [r.local for r in lab.requests] == [V4]
    assert not lab.accepts(V4_B)


@pytest.mark.lab
def test_report_mode_does_not_even_check_the_target(lab):
    # A redirect to a metadata address is reported as the server's answer; nothing is
    # resolved or requested for it.
    lab.dns.set("www.lab.example", a=[V4])
    url = lab.url("www.lab.example", "/redirect/302?to=http://169.254.169.254/latest/")
    result = fetch(url, policy=lab.policy(), follow_redirects=False)
    assert (result.status, result.location) == (302, "http://169.254.169.254/latest/")
    assert not lab.accepts("169.254.169.254")


@pytest.mark.lab
def test_max_redirects_zero_still_raises_when_following(lab):
    lab.dns.set("www.lab.example", a=[V4])
    with pytest.raises(TooManyRedirects):
        fetch(lab.url("www.lab.example", "/redirect/302"), policy=lab.policy(max_redirects=0))
    result = fetch(
        lab.url("www.lab.example", "/redirect/302"),
        policy=lab.policy(max_redirects=0),
        follow_redirects=False,
    )
    assert (result.status, result.location) == (302, "/plain")


@pytest.mark.lab
def test_a_304_without_location_is_a_plain_answer(lab):
    lab.dns.set("www.lab.example", a=[V4])
    result = fetch(
        lab.url("www.lab.example", "/redirect/304"),
        policy=lab.policy(),
        follow_redirects=False,
        refuse_media_types=False,
    )
    assert result.status == 304 and not result.redirect_reported and result.location is None


# -- reported headers -------------------------------------------------------------------------


@pytest.mark.lab
def test_only_the_fixed_headers_are_kept_and_they_are_bounded(lab):
    lab.dns.set("www.lab.example", a=[V4])
    result = fetch(lab.url("www.lab.example", "/headers"), policy=lab.policy())
    headers = dict(result.headers)
    assert set(headers) == {"content-type", "content-length", "cache-control", "server-timing"}
    assert [name for name, _ in result.headers] == [n for n in REPORTED_HEADERS if n in headers]
    assert headers["server-timing"] == "db;dur=53, app;dur=47.2"
    assert headers["cache-control"].startswith("max-age=60, xxx")
    assert len(headers["cache-control"]) == REPORTED_HEADERS["cache-control"]
    assert "never-reported" not in repr(result.headers)


@pytest.mark.lab
def test_non_printable_header_characters_are_replaced(lab):
    lab.dns.set("www.lab.example", a=[V4])
    result = fetch(
        lab.url("www.lab.example", "/server-error"), policy=lab.policy(), refuse_media_types=True
    )
    assert result.status == 500
    timing = dict(result.headers)["server-timing"]
    assert "\x85" not in timing and timing.isprintable()


def test_reported_headers_units():
    headers = httpx.Headers(
        [
            ("Location", ("/a\u202e" + "b" * 2000).encode()),
            ("Cache-Control", "no-store"),
            ("Cache-Control", "private"),
            ("Server-Timing", b"\x00\t "),
            ("Authorization", "secret"),
        ]
    )
    reported = dict(reported_headers(headers))
    assert reported["cache-control"] == "no-store, private"
    assert reported["location"].startswith("/a b")
    assert len(reported["location"]) == REPORTED_HEADERS["location"]
    assert reported["server-timing"] == ""
    assert "authorization" not in reported
    assert reported_headers(httpx.Headers()) == ()


# -- any media type, body unread --------------------------------------------------------------


@pytest.mark.lab
def test_unaccepted_media_type_reported_without_reading_the_body(lab):
    lab.dns.set("www.lab.example", a=[V4])
    with pytest.raises(UnsupportedMediaType):
        fetch(lab.url("www.lab.example", "/wrong-type"), policy=lab.policy())
    result = fetch(
        lab.url("www.lab.example", "/wrong-type"),
        policy=lab.policy(),
        refuse_media_types=False,
    )
    assert (result.status, result.media_type, result.body) == (
        200,
        "application/octet-stream",
        b"",
    )
    assert dict(result.headers)["content-length"] == str(64 * 1024 * 1024)
    lab.wait_requests_done()
    assert lab.requests[-1].bytes_sent < 64 * 1024 * 1024
