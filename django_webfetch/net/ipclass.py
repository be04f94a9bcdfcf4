"""Classify IP addresses: is this a public destination, and if not, what is it?

DESIGN.md §3.  We deliberately ship our own table instead of relying on
``ipaddress``'s ``is_private``/``is_global``/``is_reserved``: those change between Python
releases and miss CGNAT, ``fec0::/10``, ``3fff::/20``, 6to4 and the NAT64 forms.

The table is compiled once into disjoint integer intervals (sorted starts + ``bisect``), the
most specific (longest) prefix winning where ranges nest, so one lookup costs a few hundred
nanoseconds instead of the ~16 µs of a loop over ``ipaddress`` network objects.

Category strings are stable: the guard uses them in reason codes ``address_class:<category>``.
"""

from __future__ import annotations

import bisect
import functools
import ipaddress
from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv6Address, IPv6Network

from .errors import PolicyError

__all__ = [
    "CATEGORIES",
    "METADATA_ADDRESSES",
    "NAT64_PREFIX_LENGTHS",
    "PRIVATE_ALLOWABLE",
    "PUBLIC",
    "IpAddressClassifier",
    "classifier_for",
    "classify",
    "decode_nat64",
    "is_metadata",
    "parse_nat64_prefixes",
]

PUBLIC = "public"

#: Every non-public category the classifier can return.
CATEGORIES: frozenset[str] = frozenset(
    {
        "unspecified",
        "this_network",
        "loopback",
        "private",
        "shared",
        "link_local",
        "metadata",
        "ietf_protocol",
        "documentation",
        "benchmarking",
        "multicast",
        "reserved",
        "broadcast",
        "ula",
        "site_local",
        "ipv4_mapped",
        "ipv4_compatible",
        "ipv4_translated",
        "6to4",
        "teredo",
        "nat64",
        "discard",
        "orchid",
        "not_global_unicast",
    }
)

#: Categories an operator may open for named hosts (``EgressPolicy.allow_private_hosts``).
#: ``metadata`` is never among them.
PRIVATE_ALLOWABLE: frozenset[str] = frozenset({"loopback", "private", "shared", "ula"})

#: Cloud instance-metadata endpoints: refused in every mode, even where private access is
#: granted, because they hand out credentials.
METADATA_ADDRESSES: frozenset[IPv4Address | IPv6Address] = frozenset(
    {
        IPv4Address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        IPv4Address("169.254.170.2"),  # AWS ECS task metadata / credentials
        IPv6Address("fd00:ec2::254"),  # AWS IMDS over IPv6
        IPv6Address("fd20:ce::254"),  # GCP metadata over IPv6
        IPv4Address("100.100.100.200"),  # Alibaba Cloud
        IPv4Address("192.0.0.192"),  # Oracle Cloud (OCI)
        IPv4Address("168.63.129.16"),  # Azure WireServer
    }
)

_METADATA_V4: frozenset[int] = frozenset(int(a) for a in METADATA_ADDRESSES if a.version == 4)
_METADATA_V6: frozenset[int] = frozenset(int(a) for a in METADATA_ADDRESSES if a.version == 6)

# IPv4 special-purpose ranges (IANA IPv4 Special-Purpose Address Registry, RFC 6890).
# Where ranges nest, the longer prefix wins; everything not listed is public.
_V4_TABLE: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "this_network"),  # RFC 791 §3.2, RFC 1122 §3.2.1.3
    ("0.0.0.0/32", "unspecified"),  # RFC 1122 §3.2.1.3 ("this host")
    ("10.0.0.0/8", "private"),  # RFC 1918
    ("100.64.0.0/10", "shared"),  # RFC 6598 carrier-grade NAT
    ("127.0.0.0/8", "loopback"),  # RFC 1122 §3.2.1.3
    ("169.254.0.0/16", "link_local"),  # RFC 3927
    ("172.16.0.0/12", "private"),  # RFC 1918
    ("192.0.0.0/24", "ietf_protocol"),  # RFC 6890 §2.2.2 (incl. 192.0.0.8, DS-Lite, PCP, ...)
    ("192.0.2.0/24", "documentation"),  # RFC 5737 TEST-NET-1
    ("192.88.99.0/24", "reserved"),  # RFC 7526: deprecated 6to4 relay anycast
    ("192.168.0.0/16", "private"),  # RFC 1918
    ("198.18.0.0/15", "benchmarking"),  # RFC 2544
    ("198.51.100.0/24", "documentation"),  # RFC 5737 TEST-NET-2
    ("203.0.113.0/24", "documentation"),  # RFC 5737 TEST-NET-3
    ("224.0.0.0/4", "multicast"),  # RFC 5771
    ("240.0.0.0/4", "reserved"),  # RFC 1112 §4 (class E)
    ("255.255.255.255/32", "broadcast"),  # RFC 919, RFC 8190
)

