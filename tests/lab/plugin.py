"""pytest plugin: the network-namespace lab.

* ``pytest_configure`` moves the whole test process into a fresh network namespace (only
  ``lo``) before any test runs, so nothing under test can reach a real address.  Without
  root: lab tests are skipped, or, when ``CI=true``, the run aborts.
* The ``lab`` fixture (function scope) gives a test the lab DNS server, the HTTP/HTTPS
  servers and their logs, all reset per test; see :class:`Lab`.
* Every test that uses the ``lab`` fixture is marked ``lab``.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from . import audit, netns, workers
from .dns import DnsTable, make_servers
from .servers import Accept, HttpLog, Loop, RequestRecord, TlsMaterial, make_http_servers

__all__ = ["Lab", "LabSession"]

_SKIP_REASON: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _SKIP_REASON
    try:
        netns.enter()
    except netns.LabUnavailable as exc:
        if os.environ.get("CI") == "true":
            raise pytest.UsageError(
                f"the network-namespace test lab is required in CI but unavailable: {exc}"
            ) from exc
        _SKIP_REASON = f"network-namespace lab unavailable: {exc}"
    except netns.LabError as exc:
        raise pytest.UsageError(f"the test lab is unsafe, refusing to run: {exc}") from exc
    workers.configure_worker(
        config, netns.lab_dir() if netns.LAB_ACTIVE else tempfile.mkdtemp(prefix="webfetch-worker-")
    )
    audit.install()


def pytest_report_header(config: pytest.Config) -> str:
    if netns.LAB_ACTIVE:
        return "lab: private network namespace active (only lo)"
    return f"lab: INACTIVE ({_SKIP_REASON})"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "lab" in getattr(item, "fixturenames", ()) and item.get_closest_marker("lab") is None:
            item.add_marker(pytest.mark.lab)
        if _SKIP_REASON is not None and item.get_closest_marker("lab") is not None:
            item.add_marker(pytest.mark.skip(reason=_SKIP_REASON))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session is not None:
        _session.stop()
    workers.save_coverage()
    directory = os.environ.get("WEBFETCH_LAB_DIR")
    if (
        directory
        and netns.LAB_ACTIVE
        and netns.owns_lab_dir()
        and os.path.basename(directory).startswith("webfetch-lab-")
    ):
        shutil.rmtree(directory, ignore_errors=True)


# -- the running lab ----------------------------------------------------------------------
def _is_local_or_private(address: str) -> bool:
    """An independent (deliberately simple) table of non-public space, used as a backstop
    in fixture teardown; the real classifier is django_webfetch.net.ipclass."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return True
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    nets = (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "::/127",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
    )
    return any(ip in ipaddress.ip_network(net) for net in nets)


class LabSession:
    """DNS + HTTP(S) servers, started once per session on first use."""

    def __init__(self) -> None:
        directory = netns.lab_dir()
        self.table = DnsTable()
        self.log = HttpLog()
        self.tls = TlsMaterial(directory, netns.PUBLIC)
        dns_servers = make_servers((netns.DNS_V4, netns.DNS_V6), self.table)
        http_servers = make_http_servers(
            self.log, self.tls, netns.PUBLIC, (*netns.PRIVATE, *netns.LOOPBACK)
        )
        self.loop = Loop([*dns_servers, *http_servers])
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()


_session: LabSession | None = None
_session_lock = threading.Lock()


def _get_session() -> LabSession:
    global _session
    with _session_lock:
        if _session is None:
            _session = LabSession()
        return _session


