"""review9: findings of the outside review of the egress layer (net/ part).

Every test here failed before its fix.
"""

from __future__ import annotations

import pytest

from django_webfetch.net import EgressPolicy, PolicyError, explain, fetch
from django_webfetch.net.policy import Scope

V4 = "11.0.0.10"
SECRET = "s3cretTOKENvalue"


# -- F1: a caller header value (an endpoint's write-only secret) echoed in library text --
# h11 refuses a field value with leading/trailing whitespace with "Illegal header value
# b'<the value>'"; httpx refuses a non-ASCII value with "can't encode character 'X' in
# position N".  Both messages became FetchError.detail -> GuardEvent.detail ->
# EgressEvent.detail (admin), or escaped the net API as a raw UnicodeEncodeError.  The
# fetcher now refuses any value that is not an RFC 9110 field-value up front, naming only
# the header, never the value.


@pytest.mark.parametrize(
    "value",
    [
        f" {SECRET}",
        f"{SECRET} ",
        f"{SECRET}\t",
        f"Bearer {SECRET}\u00e9",
        f"Bearer {SECRET}\u2028",
        f"Bearer {SECRET}\x85",
    ],
)
def test_header_values_http_cannot_carry_are_refused_without_echoing_them(value):
    events = []
    with pytest.raises(PolicyError) as caught:
        fetch(
            f"http://{V4}/echo",
            policy=EgressPolicy(proxy_env=()),
            headers={"Authorization": value},
            observer=events.append,
        )
    assert SECRET not in str(caught.value)
    assert "authorization" in str(caught.value).lower()
    assert events == []  # refused before any hop: nothing reached a server


@pytest.mark.lab
def test_a_valid_header_value_with_inner_spaces_still_reaches_the_server(lab):
    lab.dns.set("auth.lab.example", a=[V4])
    result = fetch(
        lab.url("auth.lab.example", "/echo"),
        policy=lab.policy(),
        headers={"Authorization": f"Bearer  {SECRET}\tx"},
    )
    assert f"Bearer  {SECRET}".encode() in result.body


# -- F3: dot-and-space segments under a path scope ---------------------------------------
# Windows path handling (IIS, NTFS-backed file servers) drops trailing dots and spaces
# from a segment: "/api/search/..%20/admin" and "/api/search/.../admin" are
# "/api/admin" there.  The guard let them through under the endpoint base.

ENDPOINT = EgressPolicy(
    scope=Scope.CONFIGURED_ENDPOINT, endpoints=(f"http://{V4}/api/search",), proxy_env=()
)


@pytest.mark.parametrize(
    "tail",
    ["..%20/admin", "..%20%20/admin", ".%20./admin", "%20../admin", ".../admin", "..../x", "..%20"],
)
def test_dot_and_space_segments_cannot_leave_an_endpoint_base(tail):
    verdict = explain(f"http://{V4}/api/search/{tail}", policy=ENDPOINT)
    assert not verdict.allowed
    assert verdict.reason == "path_encoding"


@pytest.mark.parametrize("tail", ["v1.2/x", "a%20b", ".well", "x..y", "a.", "%20a"])
def test_ordinary_segments_with_dots_and_spaces_stay_allowed(tail):
    assert explain(f"http://{V4}/api/search/{tail}", policy=ENDPOINT).allowed
