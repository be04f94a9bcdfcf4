from __future__ import annotations

import contextlib
from ipaddress import IPv4Address, IPv6Address

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from django_webfetch.net.errors import (
    EgressDenied,
    HostNotAllowed,
    InvalidURL,
    PortNotAllowed,
    SchemeNotAllowed,
)
from django_webfetch.net.hosts import Host, HostKind
from django_webfetch.net.urlparse import MAX_URL_LENGTH, ParsedURL, join_url, parse_url


def refused(url, error, reason):
    with pytest.raises(EgressDenied) as info:
        parse_url(url)
    assert type(info.value) is error
    assert info.value.reason == reason
    if isinstance(url, str):
        assert info.value.url == url[:500]
    # the message is built from the reason code only, never from the URL
    assert str(info.value) == f"egress denied by rule {reason!r}"
    return info.value


# --- accepted -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port", "explicit", "target", "query", "normalised"),
    [
        ("http://example.org", "http", "example.org", 80, False, "/", "", "http://example.org/"),
        (
            "https://example.org/",
            "https",
            "example.org",
            443,
            False,
            "/",
            "",
            "https://example.org/",
        ),
        (
            "HTTPS://Example.ORG/Path",
            "https",
            "example.org",
            443,
            False,
            "/Path",
            "",
            "https://example.org/Path",
        ),
        ("hTtP://example.org.", "http", "example.org", 80, False, "/", "", "http://example.org/"),
        ("http://example.org:80/", "http", "example.org", 80, True, "/", "", "http://example.org/"),
        (
            "https://example.org:443/",
            "https",
            "example.org",
            443,
            True,
            "/",
            "",
            "https://example.org/",
        ),
        (
            "http://example.org:443/",
            "http",
            "example.org",
            443,
            True,
            "/",
            "",
            "http://example.org:443/",
        ),
        (
            "https://example.org:8443/a?b=c",
            "https",
            "example.org",
            8443,
            True,
            "/a?b=c",
            "b=c",
            "https://example.org:8443/a?b=c",
        ),
        (
            "https://example.org:00443/",
            "https",
            "example.org",
            443,
            True,
            "/",
            "",
            "https://example.org/",
        ),
        (
            "http://example.org?q",
            "http",
            "example.org",
            80,
            False,
            "/?q",
            "q",
            "http://example.org/?q",
        ),
        ("http://example.org?", "http", "example.org", 80, False, "/", "", "http://example.org/"),
        (
            "http://example.org#frag",
            "http",
            "example.org",
            80,
            False,
            "/",
            "",
            "http://example.org/",
        ),
        (
            "http://example.org/a?b#c?d",
            "http",
            "example.org",
            80,
            False,
            "/a?b",
            "b",
            "http://example.org/a?b",
        ),
        (
            "http://example.org/a#b?c",
            "http",
            "example.org",
            80,
            False,
            "/a",
            "",
            "http://example.org/a",
        ),
        ("http://a#@b/", "http", "a", 80, False, "/", "", "http://a/"),
        ("http://a?@b/", "http", "a", 80, False, "/?@b/", "@b/", "http://a/?@b/"),
        ("http://a/@b", "http", "a", 80, False, "/@b", "", "http://a/@b"),
        (
            "http://a/x?y=1&z=%41",
            "http",
            "a",
            80,
            False,
            "/x?y=1&z=%41",
            "y=1&z=%41",
            "http://a/x?y=1&z=%41",
        ),
        ("https://x.org/ä", "https", "x.org", 443, False, "/%C3%A4", "", "https://x.org/%C3%A4"),
        (
            "https://x.org/a?q=ä€",
            "https",
            "x.org",
            443,
            False,
            "/a?q=%C3%A4%E2%82%AC",
            "q=%C3%A4%E2%82%AC",
            "https://x.org/a?q=%C3%A4%E2%82%AC",
        ),
        (
            "https://x.org/%zz%4",
            "https",
            "x.org",
            443,
            False,
            "/%25zz%254",
            "",
            "https://x.org/%25zz%254",
        ),
        ("https://x.org/a%2Fb", "https", "x.org", 443, False, "/a%2Fb", "", "https://x.org/a%2Fb"),
        (
            'https://x.org/<a>"{|}^`[]',
            "https",
            "x.org",
            443,
            False,
            "/%3Ca%3E%22%7B%7C%7D%5E%60%5B%5D",
            "",
            "https://x.org/%3Ca%3E%22%7B%7C%7D%5E%60%5B%5D",
        ),
        (
            "https://x.org/?a=\\b",
            "https",
            "x.org",
            443,
            False,
            "/?a=%5Cb",
            "a=%5Cb",
            "https://x.org/?a=%5Cb",
        ),
        (
            "https://x.org/?a?b/c",
            "https",
            "x.org",
            443,
            False,
            "/?a?b/c",
            "a?b/c",
            "https://x.org/?a?b/c",
        ),
        (
            "http://x.org/a/../b/./c",
            "http",
            "x.org",
            80,
            False,
            "/b/c",
            "",
            "http://x.org/b/c",
        ),
        ("http://x.org#\\@evil", "http", "x.org", 80, False, "/", "", "http://x.org/"),
        (
            "http://127.0.0.1:8000/",
            "http",
            "127.0.0.1",
            8000,
            True,
            "/",
            "",
            "http://127.0.0.1:8000/",
        ),
        ("http://[::1]/", "http", "::1", 80, False, "/", "", "http://[::1]/"),
        ("http://[::1]:8080", "http", "::1", 8080, True, "/", "", "http://[::1]:8080/"),
        (
            "http://[2001:DB8:0::1]:80/x",
            "http",
            "2001:db8::1",
            80,
            True,
            "/x",
            "",
            "http://[2001:db8::1]/x",
        ),
        (
            "http://xn--bcher-kva.de/",
            "http",
            "xn--bcher-kva.de",
            80,
            False,
            "/",
            "",
            "http://xn--bcher-kva.de/",
        ),
    ],
)
def test_accepted(url, scheme, host, port, explicit, target, query, normalised):
    parsed = parse_url(url)
    assert parsed.scheme == scheme
    assert parsed.host.name == host
    assert parsed.port == port
    assert parsed.explicit_port is explicit
    assert parsed.target == target
    assert parsed.query == query
    assert parsed.geturl() == normalised
    assert parse_url(parsed.geturl()) == parsed or parsed.explicit_port
    assert parsed.path == target.partition("?")[0]