# IPv6 (IANA IPv6 Special-Purpose Address Registry, RFC 6890; RFC 4291 §2.4).  Only global
# unicast 2000::/3 (RFC 4291 §2.4, RFC 3587) can be public; the rest of ::/0 is
# "not_global_unicast" unless a more specific category applies.
_V6_TABLE: tuple[tuple[str, str], ...] = (
    ("::/0", "not_global_unicast"),
    ("2000::/3", PUBLIC),
    ("::/128", "unspecified"),  # RFC 4291 §2.5.2
    ("::1/128", "loopback"),  # RFC 4291 §2.5.3
    ("::/96", "ipv4_compatible"),  # RFC 4291 §2.5.5.1 (deprecated)
    ("::ffff:0:0/96", "ipv4_mapped"),  # RFC 4291 §2.5.5.2
    ("::ffff:0:0:0/96", "ipv4_translated"),  # RFC 2765 §2.1 (SIIT)
    ("64:ff9b::/96", "nat64"),  # RFC 6052 §2.1 well-known prefix
    ("64:ff9b:1::/48", "nat64"),  # RFC 8215 local-use translation prefix
    ("100::/64", "discard"),  # RFC 6666
    ("2001::/23", "ietf_protocol"),  # RFC 2928
    ("2001::/32", "teredo"),  # RFC 4380
    ("2001:2::/48", "benchmarking"),  # RFC 5180
    ("2001:10::/28", "orchid"),  # RFC 4843 (deprecated ORCHID)
    ("2001:20::/28", "orchid"),  # RFC 7343 ORCHIDv2
    ("2001:db8::/32", "documentation"),  # RFC 3849
    ("2002::/16", "6to4"),  # RFC 3056
    ("3fff::/20", "documentation"),  # RFC 9637
    ("fc00::/7", "ula"),  # RFC 4193
    ("fe80::/10", "link_local"),  # RFC 4291 §2.5.6
    ("fec0::/10", "site_local"),  # RFC 3879 (deprecated)
    ("ff00::/8", "multicast"),  # RFC 4291 §2.7
)

#: Prefix lengths RFC 6052 §2.2 defines for IPv4-embedded IPv6 addresses.
NAT64_PREFIX_LENGTHS: frozenset[int] = frozenset({32, 40, 48, 56, 64, 96})

# Where a declared NAT64 prefix may lie: global unicast (a network-specific prefix from the
# operator's space, RFC 6052 §2.3), ULA, or the well-known / local-use prefixes.  A prefix
# anywhere else (link-local, multicast, loopback, mapped, ...) would make the classifier
# approve addresses that are not routed through a translator at all.
_NAT64_ALLOWED_SPACE: tuple[IPv6Network, ...] = (
    IPv6Network("2000::/3"),
    IPv6Network("fc00::/7"),
    IPv6Network("64:ff9b::/96"),
    IPv6Network("64:ff9b:1::/48"),
)

_Table = tuple[list[int], list[str]]


def _compile(entries: Sequence[tuple[str, str]], bits: int, default: str) -> _Table:
    """Flatten nested prefixes into disjoint intervals; the longest prefix wins."""
    nets: list[tuple[int, int, int, str]] = []
    for text, category in entries:
        net = ipaddress.ip_network(text)
        first = int(net.network_address)
        nets.append((first, first + net.num_addresses - 1, net.prefixlen, category))
    nets.extend((a, a, bits, "metadata") for a in (_METADATA_V4 if bits == 32 else _METADATA_V6))
    cuts = {0}
    for first, last, _plen, _cat in nets:
        cuts.add(first)
        if last + 1 < 1 << bits:
            cuts.add(last + 1)
    starts: list[int] = []
    cats: list[str] = []
    for start in sorted(cuts):
        best_len = -1
        category = default
        for first, last, plen, cat in nets:
            if first <= start <= last and plen > best_len:
                best_len, category = plen, cat
        if cats and cats[-1] == category:
            continue  # merge with the previous interval
        starts.append(start)
        cats.append(category)
    return starts, cats


