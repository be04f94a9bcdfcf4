from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from django_webfetch.net.errors import HostNotAllowed, PolicyError
from django_webfetch.net.hosts import (
    EntryKind,
    Host,
    HostKind,
    HostList,
    ListEntry,
    parse_host,
    parse_list_entry,
    parse_port,
)

LONGEST = ".".join(["a" * 63] * 3) + "." + "b" * 61


def reason_of(raw):
    with pytest.raises(HostNotAllowed) as info:
        parse_host(raw)
    assert info.value.url == ""
    return info.value.reason


# --- names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("example.org", "example.org"),
        ("Example.ORG", "example.org"),
        ("example.org.", "example.org"),
        ("localhost", "localhost"),
        ("a", "a"),
        ("a-b.c-d.example", "a-b.c-d.example"),
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("XN--BCHER-KVA.DE", "xn--bcher-kva.de"),
        ("www.xn--80ak6aa92e.com", "www.xn--80ak6aa92e.com"),
        ("1.2.3.4.example.com", "1.2.3.4.example.com"),  # numeric labels, not the last
        ("127.0.0.1.nip.io", "127.0.0.1.nip.io"),
        ("0x7f.example", "0x7f.example"),
        ("1.0xg", "1.0xg"),  # "0xg" is not a number (WHATWG ends-in-a-number)
        ("1.2.3.4a", "1.2.3.4a"),
        ("a" * 63 + ".com", "a" * 63 + ".com"),
        (LONGEST, LONGEST),  # 253 characters
        (LONGEST + ".", LONGEST),
        ("9com", "9com"),
        ("123abc", "123abc"),
    ],
)
def test_valid_names(raw, name):
    host = parse_host(raw)
    assert host == Host(HostKind.NAME, name, None)
    assert not host.is_ip
    assert host.url_text == name


@pytest.mark.parametrize(
    "raw",
    [
        "",
        ".",
        "..",
        ".example.org",
        "a..b",
        "example.org..",
        "exa mple.org",
        " example.org",
        "example.org ",
        "example.org\t",
        "exam\nple.org",
        "exam\x00ple.org",
        "exam\x7fple.org",
        "exam\x85ple.org",
        "example\\.org",
        "example.org\\",
        "ex%61mple.org",
        "%31%32%37.0.0.1",  # percent-encoding is a syntax error before any numeric reading
        "127.0.0.%31",
        "0x7f%2e1",
        "a_b.1",
        "1.2.3.4:80",
        "%65xample.org",
        "user@example.org",
        "@example.org",
        "a_b.example.org",
        "_dmarc.example.org",
        "-a.example.org",
        "a-.example.org",
        "example.-org",
        "a" * 64 + ".com",
        ".".join(["a" * 63] * 3) + "." + "b" * 62,  # 254 characters
        "exa*mple.org",
        "*.example.org",
        "example.org:80",
        "example.org/",
        "example.org?",
        "example.org#",
        "exa!mple.org",
        "[example.org]",
        "[",
        "]",
        "[]",
        "[::1",
        "::1]",
        "::1",
        "2001:db8::1",
        "[v1.fe80::a+en1]",  # RFC 3986 IPvFuture
        "[::1]:80",
        "[[::1]]",
        "[::g]",
        "[1::2::3]",
        "[::1.2.3.04]",  # leading zero in the embedded dotted quad
        "[::1.2.3]",
        "[fe80::1%25eth0]",
        "[fe80::1%eth0]",
        "[fe80::1%]",
        "[ ::1]",
    ],
)
def test_host_syntax(raw):
    assert reason_of(raw) == "host_syntax"