def test_parsed_fields_and_properties():
    parsed = parse_url("https://[2001:db8::1]:8443/p?q")
    assert parsed == ParsedURL(
        "https",
        Host(HostKind.IPV6, "2001:db8::1", IPv6Address("2001:db8::1")),
        8443,
        True,
        "/p?q",
        "q",
    )
    assert not parsed.default_port
    assert parsed.authority == "[2001:db8::1]:8443"
    v4 = parse_url("http://192.0.2.1:80")
    assert v4.host.address == IPv4Address("192.0.2.1")
    assert v4.default_port
    assert v4.authority == "192.0.2.1"
    assert parse_url("https://a:80/").authority == "a:80"
    assert not parse_url("https://a:80/").default_port


# --- refused ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "",
        "example.org",
        "//example.org/",
        "/path",
        "http:example.org",
        "http:/example.org",
        "http:\\\\example.org",
        "://example.org",
        "1http://example.org",
        "ht tp://example.org",
        "h_tp://example.org",
        "javascript:alert(1)",
        "mailto:a@b",
        "data:text/html,hi",
        "\thttp://example.org/",
        " http://example.org/",
        "http://example.org/ ",
        "http://exa\tmple.org/",
        "http://exa\nmple.org/",
        "http://exa\rmple.org/",
        "http://example.org/\na",
        "http://example.org/?a=\tb",
        "http://example.org/#a b",
        "http://example.org/\x00",
        "http://example.org/\x1f",
        "http://example.org/\x7f",
        "http://example.org/\x9b",
        "http://example.org/\u00a0",
        "http://example.org/\u2028",
        "http://example.org/\u3000",
        "http://example.org\\@evil.org/",
        "http://evil.org\\.example.org/",
        "http://example.org\\",
        "http://example.org/a\\b",
        "http://example.org/\\\\evil.org/",
        "https://" + "a" * MAX_URL_LENGTH,
    ],
)
def test_invalid_url(url):
    refused(url, InvalidURL, "invalid_url")


