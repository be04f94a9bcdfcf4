"""The guard's decisions that need no DNS: IP literals, lists, scopes, ports, proxies.

Names that must be resolved are decided in the namespace lab (tests/net/test_fetch_lab.py);
here every host is an IP literal, or ``explain(..., resolve=False)`` is used.
"""

from __future__ import annotations

import pytest

from django_webfetch.net import (
    AddressNotAllowed,
    EgressDenied,
    EgressPolicy,
    HostNotAllowed,
    PolicyError,
    PortNotAllowed,
    Scope,
    UrlGuard,
    explain,
)
from django_webfetch.net.guard import STEPS, applicable_proxy
from django_webfetch.net.hosts import parse_host

PUBLIC_V4 = "11.0.0.10"
PUBLIC_V6 = "2606:4700:10::10"
NO_PROXY_ENV: tuple[tuple[str, str], ...] = ()


def policy(**kw):
    kw.setdefault("proxy_env", NO_PROXY_ENV)
    return EgressPolicy(**kw)


def check(url, **kw):
    return UrlGuard().check(url, policy(**kw))


def reason(url, **kw):
    with pytest.raises(EgressDenied) as info:
        check(url, **kw)
    return info.value.reason


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1/", "address_class:loopback"),
        ("http://10.1.2.3/", "address_class:private"),
        ("http://172.16.0.1/", "address_class:private"),
        ("http://192.168.0.1/", "address_class:private"),
        ("http://100.64.0.1/", "address_class:shared"),
        ("http://169.254.169.254/latest/meta-data/", "address_class:metadata"),
        ("http://169.254.170.2/", "address_class:metadata"),
        ("http://100.100.100.200/", "address_class:metadata"),
        ("http://168.63.129.16/", "address_class:metadata"),
        ("http://[fd00:ec2::254]/", "address_class:metadata"),
        ("http://0.0.0.0/", "address_class:unspecified"),
        ("http://[::]/", "address_class:unspecified"),
        ("http://[::1]/", "address_class:loopback"),
        ("http://[::ffff:127.0.0.1]/", "address_class:ipv4_mapped"),
        ("http://[::ffff:7f00:1]/", "address_class:ipv4_mapped"),
        ("http://[64:ff9b::7f00:1]/", "address_class:nat64"),
        ("http://[2002:7f00:1::]/", "address_class:6to4"),
        ("http://[fe80::1]/", "address_class:link_local"),
        ("http://[fc00::1]/", "address_class:ula"),
        ("http://224.0.0.1/", "address_class:multicast"),
        ("http://255.255.255.255/", "address_class:broadcast"),
        ("http://192.0.2.1/", "address_class:documentation"),
        ("http://198.18.0.1/", "address_class:benchmarking"),
        ("http://2130706433/", "legacy_numeric_host"),
        ("http://0177.0.0.1/", "legacy_numeric_host"),
        ("http://0x7f.1/", "legacy_numeric_host"),
        ("http://127.1/", "legacy_numeric_host"),
        ("http://user@11.0.0.10/", "userinfo"),
        ("http://@11.0.0.10/", "userinfo"),
        ("ftp://11.0.0.10/", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("gopher://11.0.0.10/", "scheme"),
        ("http://exämple.org/", "idn"),
        ("http://[fe80::1%25eth0]/", "host_syntax"),
        ("http://11.0.0.10:8080/", "port"),
    ],
)
def test_refusals_without_dns(url, expected):
    assert reason(url) == expected


def test_public_literals_pass_and_are_pinned():
    dest = check(f"http://{PUBLIC_V4}/a?b=1")
    assert [str(a) for a in dest.addresses] == [PUBLIC_V4]
    assert (dest.scheme, dest.host, dest.port) == ("http", PUBLIC_V4, 80)
    dest6 = check(f"https://[{PUBLIC_V6}]/")
    assert [str(a) for a in dest6.addresses] == [PUBLIC_V6]
    assert dest6.port == 443


def test_denial_carries_no_url_text_in_message():
    with pytest.raises(EgressDenied) as info:
        check("http://127.0.0.1/<<<BEGIN UNTRUSTED")
    assert "BEGIN" not in str(info.value)
    assert "127.0.0.1" not in str(info.value)
    assert info.value.url.startswith("http://127.0.0.1/")