def test_non_string_is_host_syntax():
    assert reason_of(None) == "host_syntax"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "raw",
    [
        "bücher.de",
        "ｅｘａｍｐｌｅ.com",  # fullwidth letters (UTS #46 maps them to ASCII)
        "ⓔxample.com",  # enclosed alphanumerics
        "example。com",  # U+3002 ideographic full stop
        "example．com",  # U+FF0E fullwidth full stop
        "example｡com",  # U+FF61 halfwidth ideographic full stop
        "１２７.0.0.1",  # fullwidth digits
        "127。0。0。1",
        "exam\u200bple.com",  # zero-width space (not whitespace for str.isspace)
        "exampl\u0435.com",  # Cyrillic "е"
        "\ufeffexample.com",
        "ß.de",
        "[::１]",
        "xn--bcher-kva.dé",
    ],
)
def test_idn_refused(raw):
    assert reason_of(raw) == "idn"


@pytest.mark.parametrize(
    "raw",
    [
        "example.com\u3000",  # ideographic space: whitespace beats IDN
        "example.com\u00a0",
        "exa\u2028mple.com",
    ],
)
def test_unicode_whitespace_is_syntax(raw):
    assert reason_of(raw) == "host_syntax"


# --- IPv4 and legacy numeric forms ----------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    ["127.0.0.1", "0.0.0.0", "255.255.255.255", "8.8.8.8", "192.0.2.1", "10.20.30.40"],
)
def test_canonical_dotted_quad(raw):
    host = parse_host(raw)
    assert host == Host(HostKind.IPV4, raw, IPv4Address(raw))
    assert host.is_ip
    assert host.url_text == raw


@pytest.mark.parametrize(
    "raw",
    [
        "2130706433",  # decimal
        "0",
        "4294967295",
        "4294967296",
        "0177.0.0.1",  # octal
        "0177.0000.0000.0001",
        "017700000001",
        "00000000000000000000177.0.0.1",
        "0x7f.0.0.1",  # hex
        "0x7f.1",
        "0X7F.1",
        "0x7f000001",
        "0x7F000001",
        "0x",
        "1.0x",
        "0x7f.0x0.0x0.0x1",
        "127.0.0.0x1",
        "0177.0.0.0x1",  # mixed
        "127.1",  # short forms
        "127.0.1",
        "10.1",
        "1.2.3.04",  # leading zeros
        "01.2.3.4",
        "1.2.3.00",
        "127.0.0.1.",  # trailing dot on a numeric host
        "8.8.8.8.",
        "2130706433.",
        "256.1.1.1",  # overflow
        "1.2.3.256",
        "1.2.3.1000",
        "999999999999999999999999",
        "1.2.3.4.5",
        "example.123",  # any host whose last label is numeric
        "example.0x1",
        "a.b.c.1",
        "-1.2.3.4",
        "1.2.-3.4",
    ],
)
def test_legacy_numeric_host(raw):
    assert reason_of(raw) == "legacy_numeric_host"


def test_host_is_frozen():
    host = parse_host("example.org")
    with pytest.raises(AttributeError):
        host.name = "evil.org"  # type: ignore[misc]