def test_non_string_url():
    for value in (None, b"http://example.org/", 42):
        with pytest.raises(InvalidURL) as info:
            parse_url(value)  # type: ignore[arg-type]
        assert info.value.reason == "invalid_url"
        assert info.value.url == ""


def test_long_url_error_carries_truncated_copy():
    url = "https://example.org/" + "a" * MAX_URL_LENGTH
    exc = refused(url, InvalidURL, "invalid_url")
    assert len(exc.url) == 500
    assert exc.url == url[:500]
    ok = "https://example.org/" + "a" * (MAX_URL_LENGTH - len("https://example.org/"))
    assert parse_url(ok).target.startswith("/aaa")
    exc = refused("https://exa mple.org/" + "b" * 1000, InvalidURL, "invalid_url")
    assert len(exc.url) == 500


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/",
        "file:///etc/passwd",
        "FILE://localhost/etc/passwd",
        "gopher://127.0.0.1:25/",
        "ws://example.org/",
        "wss://example.org/",
        "httpx://example.org/",
        "http+unix://%2Fvar%2Frun/",
        "https1://example.org/",
        "dict://127.0.0.1:11211/",
    ],
)
def test_scheme_not_allowed(url):
    refused(url, SchemeNotAllowed, "scheme")


@pytest.mark.parametrize(
    "url",
    [
        "http://user@example.org/",
        "http://user:pass@example.org/",
        "http://@example.org/",
        "http://:@example.org/",
        "http://a@b@example.org/",
        "http://@@example.org/",
        "http://example.org@evil.org/",
        "http://evil.org:80@example.org/",
        "http://example.org@/",
        "http://@/",
        "http://[::1]@example.org/",
        "http://example.org:80@[::1]/",
        "https://a%40b@example.org/",
    ],
)
def test_userinfo(url):
    refused(url, InvalidURL, "userinfo")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http:///", "host_syntax"),
        ("http://", "host_syntax"),
        ("http://:80/", "host_syntax"),
        ("http://?x", "host_syntax"),
        ("http://#x", "host_syntax"),
        ("http://ex%61mple.org/", "host_syntax"),
        ("http://%31%32%37.0.0.1/", "host_syntax"),
        ("http://127.0.0.1%2f/", "host_syntax"),
        ("http://a_b.org/", "host_syntax"),
        ("http://a..b/", "host_syntax"),
        ("http://::1/", "host_syntax"),
        ("http://example.org:80:80/", "host_syntax"),
        ("http://2001:db8::1/", "host_syntax"),
        ("http://[::1/", "host_syntax"),
        ("http://[::1]x/", "host_syntax"),
        ("http://[::1]]/", "host_syntax"),
        ("http://[fe80::1%25eth0]/", "host_syntax"),
        ("http://[fe80::1%eth0]/", "host_syntax"),
        ("http://[v1.x]/", "host_syntax"),
        ("http://[127.0.0.1]/", "host_syntax"),
        ("http://bücher.de/", "idn"),
        ("http://ｅｘａｍｐｌｅ.com/", "idn"),
        ("http://ⓔxample.com/", "idn"),
        ("http://example。com/", "idn"),
        ("http://example．com/", "idn"),
        ("http://example｡com/", "idn"),
        ("http://2130706433/", "legacy_numeric_host"),
        ("http://0177.0.0.1/", "legacy_numeric_host"),
        ("http://0x7f.1/", "legacy_numeric_host"),
        ("http://127.1/", "legacy_numeric_host"),
        ("http://127.0.0.1./", "legacy_numeric_host"),
        ("http://256.1.1.1/", "legacy_numeric_host"),
        ("http://1.2.3.04:80/", "legacy_numeric_host"),
    ],
)
def test_host_refused(url, reason):
    refused(url, HostNotAllowed, reason)