class Lab:
    """What a lab test sees.  Everything is reset before each test.

    ``dns``          the DNS table: ``set``, ``cname``, ``sequence``, ``nxdomain``, ``nodata``,
                     ``servfail``, ``refused``, ``drop``; ``queries``, ``lookups(name)``
    ``nameservers``  ``("11.0.0.53",)``
    ``ca_file``      the session CA (PEM) that signed the servers' certificate
    ``policy(**kw)`` an ``EgressPolicy`` pointed at the lab DNS and CA
    ``url(host, path, scheme="http", port=None)``
    ``accepts(address=None, port=None)``, ``requests``, ``connects``, ``lookups``
    ``PUBLIC_V4``, ``PUBLIC_V6``, ``PUBLIC``, ``PRIVATE``, ``LOOPBACK``, ``DNS_V4``, ``DNS_V6``
    """

    PUBLIC_V4 = netns.PUBLIC_V4
    PUBLIC_V6 = netns.PUBLIC_V6
    PUBLIC = netns.PUBLIC
    PRIVATE = netns.PRIVATE
    LOOPBACK = netns.LOOPBACK
    DNS_V4 = netns.DNS_V4
    DNS_V6 = netns.DNS_V6
    HOSTS_ONLY_NAMES = netns.HOSTS_ONLY_NAMES
    #: Policy fields a lab test may not set: tests never relax the guard.
    FORBIDDEN_OVERRIDES = frozenset(
        {"allow_private_hosts", "allow_private_endpoints", "allow_via_proxy", "proxy"}
    )

    def __init__(self, session: LabSession) -> None:
        self._session = session
        self.dns = session.table
        self.nameservers: tuple[str, ...] = (netns.DNS_V4,)
        self.ca_file: str = session.tls.ca_file
        #: Set to True in a test that connects to a private-looking server on purpose.
        self.expect_private_accepts = False

    def reset(self) -> None:
        """Reset DNS table and every log (also for each hypothesis example)."""
        self.dns.reset()
        self._session.log.reset()
        audit.clear()

    # -- building requests -----------------------------------------------------------------
    def policy(self, **overrides: Any) -> Any:
        from django_webfetch.net import EgressPolicy

        forbidden = self.FORBIDDEN_OVERRIDES.intersection(overrides)
        if forbidden:
            raise AssertionError(f"lab tests must not relax the guard: {sorted(forbidden)}")
        overrides.setdefault("nameservers", self.nameservers)
        overrides.setdefault("ca_file", self.ca_file)
        # The lab must not depend on the runner's proxy variables.
        overrides.setdefault("proxy_env", ())
        return EgressPolicy(**overrides)

    @staticmethod
    def url(host: str, path: str = "/", scheme: str = "http", port: int | None = None) -> str:
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        if not path.startswith("/"):
            path = "/" + path
        return f"{scheme}://{host}{f':{port}' if port is not None else ''}{path}"

    # -- observing -------------------------------------------------------------------------
    def accepts(self, address: str | None = None, port: int | None = None) -> list[Accept]:
        return [
            a
            for a in list(self._session.log.accepts)
            if (address is None or a.local == address) and (port is None or a.port == port)
        ]

    def private_accepts(self) -> list[Accept]:
        return [a for a in self.accepts() if a.private]

    @property
    def requests(self) -> list[RequestRecord]:
        return list(self._session.log.requests)

    @property
    def server_errors(self) -> list[str]:
        return list(self._session.log.errors)

    @property
    def connects(self) -> list[audit.Connect]:
        return audit.connects()

    @property
    def lookups(self) -> list[audit.Lookup]:
        """System name lookups (``getaddrinfo``...) made by the test process."""
        return audit.lookups()

    def connected_addresses(self, *, include_dns: bool = False) -> set[str]:
        """Destinations of TCP connects (and, with ``include_dns``, of DNS packets)."""
        dns = {netns.DNS_V4, netns.DNS_V6}
        return {
            c.address
            for c in self.connects
            if include_dns or not (c.address in dns and c.port == 53)
        }

    def wait_requests_done(self, timeout: float = 10.0) -> None:
        """Wait until every logged request's handler has finished (bytes_sent is final)."""
        deadline = time.monotonic() + timeout
        for record in self.requests:
            record.done.wait(max(0.0, deadline - time.monotonic()))

    @staticmethod
    def wait_for(predicate: Any, timeout: float = 5.0) -> Any:
        """Poll ``predicate`` until it returns something truthy (server logs are written
        by other threads); returns its last value."""
        deadline = time.monotonic() + timeout
        while not (value := predicate()) and time.monotonic() < deadline:
            time.sleep(0.01)
        return value

    def check_lab_health(self) -> None:
        """The lab itself must not have failed (a DNS server exception is a lab bug)."""
        assert not self.dns.errors, f"lab DNS server errors: {self.dns.errors}"

    def check_no_private_traffic(self) -> None:
        if self.expect_private_accepts:
            return
        bad = [c for c in self.connects if c.event == "connect" and _is_local_or_private(c.address)]
        assert not bad, f"the test process connected to non-public addresses: {bad}"
        private = self.private_accepts()
        assert not private, f"a private-looking lab server accepted a connection: {private}"


@pytest.fixture(scope="session")
def lab_session() -> LabSession:
    if not netns.LAB_ACTIVE:
        pytest.skip(_SKIP_REASON or "network-namespace lab unavailable")
    return _get_session()


@pytest.fixture
def lab(lab_session: LabSession) -> Iterator[Lab]:
    instance = Lab(lab_session)
    instance.reset()
    yield instance
    instance.check_lab_health()
    instance.check_no_private_traffic()