# --- IPv6 literals --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "address"),
    [
        ("[::1]", "::1"),
        ("[::]", "::"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("[0000:0000:0000:0000:0000:0000:0000:0001]", "::1"),
        ("[2001:DB8::1]", "2001:db8::1"),
        ("[2001:0db8:0000:0000:0000:0000:0000:0001]", "2001:db8::1"),
        ("[2001:db8:0:0:1:0:0:1]", "2001:db8::1:0:0:1"),
        ("[2001:db8::]", "2001:db8::"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),  # IPv4-mapped, dotted
        ("[::ffff:7f00:1]", "::ffff:7f00:1"),  # IPv4-mapped, hex
        ("[::FFFF:7F00:0001]", "::ffff:7f00:1"),
        ("[0:0:0:0:0:ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("[::127.0.0.1]", "::7f00:1"),  # IPv4-compatible
        ("[::ffff:0:127.0.0.1]", "::ffff:0:7f00:1"),  # IPv4-translated
        ("[64:ff9b::192.0.2.33]", "64:ff9b::c000:221"),
        ("[fe80::1]", "fe80::1"),
    ],
)
def test_ipv6_literals(raw, address):
    expected = IPv6Address(address)
    host = parse_host(raw)
    assert host == Host(HostKind.IPV6, str(expected), expected)
    assert host.url_text == f"[{expected}]"
    assert parse_host(host.url_text) == host


# --- properties ------------------------------------------------------------------------------


@given(st.text(max_size=80))
@example("0x7f.1")
@example("[::1]")
@example("Example.ORG.")
def test_parse_host_arbitrary_text(raw):
    try:
        host = parse_host(raw)
    except HostNotAllowed as exc:
        assert exc.reason in {"host_syntax", "idn", "legacy_numeric_host"}
        return
    assert raw.isascii()
    assert host.name.isascii()
    assert parse_host(host.url_text) == host
    if host.kind is HostKind.NAME:
        assert host.name == raw.lower().removesuffix(".")
        assert host.address is None
    else:
        assert host.address is not None
        assert host.name == str(host.address)


@pytest.mark.unmeasured("a property: the table tests of this module cover these lines")
@given(
    st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z]([a-z0-9-]{0,20}[a-z0-9])?){0,4}\Z")
)
def test_ldh_names_accepted(raw):
    if raw.split(".")[-1].isdigit():
        assert reason_of(raw) == "legacy_numeric_host"
    else:
        assert parse_host(raw).name == raw


@given(st.ip_addresses(v=4))
def test_every_ipv4_canonical_text_parses(address):
    assert parse_host(str(address)) == Host(HostKind.IPV4, str(address), address)


@given(st.ip_addresses(v=6))
def test_every_ipv6_round_trips(address):
    host = parse_host(f"[{address.exploded.upper()}]")
    assert host == Host(HostKind.IPV6, str(address), address)


# --- ports ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "port"), [("1", 1), ("80", 80), ("08080", 8080), ("65535", 65535)])
def test_parse_port(raw, port):
    assert parse_port(raw) == port


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "0",
        "00000",
        "65536",
        "99999",
        "123456",
        "+80",
        "-80",
        " 80",
        "8 0",
        "0x50",
        "８０",
        "80a",
        "٨٠",
    ],
)
def test_parse_port_rejects(raw):
    with pytest.raises(ValueError):
        parse_port(raw)


# --- list entries -----------------------------------------------------------------------------

