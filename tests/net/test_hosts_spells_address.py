"""review19 finding 5: a host whose labels spell the address it resolved to
(``spells_address``), refused by the guard under a ``*.suffix`` grant
(``host_spells_address``).  Pure unit tests; the guard end to end is in the lab below."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from django_webfetch.net import HostNotAllowed, UrlGuard, fetch
from django_webfetch.net.hosts import spells_address

V4 = "11.0.0.10"


@pytest.mark.parametrize(
    ("name", "address"),
    [
        ("1.2.3.4.1u.ms", "1.2.3.4"),
        ("a.1.2.3.4.nip.direct", "1.2.3.4"),
        ("1-2-3-4.sslip.io", "1.2.3.4"),
        ("app-10-0-0-1.grant.example", "10.0.0.1"),
        ("01020304.grant.example", "1.2.3.4"),
        ("0a000001.7f000001.rbndr.us", "127.0.0.1"),
        ("0a000001.7f000001.rbndr.us", "10.0.0.1"),
        ("2001-db8--1.grant.example", "2001:db8::1"),
        ("20010db8000000000000000000000001.grant.example", "2001:db8::1"),
        ("11.0.0.10.GRANT.example", "11.0.0.10"),
    ],
)
def test_names_that_spell_their_address(name, address):
    assert spells_address(name, ip_address(address))


@pytest.mark.parametrize(
    ("name", "address"),
    [
        ("api.grant.example", "1.2.3.4"),
        ("1.2.3.5.grant.example", "1.2.3.4"),
        ("2.3.4.grant.example", "1.2.3.4"),
        ("1-2-3-45.grant.example", "1.2.3.4"),
        ("x1-2-3-4.grant.example", "1.2.3.4"),
        ("0102030.grant.example", "1.2.3.4"),
        ("db8-1.grant.example", "2001:db8::1"),
    ],
)
def test_names_that_do_not(name, address):
    assert not spells_address(name, ip_address(address))


# -- the guard, end to end in the lab ------------------------------------------------------


@pytest.mark.lab
@pytest.mark.parametrize(
    "name",
    ["11.0.0.10.grant.example", "h-11-0-0-10.grant.example", "0b00000a.0b00000c.grant.example"],
)
def test_a_suffix_grant_refuses_a_name_that_spells_its_address(lab, name):
    lab.dns.set(name, a=[V4])
    policy = lab.policy(allowlist=("*.grant.example",))
    with pytest.raises(HostNotAllowed) as info:
        fetch(lab.url(name, "/plain"), policy=policy)
    assert info.value.reason == "host_spells_address"
    assert lab.accepts(V4) == []
    assert UrlGuard().explain(lab.url(name), policy).reason == "host_spells_address"


@pytest.mark.lab
def test_an_exact_grant_and_an_ordinary_name_under_a_suffix_still_pass(lab):
    lab.dns.set("11.0.0.10.grant.example", a=[V4])
    lab.dns.set("api.grant.example", a=[V4])
    exact = lab.policy(allowlist=("11.0.0.10.grant.example",))
    assert fetch(lab.url("11.0.0.10.grant.example", "/plain"), policy=exact).status == 200
    suffix = lab.policy(allowlist=("*.grant.example",))
    assert fetch(lab.url("api.grant.example", "/plain"), policy=suffix).status == 200