@pytest.mark.parametrize(
    "url",
    [
        "http://example.org:/",
        "http://example.org:0/",
        "http://example.org:00000/",
        "http://example.org:65536/",
        "http://example.org:99999/",
        "http://example.org:123456/",
        "http://example.org:+80/",
        "http://example.org:-80/",
        "http://example.org:80a/",
        "http://example.org:0x50/",
        "http://example.org:８０/",
        "http://example.org:http/",
        "http://[::1]:/",
        "http://[::1]:0/",
        "http://[::1]:x/",
    ],
)
def test_port_refused(url):
    refused(url, PortNotAllowed, "port")


# --- properties ------------------------------------------------------------------------------


@given(st.text(max_size=120))
@example("http://a#@b/")
@example("https://[::1]:8/é?ü#")
def test_parse_url_only_raises_egress_denied(url):
    try:
        parsed = parse_url(url)
    except EgressDenied as exc:
        assert exc.url == url[:500]
        return
    normalised = parsed.geturl()
    assert normalised.isascii()
    again = parse_url(normalised)
    assert (again.scheme, again.host, again.port, again.target) == (
        parsed.scheme,
        parsed.host,
        parsed.port,
        parsed.target,
    )


@given(
    st.sampled_from(["http", "https", "HTTP"]),
    st.text(alphabet="ab.:@[]/?#\\%1-_ \t", max_size=25),
)
def test_parse_url_structured_junk(scheme, rest):
    url = f"{scheme}://{rest}"
    try:
        parsed = parse_url(url)
    except EgressDenied:
        return
    authority = rest
    for delimiter in "/?#":
        authority = authority.partition(delimiter)[0]
    assert "@" not in authority and "\\" not in authority and " " not in url
    assert parsed.host.name in authority.lower()


# --- join_url (RFC 3986 §5.4) ----------------------------------------------------------------

