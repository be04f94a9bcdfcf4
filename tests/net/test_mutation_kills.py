"""Tests that kill the mutants of net/ that survived the rest of tests/net (issue 28).

Each test asserts observable behaviour of the public API (classifications, reason codes,
parse results) that a one-operator change to ``ipclass``, ``guard``, ``hosts`` or
``urlparse`` would alter; the mutant each one kills is named in its docstring
(``module:line:operator``, as ``python -m tests.benchmarks.mutation_net`` reports it; the
lines are those of the commit that added the test).  docs/testing.rst has the figures.
"""

from __future__ import annotations

import dataclasses
from ipaddress import IPv4Address, IPv6Address, IPv6Network
from typing import Any

import pytest

from django_webfetch.net import (
    AddressNotAllowed,
    EgressDenied,
    EgressPolicy,
    FetchTimeout,
    HostNotAllowed,
    InvalidURL,
    PortNotAllowed,
    Scope,
    UrlGuard,
    explain,
)
from django_webfetch.net.errors import PolicyError, ResolutionError
from django_webfetch.net.guard import STEPS, applicable_proxy
from django_webfetch.net.hosts import (
    EntryKind,
    HostKind,
    HostList,
    parse_host,
    parse_list_entry,
    parse_port,
)
from django_webfetch.net.ipclass import (
    PUBLIC,
    IpAddressClassifier,
    classifier_for,
    parse_nat64_prefixes,
)
from django_webfetch.net.resolve import DnsResolver
from django_webfetch.net.urlparse import MAX_URL_LENGTH, parse_url

# -- ipclass ------------------------------------------------------------------------------


def test_nat64_prefixes_as_one_empty_string_are_refused():
    """``""`` is a str, not a list: refused, not read as "no prefixes"
    (ipclass:217 if:False, ipclass:218 raise:pass)."""
    with pytest.raises(PolicyError):
        parse_nat64_prefixes("")


@pytest.mark.parametrize("entry", ["64:ff9b::%1/96", "2001:db8::%eth0/32"])
def test_nat64_prefix_with_a_zone_id_is_refused(entry):
    """``ipaddress`` accepts a scope id in a network; a NAT64 prefix never has one
    (ipclass:225 if:False, boolop:Or->And)."""
    with pytest.raises(PolicyError):
        parse_nat64_prefixes([entry])


def test_nat64_prefix_error_shows_at_most_100_characters_of_the_entry():
    """A long bad entry is clipped to 100 characters in the message (ipclass:224 const)."""
    entry = "6" * 150
    with pytest.raises(PolicyError) as info:
        parse_nat64_prefixes([entry])
    assert "6" * 100 in str(info.value)
    assert "6" * 101 not in str(info.value)


def test_nat64_prefix_length_of_three_digits_is_read():
    """Up to three digits are a length (``/096`` is /96); four are refused
    (ipclass:228 compare:Gt->GtE)."""
    assert parse_nat64_prefixes(["64:ff9b::/096"]) == (IPv6Network("64:ff9b::/96"),)
    with pytest.raises(PolicyError):
        parse_nat64_prefixes(["64:ff9b::/0096"])


def test_classifier_for_builds_one_classifier_per_prefix_set():
    """``classifier_for`` is cached: the same prefixes give the same object
    (ipclass:358 const:int0, ``lru_cache(maxsize=0)``)."""
    prefixes = ("64:ff9b::/96", "2001:db8:64::/48")
    assert classifier_for(prefixes) is classifier_for(prefixes)
    assert classifier_for(()) is classifier_for(())