_V4_STARTS, _V4_CATS = _compile(_V4_TABLE, 32, PUBLIC)
_V6_STARTS, _V6_CATS = _compile(_V6_TABLE, 128, "not_global_unicast")


def is_metadata(address: IPv4Address | IPv6Address) -> bool:
    """True for a cloud instance-metadata address (refused in every mode)."""
    if address.version == 4:
        return int(address) in _METADATA_V4
    return int(address) in _METADATA_V6


def _check_nat64_prefix(prefix: IPv6Network, text: str) -> None:
    if prefix.prefixlen not in NAT64_PREFIX_LENGTHS:
        raise PolicyError(
            f"NAT64 prefix {text!r}: length /{prefix.prefixlen} is not one of "
            "/32, /40, /48, /56, /64, /96 (RFC 6052 §2.2)"
        )
    if not any(prefix.subnet_of(space) for space in _NAT64_ALLOWED_SPACE):
        raise PolicyError(
            f"NAT64 prefix {text!r} lies outside global unicast 2000::/3, ULA fc00::/7, "
            "64:ff9b::/96 and 64:ff9b:1::/48"
        )


def parse_nat64_prefixes(entries: Iterable[str]) -> tuple[IPv6Network, ...]:
    """Parse operator-declared NAT64 prefixes (``"64:ff9b::/96"``).

    Strict: an RFC 6052 length, no bits set after the prefix, no zone id, and inside global
    unicast, ULA or the well-known/local-use prefixes.  One bad entry rejects the whole list.
    """
    checked: object = entries
    if isinstance(checked, str):
        raise PolicyError("NAT64 prefixes must be a list of strings, not one string")
    result: list[IPv6Network] = []
    for entry in entries:
        entry_obj: object = entry
        if not isinstance(entry_obj, str):
            raise PolicyError(f"NAT64 prefix {entry!r} is not a string")
        shown = entry[:100]
        if "/" not in entry or "%" in entry or entry != entry.strip():
            raise PolicyError(f"NAT64 prefix {shown!r} must look like '64:ff9b::/96'")
        address_text, _, length_text = entry.partition("/")
        if not length_text.isascii() or not length_text.isdigit() or len(length_text) > 3:
            raise PolicyError(f"NAT64 prefix {shown!r} has an invalid length")
        try:
            # strict=True: bits set outside the prefix are an error, not silently masked.
            prefix = IPv6Network(f"{address_text}/{int(length_text)}", strict=True)
        except ValueError as exc:
            raise PolicyError(f"NAT64 prefix {shown!r} is not a valid IPv6 prefix") from exc
        _check_nat64_prefix(prefix, shown)
        result.append(prefix)
    return tuple(result)


def _decode_int(value: int, plen: int) -> int:
    """The embedded IPv4 (RFC 6052 §2.2) of a 128-bit integer under a prefix length."""
    if plen == 96:
        return value & 0xFFFFFFFF
    # For /32../64 the 32 IPv4 bits start right after the prefix but skip bits 64..71
    # (the "u" octet), which must be zero (RFC 6052 §2.2, RFC 4291 §2.5.1).
    # Byte 8 (bits 64..71) is the u octet.
    data = value.to_bytes(16, "big")
    start = plen // 8
    octets = bytes(b for i, b in enumerate(data[start : start + 5], start) if i != 8)
    return int.from_bytes(octets[:4], "big")


def decode_nat64(address: IPv6Address, prefix: IPv6Network) -> IPv4Address:
    """Extract the IPv4 address embedded in ``address`` under ``prefix`` (RFC 6052 §2.2).

    The suffix bits are ignored, the "u" octet (bits 64..71) is skipped.  Raises
    ``ValueError`` if ``address`` is not inside ``prefix`` or the length is not one of
    RFC 6052's.
    """
    if prefix.prefixlen not in NAT64_PREFIX_LENGTHS:
        raise ValueError(f"/{prefix.prefixlen} is not an RFC 6052 prefix length")
    if address not in prefix:
        raise ValueError(f"{address} is not inside {prefix}")
    return IPv4Address(_decode_int(int(address), prefix.prefixlen))


