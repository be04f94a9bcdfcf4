"""review9: findings of the outside review of the egress layer (net/ part).

Every test here failed before its fix.
"""

from __future__ import annotations

import pytest

from django_webfetch.net import EgressPolicy, PolicyError, fetch

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