@pytest.mark.parametrize("order", [1, -1])
def test_metadata_wins_over_every_other_decoding(order):
    """Under two declared prefixes, an address that decodes to documentation space under
    one and to the metadata address under the other is ``metadata``, whichever prefix is
    declared first (ipclass:348 if:False and const, ipclass:349 const:int+1)."""
    address = IPv6Address("2001:db8:c000:201::a9fe:a9fe")
    prefixes = ["2001:db8::/32", "2001:db8:c000:201::/96"][::order]
    classifier = IpAddressClassifier(parse_nat64_prefixes(prefixes))
    assert sorted(map(str, classifier.embedded(address))) == ["169.254.169.254", "192.0.2.1"]
    assert classifier.classify(address) == "metadata"


# -- guard --------------------------------------------------------------------------------


def _policy(**kw: Any) -> EgressPolicy:
    kw.setdefault("proxy_env", ())
    return EgressPolicy(**kw)


def test_the_checked_destination_and_the_explanation_cannot_be_changed():
    """What the guard checked is what the transport connects to: the destination, the
    explanation and its steps are frozen (guard:66, guard:90, guard:97 const:True->False)."""
    destination = UrlGuard().check("https://11.0.0.10/", _policy())
    with pytest.raises(dataclasses.FrozenInstanceError):
        destination.addresses = (IPv4Address("10.0.0.1"),)  # type: ignore[misc]
    decision = explain("https://11.0.0.10/", policy=_policy())
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.allowed = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.steps[0].verdict = "fail"  # type: ignore[misc]


def test_explain_as_text_is_one_line_per_step_and_the_verdict():
    """(guard:108 const:str->empty, the line separator)."""
    lines = explain("https://11.0.0.10/", policy=_policy()).as_text().split("\n")
    assert [line.split()[0] for line in lines[:-1]] == list(STEPS)
    assert lines[-1] == "ALLOWED"


def test_explain_without_resolving_a_name_allows_only_so_far():
    # An address literal is decided without DNS; a name that was not looked up is not.
    literal = explain("https://11.0.0.10/", policy=_policy(), resolve=False)
    assert (literal.resolved, literal.as_text().split("\n")[-1]) == (True, "ALLOWED")
    name = explain("https://news.example.org/", policy=_policy(), resolve=False)
    assert name.allowed and not name.resolved
    assert name.as_text().split("\n")[-1] == name.verdict
    assert name.verdict == "ALLOWED SO FAR (not resolved: its addresses decide at fetch time)"
    denied = explain("http://127.0.0.1/", policy=_policy(), resolve=False)
    assert denied.verdict == f"DENIED ({denied.reason})"


@pytest.mark.parametrize(
    ("no_proxy", "host", "expected"),
    [
        # A bracketed IPv6 entry matches the IPv6 literal (guard:159 const:str->empty).
        ("[2606:4700:10::10]", "[2606:4700:10::10]", None),
        # A name matches itself and its subdomains, not a longer name ending in it
        # (guard:162 const:str->empty: "badexample.org" is not under "example.org").
        ("example.org", "www.example.org", None),
        ("example.org", "badexample.org", "http://proxy.lab:3128"),
        (".example.org", "badexample.org", "http://proxy.lab:3128"),
    ],
)
def test_no_proxy_entries_match_hosts_as_curl_does(no_proxy, host, expected):
    env = (("https_proxy", "http://proxy.lab:3128"), ("no_proxy", no_proxy))
    assert applicable_proxy(_policy(proxy_env=env), "https", parse_host(host), 443) == expected


@pytest.mark.parametrize("escape", ["%01", "%1F", "%1f", "%7F"])
def test_a_control_character_in_a_scoped_path_is_refused(escape):
    """C0 controls and DEL, decoded, in a path-scoped scope: ``path_encoding``
    (guard:255 const:int on 0x20 and 0x7F)."""
    p = _policy(scope=Scope.CONFIGURED_ENDPOINT, endpoints=("https://11.0.0.10/api/",))
    assert UrlGuard().check("https://11.0.0.10/api/a%20b", p).url.path == "/api/a%20b"
    assert UrlGuard().check("https://11.0.0.10/api/a~b", p).url.path == "/api/a~b"
    with pytest.raises(InvalidURL) as info:
        UrlGuard().check(f"https://11.0.0.10/api/a{escape}b", p)
    assert info.value.reason == "path_encoding"


