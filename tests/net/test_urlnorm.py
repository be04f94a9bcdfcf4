"""``net.urlnorm.normalise_url``: one spelling per equivalent URL (RFC 3986 §6.2.2-6.2.3),
and nothing merged that is not equivalent (issue 19, item 15)."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_webfetch.net.urlnorm import normalise_url

SAME = [
    ("HTTPS://Allowed.Example/?q=1", "https://allowed.example/?q=1"),
    ("https://allowed.example:443/?q=1", "https://allowed.example/?q=1"),
    ("http://allowed.example:80/a", "http://allowed.example/a"),
    ("https://allowed.example:/a", "https://allowed.example/a"),
    ("https://allowed.example", "https://allowed.example/"),
    ("https://allowed.example?q=1", "https://allowed.example/?q=1"),
    ("https://allowed.example/a#frag", "https://allowed.example/a"),
    ("https://allowed.example/?", "https://allowed.example/"),
    ("https://allowed.example/%7Euser/%41b", "https://allowed.example/~user/Ab"),
    ("https://allowed.example/a%2fb", "https://allowed.example/a%2Fb"),
    ("https://allowed.example/?q=%e2%82%ac", "https://allowed.example/?q=%E2%82%AC"),
    ("https://allowed.example/?q=€", "https://allowed.example/?q=%E2%82%AC"),
    ("https://allowed.example/100%", "https://allowed.example/100%25"),
    ("https://allowed.example/%4", "https://allowed.example/%254"),
    ("https://allowed.example/%zz", "https://allowed.example/%25zz"),
    ("https://allowed.example/[x]", "https://allowed.example/%5Bx%5D"),
    ("https://[2001:DB8::1]:443/", "https://[2001:db8::1]/"),
    ("https://[2001:db8::1]/", "https://[2001:db8::1]/"),
    ("https://[2001:db8::1]:8443/", "https://[2001:db8::1]:8443/"),
    ("https://allowed.example:08443/", "https://allowed.example:8443/"),
]

DIFFERENT = [
    ("https://allowed.example/?q=1", "http://allowed.example/?q=1"),
    ("https://allowed.example/?q=1", "https://allowed.example:8443/?q=1"),
    ("https://allowed.example/a%2Fb", "https://allowed.example/a/b"),
    ("https://allowed.example/?q=a+b", "https://allowed.example/?q=a%20b"),
    ("https://allowed.example/?a=1&b=2", "https://allowed.example/?b=2&a=1"),
    ("https://allowed.example/A", "https://allowed.example/a"),
    ("https://allowed.example/a/../b", "https://allowed.example/b"),
]

NONE = [
    "ftp://allowed.example/",
    "allowed.example/",
    "https:/allowed.example/",
    "https://user@allowed.example/",
    "https://:pw@allowed.example/",
    "https://@allowed.example/",
    "https://allowed.example /",
    "https://allowed.example/\x00",
    "https://allowed.example\\@evil.example/",
    "https://allowed.example/\x7f",
    "https:///path",
    "https://:443/",
    "https://[]/",
    "https://[2001:db8::1/",
    "https://[2001:db8::1]x/",
    "https://allowed.example:8_0/",
    "https://allowed.example:８０/",
    "https://allowed.example:123456/",
    "https://allowed.example:65536/",
    "https://allowed.example:1:2/",
    "https://allowed.example/\ud800",
]


@pytest.mark.parametrize(("url", "expected"), SAME)
def test_equivalent_spellings_normalise_to_one(url, expected):
    assert normalise_url(url) == expected
    assert normalise_url(expected) == expected


@pytest.mark.parametrize(("one", "other"), DIFFERENT)
def test_what_is_not_equivalent_stays_apart(one, other):
    assert normalise_url(one) is not None and normalise_url(other) is not None
    assert normalise_url(one) != normalise_url(other)


@pytest.mark.parametrize("url", NONE)
def test_what_the_guard_refuses_never_equals_anything(url):
    assert normalise_url(url) is None


_label = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=10)
_segment = st.text(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@%/ é€", max_size=20)


def _random_case(text, flips):
    return (
        "".join(c.upper() if f else c for c, f in zip(text, flips, strict=False))
        + text[len(flips) :]
    )


@given(
    scheme=st.sampled_from(["http", "https"]),
    labels=st.lists(_label, min_size=1, max_size=3),
    path=_segment,
    query=_segment,
    flips=st.lists(st.booleans(), max_size=40),
    port=st.booleans(),
    fragment=st.text(string.ascii_letters + string.digits + "-._~/?#%", max_size=10),
)
def test_property_equivalent_forms_are_equal(scheme, labels, path, query, flips, port, fragment):
    host = ".".join(labels) + ".example"
    base = f"{scheme}://{host}/{path}?{query}"
    normal = normalise_url(base)
    if normal is None:
        return  # a space: refused, never equal
    assert normalise_url(normal) == normal  # idempotent
    default = {"http": 80, "https": 443}[scheme]
    variant = (
        f"{_random_case(scheme, flips)}://{_random_case(host, flips[::-1])}"
        f"{':' + str(default) if port else ''}/{path}?{query}#{fragment}"
    )
    assert normalise_url(variant) == normal
    # Escaping an unreserved character changes nothing; a different query does.
    escaped = base.replace("~", "%7e").replace("-", "%2D")
    assert normalise_url(escaped) == normal
    assert normalise_url(f"{scheme}://{host}/{path}?{query}x") != normal
