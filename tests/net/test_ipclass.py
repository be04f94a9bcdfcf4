from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from django_webfetch.net import ipclass
from django_webfetch.net.errors import PolicyError
from django_webfetch.net.ipclass import (
    CATEGORIES,
    METADATA_ADDRESSES,
    PRIVATE_ALLOWABLE,
    PUBLIC,
    IpAddressClassifier,
    classify,
    decode_nat64,
    is_metadata,
    parse_nat64_prefixes,
)

NGU = "not_global_unicast"

# Effective intervals (first, last, category, category just before, category just after).
# None: no neighbour (start or end of the address space).
V4_RANGES = [
    ("0.0.0.0", "0.0.0.0", "unspecified", None, "this_network"),
    ("0.0.0.1", "0.255.255.255", "this_network", "unspecified", PUBLIC),
    ("10.0.0.0", "10.255.255.255", "private", PUBLIC, PUBLIC),
    ("100.64.0.0", "100.127.255.255", "shared", PUBLIC, PUBLIC),
    ("127.0.0.0", "127.255.255.255", "loopback", PUBLIC, PUBLIC),
    ("169.254.0.0", "169.254.255.255", "link_local", PUBLIC, PUBLIC),
    ("172.16.0.0", "172.31.255.255", "private", PUBLIC, PUBLIC),
    ("192.0.0.0", "192.0.0.255", "ietf_protocol", PUBLIC, PUBLIC),
    ("192.0.2.0", "192.0.2.255", "documentation", PUBLIC, PUBLIC),
    ("192.88.99.0", "192.88.99.255", "reserved", PUBLIC, PUBLIC),
    ("192.168.0.0", "192.168.255.255", "private", PUBLIC, PUBLIC),
    ("198.18.0.0", "198.19.255.255", "benchmarking", PUBLIC, PUBLIC),
    ("198.51.100.0", "198.51.100.255", "documentation", PUBLIC, PUBLIC),
    ("203.0.113.0", "203.0.113.255", "documentation", PUBLIC, PUBLIC),
    ("224.0.0.0", "239.255.255.255", "multicast", PUBLIC, "reserved"),
    ("240.0.0.0", "255.255.255.254", "reserved", "multicast", "broadcast"),
    ("255.255.255.255", "255.255.255.255", "broadcast", "reserved", None),
]

