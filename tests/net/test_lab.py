"""Self-tests of the network-namespace lab (tests/lab/): if these fail, no lab test means
anything."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys

import dns.message
import dns.query
import dns.rcode
import dns.resolver
import httpx
import pytest

from tests.lab import audit, netns

pytestmark = pytest.mark.lab


def _resolver(lab) -> dns.resolver.Resolver:
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = list(lab.nameservers)
    resolver.lifetime = 2.0
    resolver.timeout = 1.0
    resolver.cache = None
    return resolver


def _addresses(answer) -> list[str]:
    return sorted(rr.address for rr in answer)


# -- the namespace ------------------------------------------------------------------------
def test_namespace_has_only_lo(lab):
    assert sorted(os.listdir("/sys/class/net")) == ["lo"]
    assert [name for _, name in socket.if_nameindex()] == ["lo"]
    assert netns.LAB_ACTIVE


def test_every_thread_is_inside_the_lab_namespace(lab):
    own = os.stat("/proc/self/ns/net").st_ino
    checked = 0
    for task in os.listdir("/proc/self/task"):
        try:
            namespace = os.stat(f"/proc/self/task/{task}/ns/net").st_ino
        except FileNotFoundError:
            continue  # the thread ended between listdir() and stat(): it sends nothing
        assert namespace == own
        checked += 1
    assert checked >= 1


def test_no_route_out(lab):
    routes = subprocess.run(
        ["ip", "route", "show"], capture_output=True, text=True, check=True
    ).stdout
    assert routes.strip() == ""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        with pytest.raises(OSError):
            sock.connect(("11.0.0.99", 80))  # public-looking, on no interface


def test_subprocesses_inherit_the_namespace(lab):
    out = subprocess.run(
        [sys.executable, "-c", "import socket; print([n for _, n in socket.if_nameindex()])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "['lo']"


def test_etc_hosts_is_the_labs_file(lab):
    with open("/etc/hosts") as fh:
        text = fh.read()
    assert text == netns.ETC_HOSTS
    assert "etc-hosts-only.example" in text
    # The system resolver does see it (so a fetcher that used getaddrinfo would too)...
    assert socket.gethostbyname("etc-hosts-only.example") == "11.0.0.66"
    # ...but the lab DNS server does not know the name.
    with pytest.raises(dns.resolver.NXDOMAIN):
        _resolver(lab).resolve("etc-hosts-only.example", "A")


def test_lab_addresses_are_on_lo(lab):
    out = subprocess.run(
        ["ip", "-o", "addr", "show", "dev", "lo"], capture_output=True, text=True, check=True
    ).stdout
    for address in (*lab.PUBLIC, *lab.PRIVATE, lab.DNS_V4, lab.DNS_V6):
        assert f" {address}/" in out


def test_lab_policy_refuses_to_relax_the_guard(lab):
    for field in ("allow_private_hosts", "allow_via_proxy", "proxy"):
        with pytest.raises(AssertionError, match="must not relax"):
            lab.policy(**{field: ("x",)})
    policy = lab.policy(total_timeout=3)
    assert policy.nameservers == ("11.0.0.53",)
    assert policy.ca_file == lab.ca_file
    assert policy.total_timeout == 3


def test_url_helper(lab):
    assert lab.url("a.lab.example", "/page") == "http://a.lab.example/page"
    assert lab.url("2606:4700:10::10", "x", "https", 8443) == "https://[2606:4700:10::10]:8443/x"


# -- DNS ----------------------------------------------------------------------------------
@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_dns_answers_from_the_table(lab, tcp):
    lab.dns.set("a.lab.example", a=["11.0.0.10", "11.0.0.11"], aaaa=["2606:4700:10::10"])
    resolver = _resolver(lab)
    assert _addresses(resolver.resolve("a.lab.example", "A", tcp=tcp)) == ["11.0.0.10", "11.0.0.11"]
    assert _addresses(resolver.resolve("A.Lab.Example.", "AAAA", tcp=tcp)) == ["2606:4700:10::10"]
    transports = {q.transport for q in lab.dns.queries}
    assert transports == {"tcp" if tcp else "udp"}
    assert lab.dns.lookups("a.lab.example", "A") == 1
    assert lab.dns.lookups("a.lab.example", "AAAA") == 1


def test_dns_aaaa_in_any_notation(lab):
    lab.dns.set("m.lab.example", aaaa=["::ffff:11.0.0.10", "2606:4700:10:0:0:0:0:10"])
    answer = _resolver(lab).resolve("m.lab.example", "AAAA")
    assert _addresses(answer) == ["2606:4700:10::10", "::ffff:11.0.0.10"]
    with pytest.raises(ValueError):
        lab.dns.set("bad.lab.example", a=["not-an-address"])
    assert lab.dns.errors == []


def test_dns_over_ipv6(lab):
    lab.dns.set("v6.lab.example", a=["11.0.0.12"])
    query = dns.message.make_query("v6.lab.example", "A")
    response = dns.query.udp(query, lab.DNS_V6, timeout=2)
    assert [rr.address for rrset in response.answer for rr in rrset] == ["11.0.0.12"]


def test_dns_ttl(lab):
    lab.dns.set("ttl0.lab.example", a=["11.0.0.10"])
    lab.dns.set("ttl300.lab.example", a=["11.0.0.10"], ttl=300)
    resolver = _resolver(lab)
    ttls = [
        resolver.resolve(name, "A").rrset for name in ("ttl0.lab.example", "ttl300.lab.example")
    ]
    assert [rrset.ttl if rrset else None for rrset in ttls] == [0, 300]


def test_dns_cname_chain(lab):
    lab.dns.cname("www.lab.example", "mid.lab.example")
    lab.dns.cname("mid.lab.example", "end.lab.example")
    lab.dns.set("end.lab.example", a=["11.0.0.13"])
    answer = _resolver(lab).resolve("www.lab.example", "A")
    assert _addresses(answer) == ["11.0.0.13"]
    assert str(answer.canonical_name) == "end.lab.example."


def test_dns_sequence_rebinding(lab):
    lab.dns.sequence("rebind.lab.example", [{"a": ["11.0.0.10"]}, {"a": ["10.0.0.10"]}])
    resolver = _resolver(lab)
    assert _addresses(resolver.resolve("rebind.lab.example", "A")) == ["11.0.0.10"]
    assert _addresses(resolver.resolve("rebind.lab.example", "A")) == ["10.0.0.10"]
    assert _addresses(resolver.resolve("rebind.lab.example", "A")) == ["10.0.0.10"]  # repeats


def test_dns_negative_answers(lab):
    lab.dns.nxdomain("nx.lab.example")
    lab.dns.nodata("nodata.lab.example")
    lab.dns.set("empty.lab.example")
    lab.dns.set("v4only.lab.example", a=["11.0.0.10"])
    resolver = _resolver(lab)
    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver.resolve("nx.lab.example", "A")
    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver.resolve("never-configured.lab.example", "A")
    for name in ("nodata.lab.example", "empty.lab.example"):
        with pytest.raises(dns.resolver.NoAnswer):
            resolver.resolve(name, "A")
    with pytest.raises(dns.resolver.NoAnswer):
        resolver.resolve("v4only.lab.example", "AAAA")


def test_dns_servfail(lab):
    lab.dns.servfail("sf.lab.example")
    query = dns.message.make_query("sf.lab.example", "A")
    response = dns.query.udp(query, lab.DNS_V4, timeout=2)
    assert response.rcode() == dns.rcode.SERVFAIL
    with pytest.raises(dns.resolver.NoNameservers):
        _resolver(lab).resolve("sf.lab.example", "A")


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_dns_drop_times_out(lab, tcp):
    lab.dns.drop("drop.lab.example")
    query = dns.message.make_query("drop.lab.example", "A")
    send = dns.query.tcp if tcp else dns.query.udp
    with pytest.raises(dns.exception.Timeout):
        send(query, lab.DNS_V4, timeout=0.5)
    assert lab.dns.lookups("drop.lab.example") == 1


def test_dns_table_is_reset_between_tests_part_1(lab):
    lab.dns.set("leak.lab.example", a=["11.0.0.10"])


def test_dns_table_is_reset_between_tests_part_2(lab):
    with pytest.raises(dns.resolver.NXDOMAIN):
        _resolver(lab).resolve("leak.lab.example", "A")


@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_queries_sent_before_a_reset_never_reach_the_next_test(lab, tcp):
    # The class of ci38's one failure: the second query of an A+AAAA pair whose first answer
    # ended a test's lookup was recorded in the next test.  A burst leaves queries queued on
    # the server's socket (or accepted and unread) when the reset runs.
    lab.dns.sequence("burst.lab.example", [{"a": ["11.0.0.10"]}, {"a": ["11.0.0.11"]}])
    senders = []
    for _ in range(200 if not tcp else 20):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
        wire = dns.message.make_query("burst.lab.example", "A").to_wire()
        if tcp:
            sock.connect((lab.DNS_V4, 53))
            sock.sendall(len(wire).to_bytes(2, "big") + wire)
        else:
            sock.sendto(wire, (lab.DNS_V4, 53))
        senders.append(sock)
    lab.reset()
    lab.dns.sequence("burst.lab.example", [{"a": ["11.0.0.12"]}, {"a": ["11.0.0.13"]}])
    for sock in senders:
        sock.close()
    # The earlier queries are dropped: neither recorded nor advancing the new sequence.
    answer = _resolver(lab).resolve("burst.lab.example", "A")
    assert _addresses(answer) == ["11.0.0.12"]
    assert [q.name for q in lab.dns.queries] == ["burst.lab.example"]


# -- HTTP(S) servers ----------------------------------------------------------------------
def test_plain_connect_is_logged(lab):
    with socket.create_connection(("11.0.0.10", 80), timeout=2) as sock:
        local = sock.getsockname()
        sock.sendall(b"GET /plain HTTP/1.1\r\nHost: a.lab.example\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 ")
    assert data.endswith(b"hello from the lab\n")
    accepts = lab.accepts("11.0.0.10")
    assert [(a.port, a.peer, a.peer_port) for a in accepts] == [(80, local[0], local[1])]
    assert [(r.method, r.path, r.host) for r in lab.requests] == [
        ("GET", "/plain", "a.lab.example")
    ]
    assert [(c.event, c.address, c.port) for c in lab.connects] == [("connect", "11.0.0.10", 80)]


@pytest.mark.parametrize("address", [*netns.PUBLIC_V4[::5], *netns.PUBLIC_V6[::5]])
@pytest.mark.parametrize("port", [80, 8080])
def test_http_on_every_public_address(lab, address, port):
    response = httpx.get(lab.url(address, "/echo", port=port), trust_env=False, timeout=5)
    assert response.status_code == 200
    assert f"local: {address} {port}" in response.text
    assert [a.local for a in lab.accepts()] == [address]


@pytest.mark.parametrize("address", [*netns.PRIVATE, *netns.LOOPBACK])
def test_private_servers_exist_and_log_accepts(lab, address):
    lab.expect_private_accepts = True
    with socket.create_connection((address, 80), timeout=2):
        pass
    assert lab.wait_for(lambda: lab.accepts())
    assert [(a.local, a.private) for a in lab.accepts()] == [(address, True)]
    assert lab.private_accepts()


def test_teardown_flags_private_traffic(lab):
    with socket.create_connection(("10.0.0.10", 80), timeout=2):
        pass
    assert lab.wait_for(lambda: lab.private_accepts())
    with pytest.raises(AssertionError, match="non-public addresses"):
        lab.check_no_private_traffic()
    audit.clear()  # the server side is flagged too, independently of the audit hook
    with pytest.raises(AssertionError, match="private-looking lab server"):
        lab.check_no_private_traffic()
    lab.reset()


@pytest.mark.parametrize("name", ["a.lab.example", "lab.example", "11.0.0.10", "2606:4700:10::10"])
@pytest.mark.parametrize("port", [443, 8443])
def test_https_certificate_verifies_with_the_lab_ca(lab, name, port):
    address = "2606:4700:10::10" if ":" in name else "11.0.0.10"
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    context = ssl.create_default_context(cafile=lab.ca_file)
    with socket.socket(family) as raw:
        raw.settimeout(5)
        raw.connect((address, port))
        with context.wrap_socket(raw, server_hostname=name) as tls:
            tls.sendall(f"GET /echo HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := tls.recv(4096):
                data += chunk
    assert data.startswith(b"HTTP/1.1 200 ")
    (request,) = lab.requests
    assert request.scheme == "https"
    assert request.host == name
    if ":" not in name and not name[0].isdigit():
        assert request.sni == name


def test_https_is_not_trusted_without_the_lab_ca(lab):
    context = ssl.create_default_context()  # system store: must not know the lab CA
    with (
        socket.create_connection(("11.0.0.10", 443), timeout=5) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        context.wrap_socket(raw, server_hostname="a.lab.example")


@pytest.mark.parametrize("name", ["x.untrusted.lab.example", "deep.a.lab.example", "other.example"])
def test_https_wrong_certificate_names_fail(lab, name):
    context = ssl.create_default_context(cafile=lab.ca_file)
    with (
        socket.create_connection(("11.0.0.10", 443), timeout=5) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        context.wrap_socket(raw, server_hostname=name)


def test_scenarios_smoke(lab):
    with httpx.Client(trust_env=False, timeout=5, follow_redirects=False) as client:
        base = "http://11.0.0.11"
        page = client.get(f"{base}/page")
        assert page.headers["content-type"].startswith("text/html")
        assert 45 * 1024 <= len(page.content) <= 60 * 1024
        assert len(client.get(f"{base}/page2m").content) == 2 * 1024 * 1024
        assert len(client.get(f"{base}/bytes/1234").content) == 1234
        assert client.get(f"{base}/status/418").status_code == 418
        redirect = client.get(f"{base}/redirect/307", params={"to": "http://b.lab.example/"})
        assert (redirect.status_code, redirect.headers["location"]) == (
            307,
            "http://b.lab.example/",
        )
        not_modified = client.get(f"{base}/redirect/304")
        assert not_modified.status_code == 304 and "location" not in not_modified.headers
        hops = [client.get(f"{base}/chain/2", params={"final": "http://c.lab.example/x"})]
        hops.append(client.get(f"{base}{hops[-1].headers['location']}"))
        assert hops[-1].headers["location"] == "http://c.lab.example/x"
        assert client.get(f"{base}/redirect-relative").headers["location"] == (
            "plain?from=relative"
        )
        assert client.get(f"{base}/redirect-scheme").headers["location"] == "file:///etc/passwd"
        assert client.get(f"{base}/json").headers["content-type"] == "application/json"
        assert "content-type" not in client.get(f"{base}/no-type").headers
        br = client.get(f"{base}/br", headers={"Accept-Encoding": "identity"})
        assert br.headers["content-encoding"] == "br"
        assert client.get(f"{base}/nope").status_code == 404


def test_streaming_scenarios_stop_when_the_client_leaves(lab):
    with httpx.Client(trust_env=False, timeout=5) as client:
        for path in ("/endless", "/huge-length", "/wrong-type"):
            with client.stream("GET", f"http://11.0.0.12{path}") as response:
                received = 0
                for chunk in response.iter_raw():
                    received += len(chunk)
                    if received > 1 << 20:
                        break
    lab.wait_requests_done(timeout=10)
    for record in lab.requests:
        assert record.done.is_set()
        assert record.aborted, record.path
        assert record.bytes_sent < 48 << 20, record.path


def test_gzip_and_deflate_bombs_are_valid(lab):
    import zlib

    with httpx.Client(trust_env=False, timeout=10) as client:
        for path, wbits in (("/gzip-bomb", 31), ("/deflate-bomb", 15)):
            with client.stream("GET", f"http://11.0.0.13{path}") as response:
                compressed = b"".join(response.iter_raw())
            assert len(compressed) < 2 << 20
            inflater = zlib.decompressobj(wbits)
            total = len(inflater.decompress(compressed, 1 << 20))
            assert total == 1 << 20
            assert not inflater.eof  # far more to come: it is a bomb


def test_slow_scenario_is_slow(lab):
    with socket.create_connection(("11.0.0.14", 80), timeout=5) as sock:
        sock.sendall(b"GET /slow HTTP/1.1\r\nHost: s.lab.example\r\n\r\n")
        sock.settimeout(3)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(4096)
        head, _, body = data.partition(b"\r\n\r\n")
        assert b"Content-Length: 120" in head
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            while True:
                if not sock.recv(4096):
                    break


def test_audit_hook_records_lookups_and_udp(lab):
    socket.getaddrinfo("11.0.0.10", 80)
    lab.dns.set("udp.lab.example", a=["11.0.0.10"])
    _resolver(lab).resolve("udp.lab.example", "A")
    assert any(entry.event == "getaddrinfo" and entry.host == "11.0.0.10" for entry in lab.lookups)
    assert any(
        c.event in ("sendto", "connect") and c.address == "11.0.0.53" and c.port == 53
        for c in lab.connects
    )
    assert lab.connected_addresses() == set()
    assert lab.connected_addresses(include_dns=True) == {"11.0.0.53"}


# -- without root -------------------------------------------------------------------------
def _without_privileges(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``args`` as root without any capability: what a non-root developer has."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("WEBFETCH_LAB")}
    environment.update(env)
    return subprocess.run(
        ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )


def test_enter_without_privileges_is_unavailable(lab):
    proc = _without_privileges(
        [
            sys.executable,
            "-c",
            "from tests.lab import netns\n"
            "try:\n    netns.enter()\n"
            "except netns.LabUnavailable as exc:\n"
            "    print('unavailable:', exc)\n",
        ]
    )
    assert "unavailable:" in proc.stdout, proc.stderr
    assert "needs root" in proc.stdout


@pytest.mark.parametrize("ci", ["true", ""])
def test_without_privileges_lab_tests_skip_or_ci_aborts(lab, tmp_path, ci):
    test_file = tmp_path / "test_probe.py"
    test_file.write_text("def test_probe(lab):\n    pass\n\ndef test_plain():\n    pass\n")
    proc = _without_privileges(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "--rootdir",
            os.getcwd(),
            "-p",
            "tests.lab.plugin",
            str(test_file),
        ],
        CI=ci,
    )
    output = proc.stdout + proc.stderr
    if ci == "true":
        assert proc.returncode == pytest.ExitCode.USAGE_ERROR, output
        assert "required in CI" in output
    else:
        assert proc.returncode == pytest.ExitCode.OK, output
        assert "1 passed, 1 skipped" in output


def test_the_bombs_checksums_are_those_of_a_gibibyte_of_zeros():
    from tests.lab import content

    assert content.zeros_checksums() == (content.ZEROS_CRC32, content.ZEROS_ADLER32)
    # The bomb inflates to exactly that: its trailer's CRC and size are right.
    bomb = content.gzip_bomb()
    assert bomb[-8:-4] == content.ZEROS_CRC32.to_bytes(4, "little")
