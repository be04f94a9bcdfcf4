"""review22b: the private-address exemption is now per endpoint (``allow_private_endpoints``),
but a URL is exempt when it lies under *any* exempt endpoint, not under the endpoint it
belongs to.  An unticked endpoint nested in a ticked one (``/v1/admin/`` under ``/v1/``:
a reverse proxy on one private address routing two paths to two services) is reached on
the private address: the operator's "no" on the more specific row decides nothing.  The
most specific endpoint a URL lies under should decide, as it does the other way round
(ticked ``/v1/admin/`` under unticked ``/v1/``: ``/v1/x`` is refused)."""

from __future__ import annotations

import pytest

from django_webfetch.egress.policy import policy_for
from django_webfetch.net import EgressDenied, UrlGuard

pytestmark = pytest.mark.django_db


def test_an_unticked_endpoint_under_a_ticked_one_is_refused_on_loopback(
    settings, group_factory, endpoint_factory
):
    settings.WEBFETCH_DNS_NAMESERVERS = ("127.0.0.9",)  # never asked: localhost is fixed
    group_factory("assistant", enabled=True, scope="configured_endpoint")
    endpoint_factory(
        "http://localhost:11434/v1/", group="assistant", allow_private=True, auth_header_value=""
    )
    endpoint_factory(
        "http://localhost:11434/v1/admin/",
        group="assistant",
        allow_private=False,
        auth_header_value="",
    )
    policy = policy_for("assistant")
    UrlGuard().check("http://localhost:11434/v1/chat/completions", policy)  # ticked: reached
    # Expected: the unticked endpoint is refused on loopback (address_class:loopback), as
    # any unticked endpoint is.  Actual: allowed, on the ticked parent's exemption.
    with pytest.raises(EgressDenied):
        UrlGuard().check("http://localhost:11434/v1/admin/users", policy)