F = "ffff:ffff:ffff:ffff:ffff:ffff"
V6_RANGES = [
    ("::", "::", "unspecified", None, "loopback"),
    ("::1", "::1", "loopback", "unspecified", "ipv4_compatible"),
    ("::2", "::ffff:ffff", "ipv4_compatible", "loopback", NGU),
    ("::ffff:0:0", "::ffff:ffff:ffff", "ipv4_mapped", NGU, NGU),
    ("::ffff:0:0:0", "::ffff:0:ffff:ffff", "ipv4_translated", NGU, NGU),
    ("64:ff9b::", "64:ff9b::ffff:ffff", "nat64", NGU, NGU),
    ("64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "nat64", NGU, NGU),
    ("100::", "100::ffff:ffff:ffff:ffff", "discard", NGU, NGU),
    ("2000::", "2000:" + F + ":ffff", "public", NGU, "teredo"),
    ("2001::", "2001:0:" + F, "teredo", PUBLIC, "ietf_protocol"),
    ("2001:1::", "2001:1:" + F, "ietf_protocol", "teredo", "benchmarking"),
    (
        "2001:2::",
        "2001:2:0:ffff:ffff:ffff:ffff:ffff",
        "benchmarking",
        "ietf_protocol",
        "ietf_protocol",
    ),
    ("2001:2:1::", "2001:f:" + F, "ietf_protocol", "benchmarking", "orchid"),
    ("2001:10::", "2001:1f:" + F, "orchid", "ietf_protocol", "orchid"),
    ("2001:20::", "2001:2f:" + F, "orchid", "orchid", "ietf_protocol"),
    ("2001:30::", "2001:1ff:" + F, "ietf_protocol", "orchid", PUBLIC),
    ("2001:db8::", "2001:db8:" + F, "documentation", PUBLIC, PUBLIC),
    ("2002::", "2002:ffff:" + F, "6to4", PUBLIC, PUBLIC),
    ("3fff::", "3fff:fff:" + F, "documentation", PUBLIC, PUBLIC),
    ("3fff:1000::", "3fff:ffff:" + F, "public", "documentation", NGU),
    ("4000::", "fbff:ffff:" + F, NGU, PUBLIC, "ula"),
    ("fc00::", "fdff:ffff:" + F, "ula", NGU, NGU),
    ("fe80::", "febf:ffff:" + F, "link_local", NGU, "site_local"),
    ("fec0::", "feff:ffff:" + F, "site_local", "link_local", "multicast"),
    ("ff00::", "ffff:ffff:" + F, "multicast", "site_local", None),
]

RANGE_IDS = [r[0] for r in V4_RANGES + V6_RANGES]


@pytest.mark.parametrize(
    ("first", "last", "category", "before", "after"), V4_RANGES + V6_RANGES, ids=RANGE_IDS
)
def test_range_first_middle_last_and_neighbours(first, last, category, before, after):
    lo = ipaddress.ip_address(first)
    hi = ipaddress.ip_address(last)
    cls = type(lo)
    middle = cls(int(lo) + (int(hi) - int(lo)) // 2)
    assert classify(lo) == category
    assert classify(middle) == category
    assert classify(hi) == category
    if before is None:
        assert int(lo) == 0
    else:
        assert classify(cls(int(lo) - 1)) == before
    if after is None:
        assert int(hi) == (1 << lo.max_prefixlen) - 1
    else:
        assert classify(cls(int(hi) + 1)) == after


@pytest.mark.parametrize(
    ("address", "category"),
    [
        ("8.8.8.8", PUBLIC),
        ("1.1.1.1", PUBLIC),
        ("93.184.216.34", PUBLIC),
        ("100.63.255.255", PUBLIC),
        ("100.128.0.0", PUBLIC),
        ("172.15.255.255", PUBLIC),
        ("172.32.0.0", PUBLIC),
        ("192.0.1.0", PUBLIC),
        ("192.0.0.9", "ietf_protocol"),  # globally reachable per IANA, refused all the same
        ("192.0.0.170", "ietf_protocol"),
        ("2a00:1450:4001:80b::200e", PUBLIC),
        ("2606:4700::1111", PUBLIC),
        ("2001:1::1", "ietf_protocol"),
        ("2001:4:112::1", "ietf_protocol"),
        ("5f00::1", NGU),  # RFC 9602 SRv6 SIDs: outside 2000::/3
        ("::ffff:127.0.0.1", "ipv4_mapped"),
        ("::ffff:8.8.8.8", "ipv4_mapped"),
        ("::127.0.0.1", "ipv4_compatible"),
        ("::8.8.8.8", "ipv4_compatible"),
        ("::ffff:0:8.8.8.8", "ipv4_translated"),
        ("64:ff9b::8.8.8.8", "nat64"),
        ("64:ff9b::127.0.0.1", "nat64"),
        ("2002:7f00:1::", "6to4"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "teredo"),
        ("fe80::1", "link_local"),
        ("fe80::1%eth0", "link_local"),
        ("fd12:3456::1", "ula"),
        ("ff02::1", "multicast"),
    ],
)
def test_examples(address, category):
    assert classify(address) == category
    assert classify(ipaddress.ip_address(address)) == category


@pytest.mark.parametrize("address", sorted(METADATA_ADDRESSES, key=str), ids=str)
def test_metadata_addresses(address):
    assert is_metadata(address)
    assert classify(address) == "metadata"
    assert classify(str(address)) == "metadata"
    cls = type(address)
    for neighbour in (cls(int(address) - 1), cls(int(address) + 1)):
        assert not is_metadata(neighbour)
        assert classify(neighbour) == reference_classify(neighbour) != "metadata"


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "fd20:ce::254",
        "100.100.100.200",
        "192.0.0.192",
        "168.63.129.16",
    ],
)
def test_metadata_list_is_the_documented_one(address):
    assert ipaddress.ip_address(address) in METADATA_ADDRESSES


