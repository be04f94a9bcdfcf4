"""The toolbar's live counters (issue 20): one JSON status the toolbar's script and the
assistant page read, counting exactly what the approval cards show."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from django_webfetch import runs

pytestmark = pytest.mark.django_db

URL = "http://news.lab.example/story?id=7&ref=home"


@pytest.fixture
def web_group(group_factory, lab_settings):
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    return group_factory("web", enabled=True, scope="external_filtered")


def status(client):
    response = client.get(reverse("webfetch_cms:status"))
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    return response.json()


def cards(client):
    html = client.get(reverse("webfetch_cms:approvals")).content.decode()
    return int(re.search(r'class="webfetch-count" data-count="(\d+)"', html).group(1))


def test_the_status_needs_a_login(client):
    assert client.get(reverse("webfetch_cms:status")).status_code == 403


def test_the_approvers_count_follows_the_cards(client, editor, approver, web_group):
    client.force_login(approver)
    assert status(client) == {"approvals": 0, "answers": 0}
    call = runs.request_call("fetch_external_url", {"url": URL}, user=editor)
    assert status(client)["approvals"] == cards(client) == 1
    runs.deny(call, by=approver, comment="no")
    assert status(client)["approvals"] == cards(client) == 0


def test_an_editor_gets_no_approval_count(client, editor, web_group):
    client.force_login(editor)
    runs.request_call("fetch_external_url", {"url": URL}, user=editor)
    assert status(client) == {"approvals": None, "answers": 0}


def test_the_toolbar_badges_are_live(client, editor, approver, site_pages, web_group):
    client.force_login(approver)
    runs.request_call("fetch_external_url", {"url": URL}, user=editor)
    html = client.get("/about/?toolbar_on").content.decode()
    badges = re.search(r'<div class="[^"]*webfetch-badges[^"]*".*?</div>', html, re.DOTALL)
    assert badges is not None
    box = badges.group(0)
    assert f'data-status="{reverse("webfetch_cms:status")}"' in box
    assert "django_webfetch/cms/toolbar.js" in box  # the script that keeps them current
    assert 'data-count="1"' in box and "1 call waits for your approval" in box
    forms = "1 call waits for your approval|%(count)d calls wait for your approval"
    assert f'data-forms="{forms}"' in box
    # The answers badge is there (hidden at 0) so the script can show it when one arrives.
    assert re.search(r'class="cms-btn webfetch-answers"[^>]*hidden', box)