def test_an_exempt_endpoint_on_an_own_host_the_exemption_does_not_name_is_refused():
    """The own-site exemption of a configured endpoint needs the host in
    ``allow_private_hosts`` too, not only the endpoint in ``allow_private_endpoints``
    (guard:366 boolop:And->Or)."""
    p = _policy(
        scope=Scope.CONFIGURED_ENDPOINT,
        endpoints=("http://10.0.0.5/a", "http://11.0.0.10/b"),
        allow_private_hosts=("10.0.0.5",),
        allow_private_endpoints=("http://10.0.0.5/a", "http://11.0.0.10/b"),
        own_site_hosts=("11.0.0.10",),
    )
    with pytest.raises(HostNotAllowed) as info:
        UrlGuard().check("http://11.0.0.10/b/x", p)
    assert info.value.reason == "own_site"
    assert UrlGuard().check("http://10.0.0.5/a/x", p).categories == ("private",)


def test_own_site_scope_explains_every_step_in_order():
    """(guard:373 call:pass and const: the own_site step of the own_site scope)."""
    p = _policy(scope=Scope.OWN_SITE, own_site_hosts=("11.0.0.10",))
    steps = explain("https://11.0.0.10/", policy=p).steps
    assert [s.name for s in steps] == list(STEPS)
    assert {s.verdict for s in steps if s.name != "endpoint"} == {"pass"}
    assert steps[STEPS.index("own_site")].detail == "own host 11.0.0.10"


def test_a_refusal_names_the_url_and_hop_zero_by_default():
    """``check`` puts the URL on a refusal that carries none (guard:303) and hop 0 unless
    told (guard:296 const)."""
    with pytest.raises(HostNotAllowed) as info:
        UrlGuard().check("https://11.0.0.10/x", _policy(denylist=("11.0.0.10",)))
    assert (info.value.reason, info.value.url, info.value.hop) == (
        "denylist",
        "https://11.0.0.10/x",
        0,
    )


def test_a_spent_budget_refuses_before_any_rule():
    """A deadline already past stops ``check`` at once, an IP literal too (guard:340)."""
    guard = UrlGuard(clock=lambda: 100.0)
    with pytest.raises(FetchTimeout) as info:
        guard.check("https://11.0.0.10/", _policy(), deadline=50.0)
    assert info.value.failure == "budget_exhausted"
    with pytest.raises(FetchTimeout):
        guard.check("https://11.0.0.10/", _policy(), deadline=100.0)  # (guard:614 >=)
    assert guard.check("https://11.0.0.10/", _policy(), deadline=150.0).addresses


def test_the_resolver_gets_the_time_left_before_the_deadline():
    """The budget left when the lookup starts is the resolver's timeout: spent by then,
    the real resolver refuses to start (no packet is sent) (guard:609-611 ``_remaining``)."""
    ticks = iter([0.0])
    guard = UrlGuard(
        resolver_factory=lambda p: DnsResolver(("127.0.0.1",), 9),
        clock=lambda: next(ticks, 100.0),  # the budget check at the start sees 0.0
    )
    with pytest.raises(ResolutionError) as info:
        guard.check("https://www.example.org/", _policy(), deadline=50.0)
    assert (str(info.value), info.value.detail) == (
        "no time left to resolve the host",
        "www.example.org",
    )


class _Asked(Exception):
    pass