BASE = "http://a/b/c/d;p?q"


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        # §5.4.1 normal examples
        ("g:h", "g:h"),
        ("g", "http://a/b/c/g"),
        ("./g", "http://a/b/c/g"),
        ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"),
        ("//g", "http://g"),
        ("?y", "http://a/b/c/d;p?y"),
        ("g?y", "http://a/b/c/g?y"),
        ("#s", "http://a/b/c/d;p?q#s"),
        ("g#s", "http://a/b/c/g#s"),
        ("g?y#s", "http://a/b/c/g?y#s"),
        (";x", "http://a/b/c/;x"),
        ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y#s"),
        ("", "http://a/b/c/d;p?q"),
        (".", "http://a/b/c/"),
        ("./", "http://a/b/c/"),
        ("..", "http://a/b/"),
        ("../", "http://a/b/"),
        ("../g", "http://a/b/g"),
        ("../..", "http://a/"),
        ("../../", "http://a/"),
        ("../../g", "http://a/g"),
        # §5.4.2 abnormal examples
        ("../../../g", "http://a/g"),
        ("../../../../g", "http://a/g"),
        ("/./g", "http://a/g"),
        ("/../g", "http://a/g"),
        ("g.", "http://a/b/c/g."),
        (".g", "http://a/b/c/.g"),
        ("g..", "http://a/b/c/g.."),
        ("..g", "http://a/b/c/..g"),
        ("./../g", "http://a/b/g"),
        ("./g/.", "http://a/b/c/g/"),
        ("g/./h", "http://a/b/c/g/h"),
        ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
        ("g;x=1/../y", "http://a/b/c/y"),
        ("g?y/./x", "http://a/b/c/g?y/./x"),
        ("g?y/../x", "http://a/b/c/g?y/../x"),
        ("g#s/./x", "http://a/b/c/g#s/./x"),
        ("g#s/../x", "http://a/b/c/g#s/../x"),
        ("http:g", "http:g"),  # strict parser (§5.2.2)
        # Location headers seen in the wild
        ("//evil.org/x", "http://evil.org/x"),
        ("//evil.org", "http://evil.org"),
        ("//user@evil.org/../x", "http://user@evil.org/x"),
        ("https://other.org/x", "https://other.org/x"),
        ("file:///etc/passwd", "file:///etc/passwd"),
        ("gopher://127.0.0.1:70/", "gopher://127.0.0.1:70/"),
        ("HTTP://A/../B", "HTTP://A/../B"),
        ("\\\\evil.org/x", "http://a/b/c/\\\\evil.org/x"),
        ("/x?", "http://a/x?"),
        ("/x/..", "http://a/"),
        ("/..", "http://a/"),
        ("/x/.", "http://a/x/"),
    ],
)
def test_join_url(reference, expected):
    assert join_url(parse_url(BASE), reference) == expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a/b/c/./../../g", "/a/g"),  # RFC 3986 §5.2.4 examples
        ("mid/content=5/../6", "mid/6"),
        ("../a", "a"),
        ("./a", "a"),
        (".", ""),
        ("..", ""),
        ("../../", ""),
        ("", ""),
    ],
)
def test_remove_dot_segments(path, expected):
    from django_webfetch.net.urlparse import _remove_dot_segments

    assert _remove_dot_segments(path) == expected


def test_join_url_keeps_base_authority_and_port():
    base = parse_url("https://[2001:db8::1]:8443/dir/page")
    assert join_url(base, "other") == "https://[2001:db8::1]:8443/dir/other"
    assert join_url(base, "?x") == "https://[2001:db8::1]:8443/dir/page?x"
    assert join_url(base, "") == "https://[2001:db8::1]:8443/dir/page"
    assert join_url(parse_url("http://a"), "x") == "http://a/x"
    assert join_url(parse_url("http://a:80/"), "x") == "http://a/x"


def test_join_url_result_goes_through_parse_url():
    base = parse_url("https://example.org/a/b")
    with pytest.raises(SchemeNotAllowed):
        parse_url(join_url(base, "file:///etc/passwd"))
    with pytest.raises(InvalidURL):
        parse_url(join_url(base, "\\\\evil.org/x"))
    with pytest.raises(InvalidURL):
        parse_url(join_url(base, "//user@evil.org/"))
    with pytest.raises(HostNotAllowed):
        parse_url(join_url(base, "//2130706433/"))
    assert parse_url(join_url(base, "../c?d#e")).geturl() == "https://example.org/c?d"


@given(st.text(max_size=60))
def test_join_url_never_crashes(reference):
    result = join_url(parse_url("https://example.org/a/b?c"), reference)
    assert isinstance(result, str)
    with contextlib.suppress(EgressDenied):
        parse_url(result)


@pytest.mark.parametrize(
    "url",
    [
        "http://x.org/%2e%2e/admin",
        "http://x.org/a/%2E./b",
        "http://x.org/a/.%2e",
        "http://x.org/%2e/b",
    ],
)
def test_percent_encoded_dot_segments_are_refused(url):
    with pytest.raises(InvalidURL) as info:
        parse_url(url)
    assert info.value.reason == "invalid_url"


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("http://x.org/search/../echo", "/echo"),
        ("http://x.org/a/./b/../c?x=../y", "/a/c?x=../y"),
        ("http://x.org/..", "/"),
        ("http://x.org/a/%2e%2ex/b", "/a/%2e%2ex/b"),
    ],
)
def test_dot_segments_are_removed_before_anything_decides(url, target):
    assert parse_url(url).target == target