class IpAddressClassifier:
    """Classify an address as ``PUBLIC`` or one refused category.

    With ``nat64_prefixes`` (operator-declared, DESIGN.md §3), an address inside a declared
    prefix is classified by its embedded IPv4 address; inside several, every decoding must
    be public, else the first non-public category is returned.  Without them the NAT64
    ranges are refused whole (``"nat64"``).  Metadata addresses come first in every mode.
    """

    __slots__ = ("_nat64", "nat64_prefixes")

    def __init__(self, nat64_prefixes: Sequence[IPv6Network] = ()) -> None:
        checked: list[IPv6Network] = []
        for prefix in nat64_prefixes:
            prefix_obj: object = prefix
            if not isinstance(prefix_obj, IPv6Network):
                raise PolicyError(f"NAT64 prefix {prefix!r} is not an IPv6Network")
            _check_nat64_prefix(prefix, str(prefix))
            checked.append(prefix)
        self.nat64_prefixes: tuple[IPv6Network, ...] = tuple(checked)
        # (shift, network bits >> shift, prefix length) for a fast containment test.
        self._nat64: tuple[tuple[int, int, int], ...] = tuple(
            (128 - p.prefixlen, int(p.network_address) >> (128 - p.prefixlen), p.prefixlen)
            for p in checked
        )

    def __repr__(self) -> str:
        return f"IpAddressClassifier(nat64_prefixes={list(map(str, self.nat64_prefixes))!r})"

    def classify(self, address: IPv4Address | IPv6Address) -> str:
        value = int(address)
        if address.version == 4:
            # Metadata addresses are painted into the table as /32s (most specific wins).
            return _V4_CATS[bisect.bisect_right(_V4_STARTS, value) - 1]
        if self._nat64 and value not in _METADATA_V6:
            result = self._classify_nat64(value)
            if result is not None:
                return result
        return _V6_CATS[bisect.bisect_right(_V6_STARTS, value) - 1]

    def embedded(self, address: IPv4Address | IPv6Address) -> tuple[IPv4Address, ...]:
        """Every IPv4 address the classifier decodes from ``address``.

        One per declared NAT64 prefix that contains it (RFC 6052 §2.2); none for an IPv4
        address or without declared prefixes.  Address list entries (deny, allow, own site)
        are compared against these as well as against ``address`` itself, so a NAT64 form
        of a listed IPv4 address is the same destination.  Other embedded forms (mapped,
        compatible, translated, 6to4, Teredo) are never decoded: they are refused whole.
        """
        if address.version == 4 or not self._nat64:
            return ()
        value = int(address)
        return tuple(
            IPv4Address(_decode_int(value, plen))
            for shift, bits, plen in self._nat64
            if value >> shift == bits
        )

    def _classify_nat64(self, value: int) -> str | None:
        """The category through declared NAT64 prefixes, or None if none contains it.

        Inside several (overlapping) prefixes the *worst* decoding wins: metadata first,
        then any category that no grant can open, then an openable private one, so that an
        address is accepted only if the IPv4 decoded under every matching prefix is.
        """
        found: list[str] = []
        for shift, bits, plen in self._nat64:
            if value >> shift != bits:
                continue
            if plen <= 64 and (value >> 56) & 0xFF:
                # A non-zero u octet is not a valid IPv4-embedded address (RFC 6052 §2.2).
                found.append("nat64")
                continue
            found.append(_V4_CATS[bisect.bisect_right(_V4_STARTS, _decode_int(value, plen)) - 1])
        if not found:
            return None
        return min(found, key=_severity)


def _severity(category: str) -> int:
    """Lower is worse: metadata, then what no grant opens, then openable, then public."""
    if category == "metadata":
        return 0
    if category == PUBLIC:
        return 3
    return 2 if category in PRIVATE_ALLOWABLE else 1


_DEFAULT = IpAddressClassifier()


@functools.lru_cache(maxsize=64)
def classifier_for(prefixes: tuple[str, ...]) -> IpAddressClassifier:
    """The classifier of the declared NAT64 ``prefixes`` (as written in the settings),
    built once per set; ``PolicyError`` for an invalid prefix (not cached)."""
    return IpAddressClassifier(parse_nat64_prefixes(prefixes))


def classify(address: IPv4Address | IPv6Address | str) -> str:
    """Classify with the default classifier (no NAT64 prefixes declared).

    A string is parsed with ``ipaddress.ip_address``; raises ``ValueError`` if it is not an
    IP address.
    """
    if isinstance(address, str):
        address = ipaddress.ip_address(address)
    return _DEFAULT.classify(address)