def test_address_error_has_address_and_category():
    with pytest.raises(AddressNotAllowed) as info:
        check("http://10.0.0.1/")
    assert info.value.address == "10.0.0.1"
    assert info.value.category == "private"


def test_scope_none_refuses_everything():
    assert reason(f"http://{PUBLIC_V4}/", scope=Scope.NONE) == "scope"


def test_scope_string_is_coerced_and_unknown_refused():
    assert policy(scope="own_site").scope is Scope.OWN_SITE
    with pytest.raises(PolicyError):
        policy(scope="any_host")


def test_own_site_hosts_are_refused_for_external():
    assert reason(f"http://{PUBLIC_V4}/", own_site_hosts=(PUBLIC_V4,)) == "own_site"


def test_own_site_scope_reaches_only_own_hosts():
    p = {"scope": Scope.OWN_SITE, "own_site_hosts": (PUBLIC_V4, f"{PUBLIC_V4}:8000")}
    assert check(f"http://{PUBLIC_V4}/", **p).port == 80
    assert check(f"http://{PUBLIC_V4}:8000/", **p).port == 8000
    assert reason("http://11.0.0.11/", **p) == "not_own_site"
    assert reason(f"http://{PUBLIC_V4}:8001/", **p) == "port"


def test_own_site_scope_still_refuses_private_without_grant():
    p = {"scope": Scope.OWN_SITE, "own_site_hosts": ("127.0.0.1",)}
    assert reason("http://127.0.0.1/", **p) == "address_class:loopback"


def test_configured_endpoint_scope():
    p = {"scope": Scope.CONFIGURED_ENDPOINT, "endpoints": (f"https://{PUBLIC_V4}:8443/search/",)}
    assert check(f"https://{PUBLIC_V4}:8443/search/?q=x", **p).port == 8443
    assert check(f"https://{PUBLIC_V4}:8443/search", **p).port == 8443
    assert reason(f"https://{PUBLIC_V4}:8443/other", **p) == "not_configured_endpoint"
    assert reason(f"http://{PUBLIC_V4}:8443/search/", **p) == "not_configured_endpoint"
    assert reason("https://11.0.0.11:8443/search/", **p) == "not_configured_endpoint"


def test_configured_endpoint_without_trailing_slash_respects_segment_boundary():
    p = {"scope": Scope.CONFIGURED_ENDPOINT, "endpoints": (f"http://{PUBLIC_V4}/api",)}
    assert check(f"http://{PUBLIC_V4}/api/v1", **p)
    assert reason(f"http://{PUBLIC_V4}/apix", **p) == "not_configured_endpoint"


def test_configured_endpoint_private_only_when_granted():
    p = {"scope": Scope.CONFIGURED_ENDPOINT, "endpoints": ("http://10.0.0.5/search",)}
    assert reason("http://10.0.0.5/search", **p) == "address_class:private"
    dest = check(
        "http://10.0.0.5/search",
        allow_private_hosts=("10.0.0.5",),
        allow_private_endpoints=("http://10.0.0.5/search",),
        **p,
    )
    assert [str(a) for a in dest.addresses] == ["10.0.0.5"]


