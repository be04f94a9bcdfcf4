"""review22: "allow private addresses" is ticked per configured endpoint, but the guard
keeps it per *host* (``allow_private_hosts`` holds ``ep.host`` of every ticked endpoint):
a second endpoint on the same host with the box *not* ticked rides on the first one's
exemption.  With ``localhost`` now a fixed loopback answer, the typical case is a model
server on ``localhost:11434`` (ticked) and another endpoint of the group on
``localhost:<other port>`` (not ticked): the second is reached on loopback, and even past
the own-site rule when it is this installation's own host."""

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
    # Expected: the endpoint the operator left unticked is refused like any endpoint on a
    # loopback address (own_site / address_class:loopback).  Actual: allowed.
    with pytest.raises(EgressDenied):
        UrlGuard().check("http://localhost:8000/api/x", policy)
