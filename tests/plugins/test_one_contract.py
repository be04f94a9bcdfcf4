"""The plugin client gives ``net.fetch``'s verdict on every corpus URL, in the lab.

The corpus (``tests/net/egress_corpus.py``) is built around the host the example plugin is
granted.  For each URL, ``net.fetch`` under the instance's own live policy decides; the
plugin client must then refuse with the plugin-visible name of the same reason (or
succeed where it succeeds), record the guard's reason itself, reach no lab server when
refused, and leave no egress record open.  Then the error contract on this path: an
unparseable ``Location`` and a non-ASCII header value.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from django_webfetch.egress import policy_for
from django_webfetch.models import EgressEvent
from django_webfetch.net import EgressDenied, fetch
from django_webfetch.plugins import services
from django_webfetch.plugins.client import plugin_reason
from tests.net.egress_corpus import corpus, verdict

pytestmark = [pytest.mark.django_db, pytest.mark.lab]

HOST = "granted.lab.example"
V6 = "2606:4700:10::10"


def _cases() -> list[str]:
    return corpus(HOST, "11.0.0.10", V6)


def _assert_closed(rows) -> None:
    decisions = [row.decision for row in rows]
    assert decisions.count("allowed") <= decisions.count("fetched") + decisions.count("failed")


@pytest.fixture
def granted(plugin_lab):
    plugin_lab.dns.set(HOST, a=[plugin_lab.PUBLIC_V4[0]], aaaa=[V6])
    plugin_lab.dns.set("xn--bcher-kva.lab.example", a=[plugin_lab.PUBLIC_V4[0]])
    instance = services.install("example")
    policy = policy_for(instance.default_group(), plugin_instance=instance)
    return plugin_lab, instance, policy


def test_every_corpus_url_gets_net_fetchs_verdict_through_the_plugin_client(granted):
    lab, instance, policy = granted
    disagreements = []
    for url in _cases():
        expected = verdict(lambda url=url: fetch(url, policy=policy, follow_redirects=False))
        before = len(lab.accepts())
        first = EgressEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        got = verdict(lambda url=url: instance.http.get(url))
        rows = list(EgressEvent.objects.filter(pk__gt=first).order_by("pk"))
        refused = expected not in ("ok", "fetch_error")
        if got != (plugin_reason(expected) if refused and got != "timeout" else expected):
            disagreements.append((url, expected, got))
            continue
        if refused:
            assert len(lab.accepts()) == before, (url, "a refused URL reached a server")
            assert [r.reason for r in rows if r.decision == "denied"][-1:] == [expected], url
            assert not any(r.decision == "fetched" for r in rows), url
        _assert_closed(rows)
    assert disagreements == []
    lab.check_no_private_traffic()


def test_the_reported_spellings_are_refused_as_net_fetch_refuses_them(granted):
    lab, instance, policy = granted
    for url, reason in [
        ("http://11.0.0.10:\uff18\uff10/plain", "port"),
        (f"http://{HOST}:8_0/plain", "port"),
        (f"http://{HOST}:\u0668\u0660/plain", "port"),
        ("http://b\u00fccher.lab.example/plain", "idn"),
    ]:
        assert verdict(lambda url=url: fetch(url, policy=policy)) == reason
        with pytest.raises(EgressDenied) as caught:
            instance.http.get(url)
        assert caught.value.reason == plugin_reason(reason)
        assert EgressEvent.objects.filter(decision="denied", reason=reason).exists()
    assert lab.accepts() == []


def test_an_unparseable_location_is_a_redacted_refusal_with_a_closed_record(granted):
    lab, instance, _ = granted
    url = f"http://{HOST}/redirect/302?to={quote('http://[::1')}"
    with pytest.raises(EgressDenied) as caught:
        instance.http.get(url)
    assert caught.value.reason == "invalid_url"
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    rows = list(EgressEvent.objects.order_by("pk"))
    assert sorted(r.decision for r in rows) == ["allowed", "denied", "fetched"]
    assert [r.reason for r in rows if r.decision == "denied"] == ["host_syntax"]
    _assert_closed(rows)


def test_a_duplicate_location_is_returned_not_followed(granted):
    lab, instance, _ = granted
    response = instance.http.get(f"http://{HOST}/locations")
    assert response.status_code == 302
    assert response.headers.get_list("location") == ["/plain", "/json"]
    assert [r.path for r in lab.requests] == ["/locations"]
    _assert_closed(list(EgressEvent.objects.all()))


def test_a_non_ascii_header_value_reaches_the_plugin_as_bytes(granted):
    lab, instance, _ = granted
    response = instance.http.get(f"http://{HOST}/headers")
    assert response.status_code == 200
    assert any(value.startswith(b"\x85") for _, value in response.headers.raw)
    assert [r.decision for r in EgressEvent.objects.order_by("pk")] == ["allowed", "fetched"]