def test_metadata_first_even_with_nat64_prefix_covering_it():
    classifier = IpAddressClassifier(parse_nat64_prefixes(["fd00:ec2::/64", "fd20:ce::/96"]))
    assert classifier.classify(IPv6Address("fd00:ec2::254")) == "metadata"
    assert classifier.classify(IPv6Address("fd20:ce::254")) == "metadata"
    assert classifier.classify(IPv4Address("169.254.169.254")) == "metadata"


def test_private_allowable():
    assert {"loopback", "private", "shared", "ula"} == PRIVATE_ALLOWABLE
    assert "metadata" not in PRIVATE_ALLOWABLE
    assert PRIVATE_ALLOWABLE <= CATEGORIES


def test_categories_cover_the_tables():
    used = set(ipclass._V4_CATS) | set(ipclass._V6_CATS)
    assert used - {PUBLIC} == CATEGORIES
    assert PUBLIC not in CATEGORIES


def test_classify_rejects_junk_string():
    with pytest.raises(ValueError):
        classify("not-an-ip")
    with pytest.raises(ValueError):
        classify("0177.0.0.1")  # ipaddress refuses leading zeros


from tests.net._reference import REFERENCE, reference_classify  # noqa: E402


def _boundary_addresses():
    out = []
    for network, _category in REFERENCE:
        first = int(network.network_address)
        last = int(network.broadcast_address)
        cls = type(network.network_address)
        top = (1 << network.max_prefixlen) - 1
        out += [cls(v) for v in (first - 1, first, last, last + 1) if 0 <= v <= top]
    return out


@pytest.mark.parametrize("address", _boundary_addresses(), ids=str)
def test_table_agrees_with_reference_at_every_boundary(address):
    assert classify(address) == reference_classify(address)


@given(st.ip_addresses())
@example(IPv4Address("169.254.169.254"))
def test_table_agrees_with_reference(address):
    assert classify(address) == reference_classify(address)


@given(st.ip_addresses(network="2001::/16"))
def test_table_agrees_with_reference_dense_2001(address):
    assert classify(address) == reference_classify(address)


# --- NAT64 (RFC 6052) ---------------------------------------------------------------------

# RFC 6052 §2.4: 192.0.2.33 embedded under each prefix length.
RFC6052_VECTORS = [
    ("2001:db8::/32", "2001:db8:c000:221::"),
    ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
    ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"),
    ("2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"),
    ("2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"),
    ("2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"),
    ("64:ff9b::/96", "64:ff9b::192.0.2.33"),
]


def encode_nat64(v4, prefix):
    """Test-side RFC 6052 §2.2 encoder (skips the u octet, byte 8)."""
    data = bytearray(prefix.network_address.packed)
    octets = list(v4.packed)
    index = prefix.prefixlen // 8
    while octets:
        if index != 8:
            data[index] = octets.pop(0)
        index += 1
    return IPv6Address(bytes(data))


@pytest.mark.parametrize(("prefix", "address"), RFC6052_VECTORS)
def test_rfc6052_vectors(prefix, address):
    network = IPv6Network(prefix)
    assert decode_nat64(IPv6Address(address), network) == IPv4Address("192.0.2.33")
    assert encode_nat64(IPv4Address("192.0.2.33"), network) == IPv6Address(address)
    classifier = IpAddressClassifier(parse_nat64_prefixes([prefix]))
    assert classifier.classify(IPv6Address(address)) == "documentation"


@given(st.ip_addresses(v=4), st.sampled_from([IPv6Network(p) for p, _ in RFC6052_VECTORS]))
def test_nat64_round_trip(v4, prefix):
    encoded = encode_nat64(v4, prefix)
    assert decode_nat64(encoded, prefix) == v4
    classifier = IpAddressClassifier([prefix])
    if v4 not in METADATA_ADDRESSES:
        assert classifier.classify(encoded) == classify(v4)
    else:
        assert classifier.classify(encoded) == "metadata"


def test_decode_ignores_suffix_and_u_octet():
    prefix = IPv6Network("2001:db8:122:344::/64")
    assert decode_nat64(IPv6Address("2001:db8:122:344:ffc0:2:21ff:ffff"), prefix) == (
        IPv4Address("192.0.2.33")
    )