def test_the_guard_resolves_names_through_its_resolver_factory():
    """``UrlGuard(resolver_factory=...)`` is the resolver used for names, and ``explain``
    resolves by default (guard:285 boolop:Or->And, guard:307 const:True->False).  The
    factory stops the check when asked: no lookup is made."""
    asked: list[EgressPolicy] = []

    def factory(policy):
        asked.append(policy)
        raise _Asked

    p = _policy()
    guard = UrlGuard(resolver_factory=factory)
    assert guard.explain("https://www.example.org/", p, resolve=False).allowed
    assert asked == []
    with pytest.raises(_Asked):
        guard.explain("https://www.example.org/", p)
    with pytest.raises(_Asked):
        guard.check("https://www.example.org/", p)
    assert asked == [p, p]


def test_an_unlisted_literal_under_a_names_only_allowlist_is_not_allowlisted():
    """(guard:410 const:str->empty: the reason code)."""
    with pytest.raises(HostNotAllowed) as info:
        UrlGuard().check("https://11.0.0.10/", _policy(allowlist=("docs.example.org",)))
    assert info.value.reason == "not_allowlisted"


@pytest.mark.parametrize("field", ["own_site_hosts", "denylist", "allowlist"])
def test_an_invalid_list_refusal_names_the_list(field):
    """(guard:357, guard:394, guard:402 const:str->empty: which setting is broken)."""
    with pytest.raises(EgressDenied) as info:
        UrlGuard().check("https://11.0.0.10/", _policy(**{field: ("ex ample.org",)}))
    assert info.value.reason == "invalid_list"
    assert info.value.detail.startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("kw", "detail"),
    [
        ({}, "no allowlist"),
        ({"allowlist": ("11.0.0.10",)}, "listed as 11.0.0.10"),
        ({"allowlist": ("11.0.0.10", "docs.example.org")}, "listed as 11.0.0.10"),
        ({"allowlist": ("2606:4700:10::10",)}, "decided on the resolved addresses"),
    ],
)
def test_explain_says_how_the_allowlist_decided(kw, detail):
    """(guard:411-416: the allowlist step of ``explain``)."""
    url = "https://11.0.0.10/" if "decided" not in detail else "https://www.example.org/"
    steps = explain(url, policy=_policy(**kw), resolve=False).steps
    [step] = [s for s in steps if s.name == "allowlist"]
    assert (step.verdict, step.detail) == ("pass", detail)


def test_explain_names_the_configured_endpoint():
    """(guard:389 call:pass and const: the endpoint step)."""
    p = _policy(scope=Scope.CONFIGURED_ENDPOINT, endpoints=("https://11.0.0.10/api/",))
    steps = explain("https://11.0.0.10/api/v1", policy=p).steps
    assert [s.name for s in steps] == list(STEPS)
    [step] = [s for s in steps if s.name == "endpoint"]
    assert (step.verdict, step.detail) == ("pass", "https://11.0.0.10/api/")


def test_explain_without_resolution_skips_resolve_and_addresses_by_name():
    """(guard:442 const:str->empty: the skipped addresses step keeps its name)."""
    steps = explain("https://www.example.org/", policy=_policy(), resolve=False).steps
    assert [s.name for s in steps] == list(STEPS)
    assert [(s.name, s.verdict) for s in steps[-2:]] == [("resolve", "skip"), ("addresses", "skip")]


def test_own_site_scope_opens_a_private_own_host_named_in_allow_private_hosts():
    """The own-site host match is the grant of the own_site scope (guard:472)."""
    p = _policy(
        scope=Scope.OWN_SITE, own_site_hosts=("10.0.0.5",), allow_private_hosts=("10.0.0.5",)
    )
    assert UrlGuard().check("http://10.0.0.5/page", p).categories == ("private",)
    with pytest.raises(AddressNotAllowed) as info:
        UrlGuard().check(
            "http://10.0.0.5/page", _policy(scope=Scope.OWN_SITE, own_site_hosts=("10.0.0.5",))
        )
    assert info.value.reason == "address_class:private"


