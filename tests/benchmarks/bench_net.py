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

import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.benchmarks._netns import in_namespace, setup_network, start_dns, use_resolv_conf

ADDRESS = "11.0.0.10"
DNS_ADDRESS = "11.0.0.53"
NAME = "bench.example"

#: The slow stream of the async section: about 1 s per stream.
STREAM_CHUNKS, STREAM_DELAY = 50, 0.02
#: Concurrent requests on one event loop (the provider loop's case: 40 editors at once).
STREAMS = 40

PAGES = {
    "/50k": b"<html><body>" + b"<p>lorem ipsum dolor sit amet</p>\n" * 1500 + b"</body></html>",
    "/2m": b"<html><body>" + b"<p>lorem ipsum dolor sit amet</p>\n" * 62000 + b"</body></html>",
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/stream"):
            # A model's answer: STREAM_CHUNKS small chunks, STREAM_DELAY apart.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(STREAM_CHUNKS * 12))
            self.send_header("Connection", "close")
            self.end_headers()
            for _ in range(STREAM_CHUNKS):
                self.wfile.write(b"twelve bytes")
                self.wfile.flush()
                time.sleep(STREAM_DELAY)
            return
        body = PAGES[self.path.split("?")[0]][: 2 * 1024 * 1024 - 1]
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


def _paired(
    base: Callable[[], object], test: Callable[[], object], rounds: int = 21, seconds: float = 0.15
) -> tuple[float, float, float]:
    """(baseline req/s, tested req/s, ratio): short rounds of each, alternating, and the
    median of the per-round ratios, so that load from other processes on a shared machine
    hits both sides alike instead of skewing whichever ran during it."""
    base()
    test()
    base_rates: list[float] = []
    test_rates: list[float] = []
    for index in range(rounds):
        pair = []
        for fn in (base, test) if index % 2 == 0 else (test, base):
            runs = 0
            start = time.perf_counter()
            while runs < 3 or time.perf_counter() - start < seconds:
                fn()
                runs += 1
            pair.append((fn, runs / (time.perf_counter() - start)))
        rates = dict(pair)
        base_rates.append(rates[base])
        test_rates.append(rates[test])
    ratios = [t / b for b, t in zip(base_rates, test_rates, strict=True)]
    return statistics.median(base_rates), statistics.median(test_rates), statistics.median(ratios)


def _per_call_us(fn: Callable[[], object], n: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def serve() -> None:
    """The benchmark's HTTP server (run in a child process inside the namespace)."""
    # A listen backlog for STREAMS connections at once (the default 5 drops SYNs: the
    # client retries after a second, which measures the backlog, not the client).
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer((ADDRESS, 80), _Handler)
    server.daemon_threads = True
    server.serve_forever()


def _wait_for_port(host: str, port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the benchmark server on {host}:{port} did not start")


def main() -> None:
    if not in_namespace("tests.benchmarks.bench_net", mounts=True):
        return
    setup_network((ADDRESS, DNS_ADDRESS))
    # The DNS-included baseline: plain httpx resolving the name through getaddrinfo, asking
    # the same DNS server as the guard (glibc asks A and AAAA in parallel).
    use_resolv_conf(DNS_ADDRESS)
    start_dns(NAME, ADDRESS, listen=DNS_ADDRESS, process=True)
    # The servers run in child processes, as real ones would: server threads in the
    # measuring process would compete with the client for the GIL, which penalises every
    # Python-level step of the client (the guard, our resolver) against C getaddrinfo.
    server = subprocess.Popen(
        [sys.executable, "-c", "from tests.benchmarks.bench_net import serve; serve()"]
    )
    _wait_for_port(ADDRESS, 80)

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
        base, guarded, ratio = _paired(
            lambda u=literal: plain.get(u).content,
            lambda u=literal: fetch(u, policy=policy).body,
        )
        base_dns, with_dns, ratio_dns = _paired(
            lambda u=named: plain.get(u).content,
            lambda u=named: fetch(u, policy=policy).body,
        )
        print(
            f"{'fetch ' + path + ' req/s, DNS excluded':<44} {base:>12.1f} {guarded:>12.1f} "
            f"{ratio:>7.3f}"
        )
        print(
            f"{'fetch ' + path + ' req/s, DNS included':<44} {base_dns:>12.1f} "
            f"{with_dns:>12.1f} {ratio_dns:>7.3f}   (both resolve via {DNS_ADDRESS})"
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
    _async_section(policy)
    server.kill()
    server.wait()


class _ThreadHop:
    """The async transport before issue 33 item 2 (the baseline): the sync transport run
    in anyio worker threads, one hop for the request and one for every chunk."""

    def __new__(cls, policy: object) -> object:
        import anyio.to_thread
        import httpx

        from django_webfetch.net.guarded import GuardedTransport

        class Stream(httpx.AsyncByteStream):
            def __init__(self, inner: httpx.SyncByteStream) -> None:
                self._inner = inner

            async def __aiter__(self):  # type: ignore[no-untyped-def]
                iterator = iter(self._inner)
                while True:
                    chunk = await anyio.to_thread.run_sync(next, iterator, None)
                    if chunk is None:
                        return
                    yield chunk

            async def aclose(self) -> None:
                await anyio.to_thread.run_sync(self._inner.close)

        class Transport(httpx.AsyncBaseTransport):
            def __init__(self) -> None:
                self._sync = GuardedTransport(policy)  # type: ignore[arg-type]

            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                body = await request.aread()
                sync_request = httpx.Request(
                    request.method, request.url, headers=request.headers, content=body
                )
                response = await anyio.to_thread.run_sync(self._sync.handle_request, sync_request)
                assert isinstance(response.stream, httpx.SyncByteStream)
                return httpx.Response(
                    status_code=response.status_code,
                    headers=response.headers,
                    stream=Stream(response.stream),
                )

        return Transport()


def _async_section(policy: object) -> None:
    """``STREAMS`` requests at once on one event loop: old (thread hop) vs new (native)."""
    import asyncio
    import threading

    import anyio.to_thread
    import httpx

    from django_webfetch.net.guarded import AsyncGuardedTransport

    def run(kind: str, path: str) -> tuple[float, int]:
        """(wall seconds, peak threads above the start) for STREAMS requests of ``path``."""

        async def scenario() -> tuple[float, int]:
            # The provider loop widened anyio's limiter to its bound (ProviderLoop, before).
            anyio.to_thread.current_default_thread_limiter().total_tokens = STREAMS + 8
            transport = _ThreadHop(policy) if kind == "old" else AsyncGuardedTransport(policy)
            before = threading.active_count()
            peak = before
            done = asyncio.Event()

            async def sample() -> None:
                nonlocal peak
                while not done.is_set():
                    peak = max(peak, threading.active_count())
                    await asyncio.sleep(0.005)

            async with httpx.AsyncClient(transport=transport, timeout=60) as client:  # type: ignore[arg-type]

                async def one() -> int:
                    async with client.stream("GET", f"http://{NAME}{path}") as response:
                        return len(await response.aread())

                sampler = asyncio.create_task(sample())
                start = time.perf_counter()
                sizes = await asyncio.gather(*(one() for _ in range(STREAMS)))
                took = time.perf_counter() - start
                done.set()
                await sampler
            assert all(sizes), sizes
            return took, peak - before

        return asyncio.run(scenario())

    print()
    print(f"{STREAMS} requests at once on one event loop: old = the sync transport in anyio")
    print("threads (before issue 33 item 2), new = AsyncGuardedTransport (native)")
    print(f"{'what':<44} {'old':>12} {'new':>12} {'old/new':>7}")
    for path, label, rounds in (
        ("/stream", "slow streams (50 x 20 ms)", 3),
        ("/50k", "50 KiB pages", 7),
    ):
        old_runs, new_runs = [], []
        for index in range(rounds):
            for kind in ("old", "new") if index % 2 == 0 else ("new", "old"):
                (old_runs if kind == "old" else new_runs).append(run(kind, path))
        old_s = statistics.median(t for t, _ in old_runs)
        new_s = statistics.median(t for t, _ in new_runs)
        old_threads = max(n for _, n in old_runs)
        new_threads = max(n for _, n in new_runs)
        print(f"{label + ', wall s':<44} {old_s:>12.3f} {new_s:>12.3f} {old_s / new_s:>7.2f}")
        print(f"{label + ', peak extra threads':<44} {old_threads:>12} {new_threads:>12}")


if __name__ == "__main__":
    main()