def test_decode_errors():
    with pytest.raises(ValueError, match="not inside"):
        decode_nat64(IPv6Address("2001:db9::1"), IPv6Network("2001:db8::/32"))
    with pytest.raises(ValueError, match="RFC 6052"):
        decode_nat64(IPv6Address("2001:db8::1"), IPv6Network("2001:db8::/33"))


@pytest.mark.parametrize(
    ("address", "declared", "expected"),
    [
        ("64:ff9b::808:808", (), "nat64"),
        ("64:ff9b::7f00:1", (), "nat64"),
        ("64:ff9b:1::808:808", (), "nat64"),
        ("64:ff9b::808:808", ("64:ff9b::/96",), PUBLIC),
        ("64:ff9b::7f00:1", ("64:ff9b::/96",), "loopback"),
        ("64:ff9b::a00:1", ("64:ff9b::/96",), "private"),
        ("64:ff9b::a9fe:a9fe", ("64:ff9b::/96",), "metadata"),
        ("64:ff9b::6464:64c8", ("64:ff9b::/96",), "metadata"),
        ("64:ff9b::ffff:ffff", ("64:ff9b::/96",), "broadcast"),
        ("64:ff9b:1::808:808", ("64:ff9b::/96",), "nat64"),  # not declared: refused whole
        ("64:ff9b:1:808:8:800::", ("64:ff9b:1::/48",), PUBLIC),
        ("64:ff9b:1:808:8:800::", ("64:ff9b::/96",), "nat64"),
        ("2001:db8:64::808:808", ("2001:db8:64::/96",), PUBLIC),
        ("2001:db8:65::808:808", ("2001:db8:64::/96",), "documentation"),
        ("fd00:64::808:808", ("fd00:64::/96",), PUBLIC),
        ("fd00:64::c0a8:101", ("fd00:64::/96",), "private"),
        # u octet (bits 64..71) must be zero (RFC 6052 §2.2)
        ("2001:db8:122:344:1c0:2:2100:0", ("2001:db8:122:344::/64",), "nat64"),
        ("2001:db8:122:344:c0:2:2100:0", ("2001:db8:122:344::/64",), "documentation"),
        ("2001:db8:808:8:8::", ("2001:db8::/32",), PUBLIC),
        ("2001:db8:808:8:108::", ("2001:db8::/32",), "nat64"),
        ("8.8.8.8", ("64:ff9b::/96",), PUBLIC),
        ("::1", ("64:ff9b::/96",), "loopback"),
    ],
)
def test_nat64_classification(address, declared, expected):
    classifier = IpAddressClassifier(parse_nat64_prefixes(declared))
    assert classifier.classify(ipaddress.ip_address(address)) == expected


def test_overlapping_declared_prefixes_every_decoding_must_be_public():
    wide = "2001:db8::/32"
    narrow = "2001:db8:122::/48"
    public_both = encode_nat64(IPv4Address("8.8.8.8"), IPv6Network(narrow))
    assert decode_nat64(public_both, IPv6Network(wide)) == IPv4Address("1.34.8.8")
    classifier = IpAddressClassifier(parse_nat64_prefixes([wide, narrow]))
    assert classifier.classify(public_both) == PUBLIC

    private_narrow = encode_nat64(IPv4Address("10.0.0.1"), IPv6Network(narrow))
    assert classify(decode_nat64(private_narrow, IPv6Network(wide))) == PUBLIC
    assert classifier.classify(private_narrow) == "private"
    assert (
        IpAddressClassifier(parse_nat64_prefixes([narrow, wide])).classify(private_narrow)
        == "private"
    )

    # both decodings non-public: the worst category wins, whatever the order (a grant
    # may open loopback for a host, never "this network")
    both = IPv6Address("2001:db8:7f:0:1::")
    assert decode_nat64(both, IPv6Network("2001:db8::/32")) == IPv4Address("0.127.0.0")
    assert decode_nat64(both, IPv6Network("2001:db8::/40")) == IPv4Address("127.0.0.1")
    first_32 = IpAddressClassifier(parse_nat64_prefixes(["2001:db8::/32", "2001:db8::/40"]))
    first_40 = IpAddressClassifier(parse_nat64_prefixes(["2001:db8::/40", "2001:db8::/32"]))
    assert first_32.classify(both) == "this_network"
    assert first_40.classify(both) == "this_network"


