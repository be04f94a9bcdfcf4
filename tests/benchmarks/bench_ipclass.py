"""Benchmark ``ipclass.classify`` against a naive loop over ``ipaddress`` networks.

Run: ``.venv/bin/python -m tests.benchmarks.bench_ipclass [count]`` (default 1,000,000).
Both run in the same process over the same mixed IPv4/IPv6 addresses; the baseline is
checked to give the same answers on a sample, so the comparison is like for like.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from ipaddress import IPv4Address, IPv6Address

from django_webfetch.net.ipclass import classify
from tests.net._reference import REFERENCE, reference_classify

_NETWORKS = REFERENCE


def naive_classify(address: IPv4Address | IPv6Address) -> str:
    """The baseline: a loop over ``ipaddress`` network objects, most specific first."""
    return reference_classify(address)


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