def test_a_metadata_address_is_refused_as_metadata_before_the_lists():
    """The NAT64 form of the metadata address, also denylisted: the metadata rule comes
    first (guard:564, guard:566 and consts)."""
    nat64 = ("64:ff9b::/96",)
    p = _policy(nat64_prefixes=nat64, denylist=("169.254.169.254",))
    with pytest.raises(AddressNotAllowed) as info:
        UrlGuard().check("http://[64:ff9b::a9fe:a9fe]/", p)
    assert (info.value.reason, info.value.category) == ("address_class:metadata", "metadata")
    public = _policy(nat64_prefixes=nat64, denylist=("11.0.0.10",))
    with pytest.raises(AddressNotAllowed) as info:
        UrlGuard().check("http://[64:ff9b::b00:a]/", public)
    assert info.value.reason == "denylist"


def test_own_site_hosts_refuse_only_their_own_addresses():
    """A non-empty own-site list refuses its hosts, not every address (guard:569)."""
    p = _policy(own_site_hosts=("docs.example.org", "11.0.0.11"))
    assert UrlGuard().check("https://11.0.0.10/", p).categories == (PUBLIC,)
    with pytest.raises(HostNotAllowed) as info:
        UrlGuard().check("https://11.0.0.11/", p)
    assert info.value.reason == "own_site"


def test_a_public_address_passes_where_private_ones_are_granted():
    """(guard:578 not:drop: an all-public answer is no mixed answer)."""
    p = _policy(allowlist=("11.0.0.10", "10.0.0.5"), allow_private_hosts=("11.0.0.10", "10.0.0.5"))
    assert UrlGuard().check("https://11.0.0.10/", p).categories == (PUBLIC,)
    assert UrlGuard().check("https://10.0.0.5/", p).categories == ("private",)


def test_an_address_outside_an_address_allowlist_is_unlisted():
    """(guard:600 const: the category of a deferred allowlist refusal)."""
    with pytest.raises(AddressNotAllowed) as info:
        UrlGuard().check("https://11.0.0.10/", _policy(allowlist=("11.0.0.11",)))
    assert (info.value.reason, info.value.category) == ("not_allowlisted", "unlisted")


def test_a_nat64_form_of_an_allowlisted_address_keeps_the_port_rule():
    """Allowed through the embedded IPv4 on the default port; another port only where the
    entry names it (guard:602, guard:603)."""
    nat64 = {"nat64_prefixes": ("64:ff9b::/96",)}
    url = "https://[64:ff9b::b00:a]"  # 11.0.0.10
    any_port = _policy(allowlist=("11.0.0.10",), **nat64)
    assert UrlGuard().check(f"{url}/", any_port).categories == (PUBLIC,)
    with pytest.raises(PortNotAllowed):
        UrlGuard().check(f"{url}:9443/", any_port)
    named = _policy(allowlist=("11.0.0.10:9443",), **nat64)
    assert UrlGuard().check(f"{url}:9443/", named).port == 9443


def test_a_refusal_carries_at_most_500_characters_of_the_url():
    """(guard:620: ``_clip``)."""
    url = "https://11.0.0.10/" + "a" * 600
    with pytest.raises(HostNotAllowed) as info:
        UrlGuard().check(url, _policy(denylist=("11.0.0.10",)))
    assert info.value.url == url[:500]


# -- hosts --------------------------------------------------------------------------------


def test_host_and_entry_kinds_are_their_stable_strings():
    """The kinds are ``str`` enums whose values appear in records and explanations
    (hosts:49, hosts:50 const:str->empty)."""
    assert [parse_host(h).kind for h in ("example.org", "11.0.0.10", "[2001:db8::1]")] == [
        "name",
        "ipv4",
        "ipv6",
    ]
    assert [e.value for e in HostKind] == ["name", "ipv4", "ipv6"]
    assert [e.value for e in EntryKind] == ["name", "suffix", "address"]


def _via_proxy(proxy: str) -> EgressPolicy:
    return _policy(proxy=proxy, allow_via_proxy=True, allowlist=("11.0.0.10",))