def test_the_private_exemption_is_per_endpoint_not_per_host():
    """Two endpoints on one host, the operator exempted one: the other is refused on its
    private address, and past the own-site rule it is not let either."""
    exempt, other = "http://127.0.0.1:11434/v1", "http://127.0.0.1:8000/api/"
    p = {
        "scope": Scope.CONFIGURED_ENDPOINT,
        "endpoints": (exempt, other),
        "allow_private_hosts": ("127.0.0.1",),
        "allow_private_endpoints": (exempt,),
    }
    assert check("http://127.0.0.1:11434/v1/chat/completions", **p)
    assert reason("http://127.0.0.1:8000/api/x", **p) == "address_class:loopback"
    own = {**p, "own_site_hosts": ("127.0.0.1",)}
    assert check("http://127.0.0.1:11434/v1/chat/completions", **own)
    assert reason("http://127.0.0.1:8000/api/x", **own) == "own_site"
    # Nested endpoints: the most specific one decides, in whichever order they are listed.
    parent, child = "http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434/v1/admin/"
    for endpoints in ((parent, child), (child, parent)):
        nested = {**p, "endpoints": endpoints, "allow_private_endpoints": (parent,)}
        assert check("http://127.0.0.1:11434/v1/chat/completions", **nested)
        assert reason("http://127.0.0.1:11434/v1/admin/users", **nested) == (
            "address_class:loopback"
        )
        inverse = {**nested, "allow_private_endpoints": (child,)}
        assert check("http://127.0.0.1:11434/v1/admin/users", **inverse)
        assert reason("http://127.0.0.1:11434/v1/chat", **inverse) == "address_class:loopback"
    # An allowlist naming the host grants no exemption of its own in this scope.
    listed = {**p, "allowlist": ("127.0.0.1:8000", "127.0.0.1:11434")}
    assert reason("http://127.0.0.1:8000/api/x", **listed) == "address_class:loopback"


def test_private_grant_never_covers_metadata():
    p = {
        "scope": Scope.CONFIGURED_ENDPOINT,
        "endpoints": ("http://169.254.169.254/",),
        "allow_private_hosts": ("169.254.169.254",),
        "allow_private_endpoints": ("http://169.254.169.254/",),
    }
    assert reason("http://169.254.169.254/", **p) == "address_class:metadata"


def test_invalid_endpoint_refuses():
    p = {"scope": Scope.CONFIGURED_ENDPOINT, "endpoints": ("not a url",)}
    assert reason(f"http://{PUBLIC_V4}/", **p) == "invalid_list"


def test_denylist_by_name_and_address():
    assert reason(f"http://{PUBLIC_V4}/", denylist=(PUBLIC_V4,)) == "denylist"
    assert reason(f"http://[{PUBLIC_V6}]/", denylist=(f"[{PUBLIC_V6}]",)) == "denylist"
    assert check(f"http://{PUBLIC_V4}/", denylist=("11.0.0.11",))


def test_allowlist_narrows_never_widens():
    assert check(f"http://{PUBLIC_V4}/", allowlist=(PUBLIC_V4,))
    assert reason("http://11.0.0.11/", allowlist=(PUBLIC_V4,)) == "not_allowlisted"
    # An allowlisted private address is still refused: lists never widen.
    assert reason("http://10.0.0.1/", allowlist=("10.0.0.1",)) == "address_class:private"


def test_allowlist_port_entry_allows_that_port_only():
    p = {"allowlist": (f"{PUBLIC_V4}:8080",)}
    assert check(f"http://{PUBLIC_V4}:8080/", **p).port == 8080
    assert reason(f"http://{PUBLIC_V4}:8081/", **p) == "not_allowlisted"
    assert reason(f"http://{PUBLIC_V4}/", **p) == "not_allowlisted"


@pytest.mark.parametrize("bad", ["*", "*.", "a.*.b", "10.0.0.0/8", "http://x.org", "ex ample.org"])
def test_one_invalid_entry_refuses_everything(bad):
    for field in ("allowlist", "denylist", "own_site_hosts"):
        assert reason(f"http://{PUBLIC_V4}/", **{field: ("ok.example", bad)}) == "invalid_list"


def test_invalid_nat64_prefix_refuses():
    assert reason(f"http://{PUBLIC_V4}/", nat64_prefixes=("64:ff9b::/95",)) == "invalid_list"


def test_declared_nat64_prefix_decodes_embedded_ipv4():
    p = {"nat64_prefixes": ("64:ff9b::/96",)}
    assert check("http://[64:ff9b::b00:a]/", **p)  # 11.0.0.10 embedded
    assert reason("http://[64:ff9b::7f00:1]/", **p) == "address_class:loopback"
    assert reason("http://[64:ff9b::a9fe:a9fe]/", **p) == "address_class:metadata"


def test_proxy_from_environment_refuses():
    env = (("HTTPS_PROXY", "http://proxy.corp:3128"),)
    assert reason(f"https://{PUBLIC_V4}/", proxy_env=env) == "proxy"
    # The http scheme has no proxy in that environment.
    assert check(f"http://{PUBLIC_V4}/", proxy_env=env)