V6 = IPv6Address("2001:db8::1")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("docs.example.org", (EntryKind.NAME, "docs.example.org", None, None)),
        ("Docs.Example.ORG.", (EntryKind.NAME, "docs.example.org", None, None)),
        ("docs.example.org:8443", (EntryKind.NAME, "docs.example.org", None, 8443)),
        ("localhost", (EntryKind.NAME, "localhost", None, None)),
        ("xn--bcher-kva.de", (EntryKind.NAME, "xn--bcher-kva.de", None, None)),
        ("*.example.org", (EntryKind.SUFFIX, "example.org", None, None)),
        ("*.EXAMPLE.org", (EntryKind.SUFFIX, "example.org", None, None)),
        ("*.example.org:443", (EntryKind.SUFFIX, "example.org", None, 443)),
        ("*.internal", (EntryKind.SUFFIX, "internal", None, None)),
        ("192.0.2.1", (EntryKind.ADDRESS, "192.0.2.1", IPv4Address("192.0.2.1"), None)),
        ("192.0.2.1:80", (EntryKind.ADDRESS, "192.0.2.1", IPv4Address("192.0.2.1"), 80)),
        ("2001:db8::1", (EntryKind.ADDRESS, "2001:db8::1", V6, None)),
        ("2001:DB8:0::1", (EntryKind.ADDRESS, "2001:db8::1", V6, None)),
        ("[2001:db8::1]", (EntryKind.ADDRESS, "2001:db8::1", V6, None)),
        ("[2001:db8::1]:8443", (EntryKind.ADDRESS, "2001:db8::1", V6, 8443)),
        (
            "::ffff:192.0.2.1",
            (
                EntryKind.ADDRESS,
                str(IPv6Address("::ffff:192.0.2.1")),
                IPv6Address("::ffff:192.0.2.1"),
                None,
            ),
        ),
    ],
)
def test_list_entry_valid(raw, expected):
    entry = parse_list_entry(raw)
    assert (entry.kind, entry.value, entry.address, entry.port) == expected
    assert entry.raw == raw


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "*",
        "*.",
        "*:443",
        "*.*.example.org",
        "a.*.example.org",
        "*x.org",
        "x*.org",
        "example.*",
        "**.example.org",
        "*.192.0.2.1",
        "*.[2001:db8::1]",
        "*.2001:db8::1",
        "192.0.2.0/24",
        "2001:db8::/32",
        "[2001:db8::]/32",
        "192.0.2.*",
        "http://example.org",
        "https://example.org/",
        "example.org/path",
        "user@example.org",
        "@example.org",
        " example.org",
        "example.org ",
        "exa mple.org",
        "example.org\n",
        "\texample.org",
        "example.org\x00",
        "bücher.de",
        "ｅｘａｍｐｌｅ.com",
        "example。org",
        "2130706433",
        "0177.0.0.1",
        "127.1",
        "0x7f.1",
        "1.2.3.04",
        "example.org:0",
        "example.org:65536",
        "example.org:",
        "example.org:http",
        "example.org:+80",
        "example.org:-80",
        "example.org:80:80",
        "example.org:８０",
        "[2001:db8::1]:0",
        "[2001:db8::1]:",
        "[2001:db8::1]x",
        "[2001:db8::1]:99999",
        "[2001:db8::1",
        "2001:db8::1]",
        "[fe80::1%25eth0]",
        "fe80::1%eth0",
        "[192.0.2.1]",
        ":80",
        "a_b.example.org",
        "-a.example.org",
        "a..b",
        "\\example.org",
    ],
)
def test_list_entry_invalid(raw):
    with pytest.raises(PolicyError) as info:
        parse_list_entry(raw)
    assert "invalid host list entry" in str(info.value)


def test_list_entry_message_names_entry():
    with pytest.raises(PolicyError, match=r"'\*\.\*\.x'"):
        parse_list_entry("*.*.x")
    with pytest.raises(PolicyError, match="not a string"):
        parse_list_entry(None)  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="aaaa'"):
        parse_list_entry("a" * 300 + " ")  # shown truncated


def test_host_list_parse_fail_closed():
    assert HostList.parse(["example.org", "*.example.net"]).entries[1].kind is EntryKind.SUFFIX
    with pytest.raises(PolicyError, match="'\\*'"):
        HostList.parse(["example.org", "*", "example.net"])
    with pytest.raises(PolicyError):
        HostList.parse(["example.org", ""])
    with pytest.raises(PolicyError):
        HostList.parse("example.org")  # a string is not a list of entries


def test_host_list_bool():
    assert not HostList()
    assert not HostList.parse([])
    assert HostList.parse(["example.org"])
    assert HostList.parse(iter(["example.org"]))


@pytest.fixture
def host_list():
    return HostList.parse(
        [
            "docs.example.org",
            "api.example.org:8443",
            "*.example.net",
            "*.example.com:443",
            "192.0.2.1",
            "192.0.2.2:8080",
            "2001:db8::1",
            "[2001:db8::2]:443",
        ]
    )