@pytest.mark.parametrize("proxy", ["socks5://11.0.0.12:1080", "http://user@11.0.0.12:3128"])
def test_an_unusable_proxy_url_is_refused_as_proxy(proxy):
    """(guard:514 raise:pass and const)."""
    with pytest.raises(EgressDenied) as info:
        UrlGuard().check("http://11.0.0.10/", _via_proxy(proxy))
    assert info.value.reason == "proxy"


@pytest.mark.parametrize("proxy", ["http://169.254.169.254:3128", "http://[fd00:ec2::254]:80"])
def test_a_proxy_on_a_metadata_address_is_refused(proxy):
    """The proxy's address may be private, never metadata (guard:525-527)."""
    with pytest.raises(AddressNotAllowed) as info:
        UrlGuard().check("http://11.0.0.10/", _via_proxy(proxy))
    assert (info.value.reason, info.value.category) == ("address_class:metadata", "metadata")
    assert UrlGuard().check("http://11.0.0.10/", _via_proxy("http://10.0.0.12:3128")).proxy


def test_a_proxy_name_is_resolved_through_the_guards_resolver():
    """(guard:517 if:True: a named proxy is looked up, not taken as an address)."""
    asked: list[EgressPolicy] = []

    def factory(policy):
        asked.append(policy)
        raise _Asked

    p = _via_proxy("http://proxy.corp:3128")
    with pytest.raises(_Asked):
        UrlGuard(resolver_factory=factory).check("http://11.0.0.10/", p)
    assert asked == [p]


@pytest.mark.parametrize("char", ["\x80", "\x81", "\x9e", "\x9f"])
def test_a_c1_control_in_a_host_is_a_syntax_error_not_an_idn(char):
    """C1 controls (U+0080..U+009F) are refused as controls (``host_syntax``), like C0, not
    as non-ASCII names (``idn``); U+00A0 and up that are not whitespace are ``idn``
    (hosts:124 on 0x80 and 0x9F)."""
    with pytest.raises(HostNotAllowed) as info:
        parse_host(f"a{char}b.example")
    assert info.value.reason == "host_syntax"
    with pytest.raises(HostNotAllowed) as info:
        parse_host("a\u00e9b.example")
    assert info.value.reason == "idn"


def test_a_port_has_at_most_five_digits():
    """(hosts:158 const:int+1)."""
    assert parse_port("00080") == 80
    with pytest.raises(ValueError):
        parse_port("000080")


def test_list_entries_are_frozen_and_keep_their_port():
    """(hosts:172 const:True->False; hosts:224 const:int+1, the port after "]:")."""
    entry = parse_list_entry("[2001:db8::1]:8443")
    assert (entry.kind, entry.value, entry.port) == (EntryKind.ADDRESS, "2001:db8::1", 8443)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.port = None  # type: ignore[misc]


def test_a_list_entry_error_shows_at_most_100_characters():
    """(hosts:192 const: the clipped entry in the message)."""
    with pytest.raises(PolicyError) as info:
        parse_list_entry("a" * 150)
    assert "a" * 100 in str(info.value)
    assert "a" * 101 not in str(info.value)


@pytest.mark.parametrize("raw", ["", "ab", "example.org"])
def test_a_host_list_given_as_one_string_is_refused(raw):
    """Not read as a list of one-character entries, nor as an empty list
    (hosts:266 if:False, hosts:267 raise:pass)."""
    with pytest.raises(PolicyError):
        HostList.parse(raw)
    assert HostList.parse([raw] if raw else []).entries == tuple(
        parse_list_entry(e) for e in ([raw] if raw else [])
    )