def test_configured_proxy_allowed_only_with_allowlist():
    p = {"proxy": "http://proxy.corp:3128"}
    assert reason(f"http://{PUBLIC_V4}/", **p) == "proxy"
    assert reason(f"http://{PUBLIC_V4}/", allow_via_proxy=True, **p) == "proxy"
    # The proxy's own name is resolved (through dnspython) when the request is checked;
    # without resolution the decision is made on the lists alone.
    decision = explain(
        f"http://{PUBLIC_V4}/",
        policy=policy(allow_via_proxy=True, allowlist=(PUBLIC_V4,), **p),
        resolve=False,
    )
    assert decision.allowed
    assert decision.destination.proxy == "http://proxy.corp:3128/"
    dest = check(
        f"http://{PUBLIC_V4}/",
        allow_via_proxy=True,
        allowlist=(PUBLIC_V4,),
        proxy="http://11.0.0.12:3128",
    )
    assert dest.proxy == "http://11.0.0.12:3128/"
    assert [str(a) for a in dest.proxy_addresses] == ["11.0.0.12"]


@pytest.mark.parametrize(
    ("env", "host", "port", "expected"),
    [
        ((("http_proxy", "http://p:1"),), "a.example", 80, "http://p:1"),
        ((("ALL_PROXY", "http://p:2"),), "a.example", 80, "http://p:2"),
        (
            (("http_proxy", "http://low"), ("HTTP_PROXY", "http://up")),
            "a.example",
            80,
            "http://low",
        ),
        (
            (("HTTP_PROXY", "http://up"), ("http_proxy", "http://low")),
            "a.example",
            80,
            "http://low",
        ),
        ((("http_proxy", "http://p"), ("no_proxy", "*")), "a.example", 80, None),
        ((("http_proxy", "http://p"), ("no_proxy", "example")), "a.example", 80, None),
        ((("http_proxy", "http://p"), ("NO_PROXY", ".example")), "a.example", 80, None),
        ((("http_proxy", "http://p"), ("no_proxy", "*.example")), "a.example", 80, None),
        ((("http_proxy", "http://p"), ("no_proxy", "a.example:80")), "a.example", 80, None),
        ((("http_proxy", "http://p"), ("no_proxy", "a.example:81")), "a.example", 80, "http://p"),
        ((("http_proxy", "http://p"), ("no_proxy", "a.example:x")), "a.example", 80, "http://p"),
        ((("http_proxy", "http://p"), ("no_proxy", " , other.org")), "a.example", 80, "http://p"),
        ((("http_proxy", ""),), "a.example", 80, None),
        ((("PATH", "/bin"),), "a.example", 80, None),
    ],
)
def test_applicable_proxy_table(env, host, port, expected):
    p = policy(proxy_env=env)
    assert applicable_proxy(p, "http", parse_host(host), port) == expected


def test_applicable_proxy_reads_os_environ(monkeypatch):
    # Only the process environment is changed here, not the guard.
    monkeypatch.setenv("HTTP_PROXY", "http://env-proxy:3128")
    monkeypatch.delenv("http_proxy", raising=False)
    assert applicable_proxy(EgressPolicy(), "http", parse_host("a.example"), 80) == (
        "http://env-proxy:3128"
    )


def test_explain_lists_every_step_in_order():
    decision = explain(f"http://{PUBLIC_V4}/", policy=policy())
    assert [s.name for s in decision.steps] == list(STEPS)
    assert decision.allowed and decision.reason is None
    assert all(s.verdict in {"pass", "skip"} for s in decision.steps)
    assert "ALLOWED" in decision.as_text()


def test_explain_marks_the_failing_step_and_skips_the_rest():
    decision = explain("http://0x7f.1/", policy=policy())
    verdicts = {s.name: s.verdict for s in decision.steps}
    assert verdicts["url"] == "fail"
    assert verdicts["resolve"] == "skip"
    assert not decision.allowed and decision.reason == "legacy_numeric_host"
    assert "DENIED (legacy_numeric_host)" in decision.as_text()


