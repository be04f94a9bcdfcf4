"""The benchmarks' private network namespace: re-run a module under ``unshare -n`` and put
public-looking lab addresses on that namespace's loopback, so nothing leaves the machine."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable

_ENV_FLAG = "WEBFETCH_BENCH_IN_NETNS"


def in_namespace(module: str, *, cwd: str | None = None, mounts: bool = False) -> bool:
    """True inside the namespace; otherwise run ``module`` there, wait, and return False.

    ``mounts``: a private mount namespace too (``unshare -m``), so ``use_resolv_conf`` can
    point the system resolver at the namespace's DNS server without touching the host.
    """
    if os.environ.get(_ENV_FLAG) == "1":
        return True
    env = dict(os.environ, **{_ENV_FLAG: "1"})
    flags = ["-n", "-m"] if mounts else ["-n"]
    if subprocess.call(["unshare", *flags, sys.executable, "-m", module], env=env, cwd=cwd) != 0:
        raise SystemExit(f"{module} failed")
    return False


def setup_network(addresses: Iterable[str]) -> None:
    """Bring ``lo`` up with ``addresses`` on it, and refuse to go on unless it is alone."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for address in addresses:
        subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "lo"], check=True)
    # /sys/class/net still shows the parent's interfaces without a new mount namespace;
    # ask the kernel through ip(8) instead.
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    if [line.split(": ")[1] for line in links.splitlines()] != ["lo"]:
        raise SystemExit("refusing to benchmark: the namespace has more than lo")


def use_resolv_conf(nameserver: str) -> None:
    """Bind-mount a resolv.conf naming ``nameserver`` over /etc/resolv.conf (needs the
    private mount namespace of ``in_namespace(mounts=True)``), so that a baseline client
    resolving with ``getaddrinfo`` asks the same DNS server as the guard."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".resolv.conf", delete=False) as handle:
        handle.write(f"nameserver {nameserver}\noptions timeout:1 attempts:1\n")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    subprocess.run(["mount", "--bind", handle.name, "/etc/resolv.conf"], check=True)


def start_dns(name: str, address: str, *, listen: str, process: bool = False) -> None:
    """A DNS server on ``listen``:53 (a daemon thread) answering ``name`` (and every name
    under it) A ``address``.

    ``process``: run it in a child process instead, as a real resolver would be: a Python
    server thread in the measuring process competes with the client for the GIL, which
    penalises a Python-level client against C ``getaddrinfo`` (that releases the GIL for
    the whole lookup) and measures the bench, not the resolver.
    """
    if process:
        import atexit
        import time

        code = (
            "import sys, time; sys.path.insert(0, sys.argv[1]);"
            "from tests.benchmarks._netns import start_dns;"
            "start_dns(sys.argv[2], sys.argv[3], listen=sys.argv[4]);"
            "time.sleep(10**6)"
        )
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        child = subprocess.Popen([sys.executable, "-c", code, root, name, address, listen])
        atexit.register(child.kill)
        time.sleep(1.0)  # let it bind
        return
    from dnslib import QTYPE, RR, A
    from dnslib.server import BaseResolver, DNSLogger, DNSServer

    qname = name.rstrip(".") + "."

    class Resolver(BaseResolver):  # type: ignore[misc]
        def resolve(self, request, handler):  # type: ignore[no-untyped-def]
            reply = request.reply()
            asked = str(request.q.qname)
            # The name and every name under it (bench_faults' slow.<name>).
            if (asked == qname or asked.endswith("." + qname)) and request.q.qtype == QTYPE.A:
                reply.add_answer(RR(asked, QTYPE.A, rdata=A(address), ttl=0))
            return reply

    logger = DNSLogger(log="-request,-reply,-truncated,-error,-recv,-send,-data")
    DNSServer(Resolver(), address=listen, port=53, logger=logger).start_thread()
