"""Issue 21: read_page reads a long page in parts, from the text kept with the first call."""

from __future__ import annotations

import re

import pytest

from django_webfetch import runs
from django_webfetch.models import StoredText
from tests.settle import settled_call

pytestmark = pytest.mark.django_db

LOCATION_RE = re.compile(r"part (\d+) of (\d+), characters ([\d,]+)–([\d,]+)")


def test_a_long_page_in_parts(cms_page_factory, site_pages, content_group, editor):
    body = "".join(f"<p>Paragraph {n}: " + "bread and butter " * 20 + "</p>" for n in range(200))
    page = cms_page_factory("Long", "long", body)
    first = runs.request_call("read_page", {"page_id": page.pk}, user=editor, conversation="c1")
    result = settled_call(first).tool_result()
    assert result.ok, result
    status = result.content.split("Status: ", 1)[1].split("\n", 1)[0]
    number, total, start, end = (
        int(g.replace(",", "")) for g in LOCATION_RE.search(status).groups()
    )
    assert (number, start) == (1, 0) and total >= 3
    assert result.meta["page"] == page.pk and result.meta["parts"] == total
    assert "# Long" in result.content or "Long\n" in result.content
    kept = StoredText.objects.get()
    # A later part looks the page up again first (may the user still view it?): a page
    # that is gone is not read from the kept text.
    page.delete()
    second = runs.request_call(
        "read_page",
        {"page_id": kept.call.arguments["page_id"], "page": 2},
        user=editor,
        conversation="c1",
    )
    assert settled_call(second).tool_result().error == "page_not_found"
    assert StoredText.objects.count() == 1


def test_the_next_part_starts_where_the_last_ended(
    cms_page_factory, site_pages, content_group, editor
):
    body = "".join(f"<p>Paragraph {n}: " + "bread and butter " * 20 + "</p>" for n in range(200))
    page = cms_page_factory("Long", "long", body)
    ends = []
    for number in (1, 2, 3):
        call = runs.request_call(
            "read_page", {"path": "/long/", "page": number}, user=editor, conversation="c2"
        )
        result = settled_call(call).tool_result()
        assert result.ok, result
        ends.append((result.meta["start"], result.meta["end"], result.meta["stored"]))
    assert ends[0][0] == 0 and ends[1][0] == ends[0][1] and ends[2][0] == ends[1][1]
    assert [stored for _, _, stored in ends] == [False, True, True]
    assert page.pk