@pytest.mark.parametrize(
    ("host", "port", "matched"),
    [
        ("docs.example.org", 443, "docs.example.org"),
        ("DOCS.example.org.", 80, "docs.example.org"),
        ("docs.example.org", 1234, "docs.example.org"),  # no port in entry: any port
        ("example.org", 443, None),
        ("x.docs.example.org", 443, None),  # name entries are exact
        ("api.example.org", 8443, "api.example.org:8443"),
        ("api.example.org", 443, None),
        ("a.example.net", 443, "*.example.net"),
        ("a.b.example.net", 80, "*.example.net"),
        ("example.net", 443, None),  # never the apex
        ("badexample.net", 443, None),
        ("example.net.evil.org", 443, None),
        ("www.example.com", 443, "*.example.com:443"),
        ("www.example.com", 80, None),
        ("example.com", 443, None),
        ("192.0.2.1", 80, "192.0.2.1"),
        ("192.0.2.2", 8080, "192.0.2.2:8080"),
        ("192.0.2.2", 80, None),
        ("192.0.2.3", 80, None),
        ("[2001:db8::1]", 443, "2001:db8::1"),
        ("[2001:DB8:0:0::1]", 443, "2001:db8::1"),
        ("[2001:db8::2]", 443, "[2001:db8::2]:443"),
        ("[2001:db8::2]", 80, None),
        ("[::ffff:192.0.2.1]", 80, None),  # a mapped address is not the IPv4 entry
    ],
)
def test_match_host(host_list, host, port, matched):
    entry = host_list.match_host(parse_host(host), port)
    assert (entry.raw if entry else None) == matched


def test_name_entries_never_match_addresses(host_list):
    only_names = HostList.parse(["192-0-2-1.example.org", "*.example.org"])
    assert only_names.match_host(parse_host("192.0.2.1"), 80) is None
    assert only_names.match_address(IPv4Address("192.0.2.1"), 80) is None
    assert host_list.match_host(parse_host("1.1.1.1"), 80) is None


@pytest.mark.parametrize(
    ("address", "port", "matched"),
    [
        (IPv4Address("192.0.2.1"), 443, "192.0.2.1"),
        (IPv4Address("192.0.2.2"), 8080, "192.0.2.2:8080"),
        (IPv4Address("192.0.2.2"), 8081, None),
        (IPv6Address("2001:db8::1"), 80, "2001:db8::1"),
        (IPv6Address("2001:db8::2"), 443, "[2001:db8::2]:443"),
        (IPv6Address("2001:db8::2"), 444, None),
        (IPv6Address("::ffff:192.0.2.1"), 443, None),
        (IPv6Address("::192.0.2.1"), 443, None),
        (IPv4Address("203.0.113.1"), 443, None),
    ],
)
def test_match_address(host_list, address, port, matched):
    entry = host_list.match_address(address, port)
    assert (entry.raw if entry else None) == matched


def test_first_matching_entry_wins():
    hl = HostList.parse(["*.example.org:8443", "a.example.org", "*.example.org"])
    assert hl.match_host(parse_host("a.example.org"), 443).raw == "a.example.org"
    assert hl.match_host(parse_host("a.example.org"), 8443).raw == "*.example.org:8443"
    assert hl.match_host(parse_host("b.example.org"), 80).raw == "*.example.org"


def test_list_entry_matches_port():
    assert ListEntry(EntryKind.NAME, "a", None, None, "a").matches_port(1)
    assert ListEntry(EntryKind.NAME, "a", None, 80, "a:80").matches_port(80)
    assert not ListEntry(EntryKind.NAME, "a", None, 80, "a:80").matches_port(81)


@pytest.mark.unmeasured("a property: the table tests of this module cover these lines")
@given(st.text(max_size=60))
@example("*.example.org:443")
@example("[2001:db8::1]:8443")
def test_parse_list_entry_arbitrary_text(raw):
    try:
        entry = parse_list_entry(raw)
    except PolicyError:
        return
    assert entry.raw == raw
    assert raw.isascii() and raw.strip() == raw
    assert "*" not in entry.value
    # the canonical form parses to the same entry
    if entry.kind is EntryKind.SUFFIX:
        text = "*." + entry.value
    elif entry.address is not None and entry.address.version == 6:
        text = f"[{entry.value}]"
    else:
        text = entry.value
    if entry.port is not None:
        text += f":{entry.port}"
    again = parse_list_entry(text)
    assert (again.kind, again.value, again.address, again.port) == (
        entry.kind,
        entry.value,
        entry.address,
        entry.port,
    )