def test_a_host_list_is_frozen():
    """(hosts:256 const:True->False)."""
    listed = HostList.parse(["example.org"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        listed.entries = ()  # type: ignore[misc]


# -- urlparse -----------------------------------------------------------------------------


def test_a_url_of_max_length_is_accepted_and_one_more_character_refused():
    """(urlparse:27 const: ``MAX_URL_LENGTH`` is 8192 characters, inclusive)."""
    base = "https://a.example/"
    exact = base + "a" * (MAX_URL_LENGTH - len(base))
    assert len(exact) == 8192 == MAX_URL_LENGTH
    assert parse_url(exact).path == exact[len("https://a.example") :]
    with pytest.raises(InvalidURL) as info:
        parse_url(exact + "a")
    assert info.value.reason == "invalid_url"


def test_a_parsed_url_is_frozen():
    """(urlparse:45 const:True->False)."""
    parsed = parse_url("https://a.example/")
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.port = 8080  # type: ignore[misc]


@pytest.mark.parametrize(("char", "encoded"), [("!", "!"), ('"', "%22")])
def test_printable_ascii_after_space_is_kept_or_encoded_not_refused(char, encoded):
    """(urlparse:80 on 0x21: "!" and '"' are no controls)."""
    assert parse_url(f"https://a.example/x{char}y").path == f"/x{encoded}y"


@pytest.mark.parametrize("char", ["\x80", "\x81", "\x9e", "\x9f"])
def test_a_c1_control_anywhere_in_a_url_is_refused(char):
    """(urlparse:80 on 0x80 and 0x9F: WHATWG parsers strip or mangle C1 controls)."""
    with pytest.raises(InvalidURL) as info:
        parse_url(f"https://a.example/x{char}y")
    assert info.value.reason == "invalid_url"
    assert parse_url("https://a.example/x\u00e9y").path == "/x%C3%A9y"


def test_a_lone_surrogate_in_a_path_is_percent_encoded():
    """(urlparse:94 const: ``surrogatepass``)."""
    assert parse_url("https://a.example/x\ud800y").path == "/x%ED%A0%80y"


# Names the guard resolves without a packet: ``localhost`` is 127.0.0.1 and ::1 by a fixed
# rule (RFC 6761), and a resolver with no name server fails at once.


def test_localhost_is_resolved_by_check_and_by_explain_by_default():
    """(guard:440 if:True, guard:449/450, guard:609/610 with no deadline, guard:635)."""
    with pytest.raises(AddressNotAllowed) as info:
        UrlGuard().check("http://localhost/", _policy())
    assert info.value.reason == "address_class:loopback"
    decision = explain("http://localhost/", policy=_policy())
    assert (decision.allowed, decision.reason) == (False, "address_class:loopback")
    resolve = decision.steps[STEPS.index("resolve")]
    assert (resolve.name, resolve.verdict, resolve.detail) == ("resolve", "pass", "127.0.0.1, ::1")
    fail = decision.steps[STEPS.index("addresses")]
    assert (fail.verdict, fail.detail) == ("fail", "address_class:loopback (127.0.0.1)")
    assert explain("http://localhost/", policy=_policy(), resolve=False).allowed


def test_the_budget_is_checked_again_after_the_lookup():
    """(guard:449 call:pass: the lookup spent the budget)."""
    ticks = iter([0.0, 0.0])
    guard = UrlGuard(clock=lambda: next(ticks, 100.0))
    with pytest.raises(FetchTimeout) as info:
        guard.check("http://localhost/", _policy(), deadline=50.0)
    assert info.value.failure == "budget_exhausted"


def test_a_suffix_grant_does_not_cover_a_name_that_spells_its_address():
    """(guard:458, guard:463 and const: refused as host_spells_address before the
    address rules)."""
    p = _policy(allowlist=("*.localhost",))
    with pytest.raises(HostNotAllowed) as info:
        UrlGuard().check("http://127.0.0.1.localhost/", p)
    assert info.value.reason == "host_spells_address"
    with pytest.raises(AddressNotAllowed) as refused:
        UrlGuard().check("http://app.localhost/", p)
    assert refused.value.reason == "address_class:loopback"


def test_explain_records_a_resolution_failure_on_the_resolve_step():
    """(guard:318 call:pass and const)."""
    guard = UrlGuard(resolver_factory=lambda p: DnsResolver((), 53))
    decision = guard.explain("https://www.example.org/", _policy())
    assert (decision.allowed, decision.reason) == (False, "dns_error")
    step = decision.steps[STEPS.index("resolve")]
    assert (step.verdict, step.detail) == ("fail", "no DNS server is configured")
    assert [s.verdict for s in decision.steps[STEPS.index("resolve") + 1 :]] == ["skip"]


@pytest.mark.parametrize(
    ("url", "detail"),
    [
        ("ftp://11.0.0.10/", "scheme"),
        ("http://10.0.0.5/", "address_class:private (10.0.0.5)"),
    ],
)
def test_explain_describes_the_refusal(url, detail):
    """(guard:627-629 ``_describe``)."""
    decision = explain(url, policy=_policy())
    [fail] = [s for s in decision.steps if s.verdict == "fail"]
    assert fail.detail == detail


def test_the_budget_is_checked_again_after_the_proxy_lookup():
    """(guard:523 call:pass: resolving the proxy's name spent the budget)."""
    ticks = iter([0.0, 0.0])
    guard = UrlGuard(clock=lambda: next(ticks, 100.0))
    with pytest.raises(FetchTimeout):
        guard.check("http://11.0.0.10/", _via_proxy("http://localhost:3128"), deadline=50.0)
    destination = UrlGuard().check("http://11.0.0.10/", _via_proxy("http://localhost:3128"))
    assert [str(a) for a in destination.proxy_addresses] == ["127.0.0.1", "::1"]


@pytest.mark.parametrize("exempt_first", [True, False])
def test_of_two_equally_specific_endpoints_the_first_listed_decides(exempt_first):
    """``/api`` and ``/api/`` bound the same paths; the exemption of the one listed first
    applies (guard:218 compare:Gt->GtE and const: ties keep the first)."""
    exempt, twin = "http://10.0.0.5/api", "http://10.0.0.5/api/"
    p = _policy(
        scope=Scope.CONFIGURED_ENDPOINT,
        endpoints=(exempt, twin) if exempt_first else (twin, exempt),
        allow_private_hosts=("10.0.0.5",),
        allow_private_endpoints=(exempt,),
    )
    if exempt_first:
        assert UrlGuard().check("http://10.0.0.5/api/x", p).categories == ("private",)
    else:
        with pytest.raises(AddressNotAllowed) as info:
            UrlGuard().check("http://10.0.0.5/api/x", p)
        assert info.value.reason == "address_class:private"


def test_a_bare_ipv6_entry_with_two_colons_is_an_address():
    """(hosts:224 const:int+1: ``64::1`` has two colons and no port)."""
    entry = parse_list_entry("64::1")
    assert (entry.kind, entry.value, entry.port) == (EntryKind.ADDRESS, "64::1", None)


def test_an_empty_segment_before_dot_dot_is_the_one_removed():
    """RFC 3986 §5.2.4: ``/x//../b`` is ``/x/b`` (urlparse:218 const:int+1)."""
    assert parse_url("https://a.example/x//../b").path == "/x/b"


@pytest.mark.lab
def test_a_mixed_answer_names_its_first_non_public_address(lab):
    """The refusal of a mixed answer carries the address that is not public and its
    category, not a public one (guard:583 not:drop)."""
    lab.dns.set("mixed.lab.example", a=["11.0.0.10", "10.0.0.10", "11.0.0.11"])
    with pytest.raises(AddressNotAllowed) as info:
        UrlGuard().check("http://mixed.lab.example/", lab.policy())
    assert (info.value.reason, info.value.address, info.value.category) == (
        "mixed_answer",
        "10.0.0.10",
        "private",
    )