def test_explain_without_resolution_never_resolves_names():
    decision = explain("http://docs.example.org/", policy=policy(), resolve=False)
    verdicts = {s.name: s.verdict for s in decision.steps}
    assert verdicts["resolve"] == "skip"
    assert decision.allowed


def test_explain_reports_address_refusals_with_the_address():
    decision = explain("http://10.0.0.1/", policy=policy())
    assert decision.steps[-1].name == "addresses"
    assert decision.steps[-1].verdict == "fail"
    assert "10.0.0.1" in decision.steps[-1].detail


def test_explain_of_non_string_input():
    decision = explain(12345, policy=policy())  # type: ignore[arg-type]
    assert not decision.allowed
    assert decision.reason == "invalid_url"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_body_bytes", 2 * 1024 * 1024 + 1),
        ("max_redirects", 4),
        ("connect_timeout", 5.5),
        ("total_timeout", 21),
        ("total_timeout", -1),
        ("max_redirects", True),
        ("max_redirects", "3"),
        ("dns_port", 0),
        ("allowlist", "a.example"),
        ("allowlist", ("a.example", 3)),
        ("nameservers", "11.0.0.53"),
    ],
)
def test_policy_bounds_cannot_be_raised(field, value):
    with pytest.raises(PolicyError):
        EgressPolicy(**{field: value})


def test_policy_accepts_lists_and_lowers_bounds():
    p = EgressPolicy(allowlist=["a.example"], nameservers=["11.0.0.53"], total_timeout=3)
    assert p.allowlist == ("a.example",)
    assert p.nameservers == ("11.0.0.53",)
    assert p.has_allowlist
    assert hash(p) == hash(
        EgressPolicy(allowlist=("a.example",), nameservers=("11.0.0.53",), total_timeout=3)
    )


def test_hop_number_is_recorded_on_denials():
    with pytest.raises(HostNotAllowed) as info:
        UrlGuard().check("http://x.example/", policy(denylist=("x.example",)), hop=2)
    assert info.value.hop == 2


def test_port_refusal_type():
    with pytest.raises(PortNotAllowed):
        check(f"http://{PUBLIC_V4}:81/")


def test_an_own_host_endpoint_needs_the_operators_exemption():
    """configured_endpoint: a self-hosted model server on an own host (ALLOWED_HOSTS names
    127.0.0.1) is reachable only with the endpoint's private-address exemption, and only
    under that endpoint; every other scope keeps the own-site rule."""
    p = {
        "scope": Scope.CONFIGURED_ENDPOINT,
        "endpoints": ("http://127.0.0.1:8080/v1",),
        "own_site_hosts": ("127.0.0.1", "localhost"),
    }
    assert reason("http://127.0.0.1:8080/v1/chat/completions", **p) == "own_site"
    granted = {
        **p,
        "allow_private_hosts": ("127.0.0.1",),
        "allow_private_endpoints": ("http://127.0.0.1:8080/v1",),
    }
    steps = explain("http://127.0.0.1:8080/v1/chat/completions", policy=policy(**granted)).steps
    [own] = [s for s in steps if s.name == "own_site"]
    assert (own.verdict, own.detail) == (
        "pass",
        "own host 127.0.0.1: self-hosted endpoint (operator)",
    )
    dest = check("http://127.0.0.1:8080/v1/chat/completions", **granted)
    assert [str(a) for a in dest.addresses] == ["127.0.0.1"]
    # The site's own app on another port is not the endpoint.
    assert reason("http://127.0.0.1:8000/admin/", **granted) == "own_site"
    # A model-chosen URL (external_filtered) never gets the exemption.
    assert reason("http://127.0.0.1:8080/v1/", own_site_hosts=("127.0.0.1",)) == "own_site"
    # A private endpoint that is no own host needs no own-site exemption.
    other = {
        **granted,
        "endpoints": ("http://127.0.0.2:8080/v1",),
        "allow_private_hosts": ("127.0.0.2",),
        "allow_private_endpoints": ("http://127.0.0.2:8080/v1",),
    }
    assert check("http://127.0.0.2:8080/v1/models", **other)
