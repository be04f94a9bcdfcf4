"""Benchmark ``ipclass.classify`` against a naive loop over ``ipaddress`` networks.

Run: ``.venv/bin/python -m tests.benchmarks.bench_ipclass [count]`` (default 1,000,000).
Both run in the same process over the same mixed IPv4/IPv6 addresses; the baseline is
checked to give the same answers on a sample, so the comparison is like for like.
"""

from __future__ import annotations

import ipaddress
import random
import sys
import time
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

from django_webfetch.net.ipclass import METADATA_ADDRESSES, PUBLIC, classify

_NETWORKS: list[tuple[IPv4Network | IPv6Network, str]] = sorted(
    (
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
        ]  # fmt: skip
    ),
    key=lambda item: -item[0].prefixlen,
)
_GLOBAL_UNICAST = IPv6Network("2000::/3")


def naive_classify(address: IPv4Address | IPv6Address) -> str:
    """The baseline: a loop over ``ipaddress`` network objects, most specific first."""
    if address in METADATA_ADDRESSES:
        return "metadata"
    for network, category in _NETWORKS:
        if address.version == network.version and address in network:
            return category
    if isinstance(address, IPv6Address) and address not in _GLOBAL_UNICAST:
        return "not_global_unicast"
    return PUBLIC


def make_addresses(count: int, seed: int = 6052) -> list[IPv4Address | IPv6Address]:
    """Mixed addresses: 60% IPv4, 40% IPv6; a quarter of each from special ranges."""
    rng = random.Random(seed)
    special = [net for net, _ in _NETWORKS]
    out: list[IPv4Address | IPv6Address] = []
    for _ in range(count):
        v4 = rng.random() < 0.6
        if rng.random() < 0.25:
            net = rng.choice([n for n in special if (n.version == 4) == v4])
            value = int(net.network_address) + rng.randrange(net.num_addresses)
            out.append(IPv4Address(value) if v4 else IPv6Address(value))
        elif v4:
            out.append(IPv4Address(rng.getrandbits(32)))
        else:
            out.append(IPv6Address((0x2000 << 112) | rng.getrandbits(125)))
    return out


def _time(
    function: Callable[[IPv4Address | IPv6Address], str],
    addresses: list[IPv4Address | IPv6Address],
) -> float:
    start = time.perf_counter_ns()
    for address in addresses:
        function(address)
    return (time.perf_counter_ns() - start) / len(addresses)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    count = int(args[0]) if args else 1_000_000
    addresses = make_addresses(count)
    sample = addresses[:20_000]
    mismatches = [a for a in sample if classify(a) != naive_classify(a)]
    if mismatches:
        raise SystemExit(f"classifier and baseline disagree on {mismatches[:5]}")
    ours = _time(classify, addresses)
    baseline = _time(naive_classify, addresses)
    print(f"addresses:       {count:,} mixed IPv4/IPv6")
    print(f"ipclass.classify {ours:8.0f} ns/address")
    print(f"naive ipaddress  {baseline:8.0f} ns/address")
    print(f"speed-up         {baseline / ours:8.1f}x")


if __name__ == "__main__":
    main()