@pytest.mark.parametrize("order", [1, -1])
def test_overlapping_prefixes_metadata_beats_an_openable_decoding(order):
    """Under an allow-private grant, "private" is acceptable: a second decoding that is a
    metadata address must still refuse the address, in either declaration order."""
    narrow, wide = IPv6Network("2001:db8:a00::/48"), IPv6Network("2001:db8::/32")
    address = encode_nat64(IPv4Address("169.254.169.254"), narrow)
    assert decode_nat64(address, wide) == IPv4Address("10.0.169.254")  # private
    assert classify(decode_nat64(address, wide)) == "private"
    classifier = IpAddressClassifier(parse_nat64_prefixes([str(narrow), str(wide)][::order]))
    assert classifier.classify(address) == "metadata"


def test_parse_nat64_prefixes_all_rfc_lengths():
    texts = [p for p, _ in RFC6052_VECTORS] + ["64:ff9b:1::/48", "fd00::/40"]
    parsed = parse_nat64_prefixes(texts)
    assert parsed == tuple(IPv6Network(t) for t in texts)
    assert parse_nat64_prefixes([]) == ()
    assert parse_nat64_prefixes(iter(["64:FF9B::/96"])) == (IPv6Network("64:ff9b::/96"),)


@pytest.mark.parametrize(
    "entry",
    [
        "64:ff9b::/95",
        "64:ff9b::/0",
        "2001:db8::/24",
        "2001:db8::/33",
        "2001:db8::/128",
        "2001:db8::1/96",  # bits set outside the prefix
        "2001:db8:1::/32",
        "2001:db8::100:0:0/64",
        "64:ff9b::1:0:0/96",
        "64:ff9b::",  # no length
        "64:ff9b::/",
        "64:ff9b::/+96",
        "64:ff9b::/ 96",
        "64:ff9b::/9６",
        "64:ff9b::/0096",
        "64:ff9b::/abc",
        " 64:ff9b::/96",
        "64:ff9b::/96 ",
        "fe80::%eth0/64",
        "192.0.2.0/24",
        "::ffff:0:0/96",  # not a place a translator lives
        "::/96",
        "fe80::/64",
        "ff0e::/96",
        "fec0::/64",
        "100::/64",
        "nonsense",
        "",
    ],
)
def test_parse_nat64_prefixes_rejects(entry):
    with pytest.raises(PolicyError):
        parse_nat64_prefixes([entry])
    # one bad entry rejects the whole list
    with pytest.raises(PolicyError):
        parse_nat64_prefixes(["64:ff9b::/96", entry, "2001:db8::/32"])


def test_parse_nat64_prefixes_rejects_bad_types():
    with pytest.raises(PolicyError):
        parse_nat64_prefixes("64:ff9b::/96")
    with pytest.raises(PolicyError):
        parse_nat64_prefixes([IPv6Network("64:ff9b::/96")])  # type: ignore[list-item]


def test_classifier_validates_networks():
    with pytest.raises(PolicyError):
        IpAddressClassifier(["64:ff9b::/96"])  # type: ignore[list-item]
    with pytest.raises(PolicyError):
        IpAddressClassifier([IPv4Network("192.0.2.0/24")])  # type: ignore[list-item]
    with pytest.raises(PolicyError):
        IpAddressClassifier([IPv6Network("2001:db8::/33")])
    with pytest.raises(PolicyError):
        IpAddressClassifier([IPv6Network("fe80::/64")])


def test_classifier_repr_and_prefixes():
    classifier = IpAddressClassifier([IPv6Network("64:ff9b::/96")])
    assert classifier.nat64_prefixes == (IPv6Network("64:ff9b::/96"),)
    assert "64:ff9b::/96" in repr(classifier)
    assert IpAddressClassifier().nat64_prefixes == ()
