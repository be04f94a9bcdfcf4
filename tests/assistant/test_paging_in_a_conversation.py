"""Issue 29 finding 6: an assistant reads a long page in parts from one fetch.

The text kept for an assistant's call was keyed by the call's own reference
(``assistant:<run>:<step>:<index>``), so the next step never found it: every later part was
a new request (and, without an allowlist, a new approval).  End to end in the lab, with the
scripted provider asking for part 1, then part 2 in the next step, then part 3 in the next
turn of the same conversation.
"""

from __future__ import annotations

import pytest

from django_webfetch.models import CallState, StoredText

from .helpers import ask, calls_of
from .provider import Turn

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def web(lab_settings, group_factory, host_entry_factory):
    """``web`` runs without approval for the lab's docs host (on its allowlist)."""
    group_factory("web", enabled=True, scope="external_filtered", skip_approval_with_allowlist=True)
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    host_entry_factory("web", "docs.lab.example", list="allow")
    return lab_settings


def _docs_requests(lab):
    return [r for r in lab.requests if (r.host or "").startswith("docs.lab.example")]


def test_an_assistant_reads_a_long_page_in_parts_from_one_fetch(api, provider, web):
    url = web.url("docs.lab.example", "/page", scheme="https")
    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": url})]),
        Turn(tool_calls=[("fetch_external_url", {"url": url, "page": 2})]),
        lambda record: Turn(text="done"),
    )
    run = ask(api, f"Summarise {url}")
    assert run["state"] == "completed", run
    first, second = sorted(calls_of(run["id"]), key=lambda call: call.run_step)
    assert first.state == second.state == CallState.SUCCEEDED
    assert first.tool_result().meta["part"] == 1
    assert second.tool_result().meta == {**second.tool_result().meta, "part": 2, "stored": True}
    assert len(_docs_requests(web)) == 1
    assert StoredText.objects.get().call_id == first.pk

    # The next turn of the same conversation reads on from the same text.
    provider.add(
        Turn(tool_calls=[("fetch_external_url", {"url": url, "page": 3})]),
        lambda record: Turn(text="done"),
    )
    later = ask(api, "And the rest?", run["conversation"])
    assert later["state"] == "completed", later
    [third] = calls_of(later["id"])
    assert third.tool_result().meta["part"] == 3 and third.tool_result().meta["stored"] is True
    assert len(_docs_requests(web)) == 1
