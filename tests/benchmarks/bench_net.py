"""Guarded fetch vs plain httpx, DNS cost, guard decision cost.

Run: ``.venv/bin/python -m tests.benchmarks.bench_net`` (as root).  The script re-executes
itself inside a fresh network namespace (``unshare -n``): a public-looking address goes on
that namespace's loopback with a real HTTP server and a real DNS server on it, so the guard
runs with its real, unweakened policy and nothing leaves the machine.

Both sides open a fresh connection per request (a pinned fetch never reuses another
destination's connection, so that is the fair baseline).  Figures are ratios against the
baseline measured in the same process, never absolute thresholds.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.benchmarks._netns import in_namespace, setup_network, start_dns, use_resolv_conf

ADDRESS = "11.0.0.10"
DNS_ADDRESS = "11.0.0.53"
NAME = "bench.example"

PAGES = {
    "/50k": b"<html><body>" + b"<p>lorem ipsum dolor sit amet</p>\n" * 1500 + b"</body></html>",
    "/2m": b"<html><body>" + b"<p>lorem ipsum dolor sit amet</p>\n" * 62000 + b"</body></html>",
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = PAGES[self.path.split("?")[0]][: 2 * 1024 * 1024 - 1]
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


def _rate(fn: Callable[[], object], seconds: float = 2.0, min_runs: int = 20) -> float:
    """Requests per second: the median of 5 rounds."""
    fn()  # warm up
    rounds = []
    for _ in range(5):
        runs = 0
        start = time.perf_counter()
        while runs < min_runs or time.perf_counter() - start < seconds / 5:
            fn()
            runs += 1
        rounds.append(runs / (time.perf_counter() - start))
    return statistics.median(rounds)


def _per_call_us(fn: Callable[[], object], n: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    if not in_namespace("tests.benchmarks.bench_net", mounts=True):
        return
    setup_network((ADDRESS, DNS_ADDRESS))
    # The DNS-included baseline: plain httpx resolving the name through getaddrinfo, asking
    # the same DNS server as the guard (glibc asks A and AAAA in parallel).
    use_resolv_conf(DNS_ADDRESS)
    start_dns(NAME, ADDRESS, listen=DNS_ADDRESS)
    server = ThreadingHTTPServer((ADDRESS, 80), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()

    import httpx

    from django_webfetch.net import EgressPolicy, UrlGuard, fetch
    from django_webfetch.net.resolve import DnsResolver

    policy = EgressPolicy(nameservers=(DNS_ADDRESS,), proxy_env=())
    plain = httpx.Client(
        transport=httpx.HTTPTransport(limits=httpx.Limits(max_keepalive_connections=0)),
        trust_env=False,
    )

    print(f"{'what':<44} {'baseline':>12} {'guarded':>12} {'ratio':>7}")
    for path in ("/50k", "/2m"):
        literal = f"http://{ADDRESS}{path}"
        named = f"http://{NAME}{path}"
        base = _rate(lambda u=literal: plain.get(u).content)
        guarded = _rate(lambda u=literal: fetch(u, policy=policy).body)
        base_dns = _rate(lambda u=named: plain.get(u).content)
        with_dns = _rate(lambda u=named: fetch(u, policy=policy).body)
        print(
            f"{'fetch ' + path + ' req/s, DNS excluded':<44} {base:>12.1f} {guarded:>12.1f} "
            f"{guarded / base:>7.3f}"
        )
        print(
            f"{'fetch ' + path + ' req/s, DNS included':<44} {base_dns:>12.1f} "
            f"{with_dns:>12.1f} {with_dns / base_dns:>7.3f}   (both resolve via {DNS_ADDRESS})"
        )

    resolver = DnsResolver((DNS_ADDRESS,), 53)
    dns_us = _per_call_us(lambda: resolver.resolve(NAME, timeout=5), 300)
    print(f"{'DNS A+AAAA via dnspython, us/lookup':<44} {'':>12} {dns_us:>12.1f}")

    guard = UrlGuard()
    url = f"http://{ADDRESS}/docs/page?q=1&lang=en"
    baseline_us = _per_call_us(lambda: httpx.URL(url), 20000)
    guard_us = _per_call_us(lambda: guard.check(url, policy), 20000)
    listed = EgressPolicy(
        allowlist=tuple(f"h{i}.example.org" for i in range(50)) + (ADDRESS,),
        denylist=tuple(f"*.d{i}.example" for i in range(50)),
        proxy_env=(),
    )
    listed_us = _per_call_us(lambda: guard.check(url, listed), 5000)
    print(
        f"{'guard decision (no DNS), us':<44} {baseline_us:>12.2f} {guard_us:>12.2f} "
        f"{guard_us / baseline_us:>7.1f}   (baseline: httpx.URL parse)"
    )
    print(
        f"{'guard decision, 51+50 list entries, us':<44} {baseline_us:>12.2f} {listed_us:>12.2f} "
        f"{listed_us / baseline_us:>7.1f}"
    )
    server.shutdown()


if __name__ == "__main__":
    main()
