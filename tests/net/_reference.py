"""An independent restatement of DESIGN.md §3's address table, as a naive reference.

A loop over ``ipaddress`` network objects, most specific first: used by the classifier's
tests (the shipped table must agree with it at every range boundary) and as the baseline of
``tests/benchmarks/bench_ipclass.py``.  Deliberately not derived from the shipped table.
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from django_webfetch.net.ipclass import METADATA_ADDRESSES, PUBLIC

__all__ = ["REFERENCE", "reference_classify"]

REFERENCE: list[tuple[IPv4Network | IPv6Network, str]] = sorted(
    [
        (ipaddress.ip_network(net), category)
        for net, category in [
            ("0.0.0.0/32", "unspecified"),
            ("0.0.0.0/8", "this_network"),
            ("10.0.0.0/8", "private"),
            ("172.16.0.0/12", "private"),
            ("192.168.0.0/16", "private"),
            ("100.64.0.0/10", "shared"),
            ("127.0.0.0/8", "loopback"),
            ("169.254.0.0/16", "link_local"),
            ("192.0.0.0/24", "ietf_protocol"),
            ("192.0.2.0/24", "documentation"),
            ("198.51.100.0/24", "documentation"),
            ("203.0.113.0/24", "documentation"),
            ("198.18.0.0/15", "benchmarking"),
            ("224.0.0.0/4", "multicast"),
            ("255.255.255.255/32", "broadcast"),
            ("240.0.0.0/4", "reserved"),
            ("192.88.99.0/24", "reserved"),
            ("::/128", "unspecified"),
            ("::1/128", "loopback"),
            ("::/96", "ipv4_compatible"),
            ("::ffff:0:0/96", "ipv4_mapped"),
            ("::ffff:0:0:0/96", "ipv4_translated"),
            ("64:ff9b::/96", "nat64"),
            ("64:ff9b:1::/48", "nat64"),
            ("100::/64", "discard"),
            ("2001:db8::/32", "documentation"),
            ("3fff::/20", "documentation"),
            ("2002::/16", "6to4"),
            ("2001::/32", "teredo"),
            ("2001:2::/48", "benchmarking"),
            ("2001:10::/28", "orchid"),
            ("2001:20::/28", "orchid"),
            ("2001::/23", "ietf_protocol"),
            ("fc00::/7", "ula"),
            ("fe80::/10", "link_local"),
            ("fec0::/10", "site_local"),
            ("ff00::/8", "multicast"),
        ]
    ],
    key=lambda item: -item[0].prefixlen,
)
_GLOBAL_UNICAST = IPv6Network("2000::/3")


def reference_classify(address: IPv4Address | IPv6Address) -> str:
    """The category of ``address`` by the naive loop."""
    if address in METADATA_ADDRESSES:
        return "metadata"
    for network, category in REFERENCE:
        if address.version == network.version and address in network:
            return category
    if isinstance(address, IPv6Address) and address not in _GLOBAL_UNICAST:
        return "not_global_unicast"
    return PUBLIC
