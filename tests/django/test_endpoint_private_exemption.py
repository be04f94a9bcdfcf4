"""The private-address exemption ("allow private addresses") is decided per configured
endpoint, not per host.

The guard keeps the ticked endpoints' base URLs (``allow_private_endpoints``), and the most
specific endpoint a URL lies under decides.  So a second endpoint on the same host with the
box not ticked (a model server on ``localhost:11434``, ticked, and another endpoint of the
group on ``localhost:<other port>``) is refused on loopback, even when ``localhost`` is this
installation's own host; and an unticked endpoint nested in a ticked one (``/v1/admin/``
under ``/v1/``: a reverse proxy on one private address routing two paths to two services)
is refused too, as a ticked one nested in an unticked one is reached.
"""

from __future__ import annotations

import pytest

from django_webfetch.egress.policy import policy_for
from django_webfetch.net import EgressDenied, UrlGuard

pytestmark = pytest.mark.django_db


def test_an_endpoint_without_the_box_ticked_is_refused_on_loopback(
    settings, group_factory, endpoint_factory
):
    settings.WEBFETCH_DNS_NAMESERVERS = ("127.0.0.9",)  # never asked: localhost is fixed
    settings.ALLOWED_HOSTS = ["localhost"]  # this installation answers on localhost
    group_factory("assistant", enabled=True, scope="configured_endpoint")
    endpoint_factory(
        "http://localhost:11434/v1", group="assistant", allow_private=True, auth_header_value=""
    )
    endpoint_factory(
        "http://localhost:8000/api/", group="assistant", allow_private=False, auth_header_value=""
    )
    policy = policy_for("assistant")
    # The ticked endpoint is reached, as the operator decided.
    UrlGuard().check("http://localhost:11434/v1/chat/completions", policy)
    # The endpoint the operator left unticked is refused like any endpoint on a loopback
    # address (own_site / address_class:loopback).
    with pytest.raises(EgressDenied):
        UrlGuard().check("http://localhost:8000/api/x", policy)


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
    # The unticked endpoint is refused on loopback (address_class:loopback), as any unticked
    # endpoint is: the operator's "no" on the more specific row decides.
    with pytest.raises(EgressDenied):
        UrlGuard().check("http://localhost:11434/v1/admin/users", policy)
