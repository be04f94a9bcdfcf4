"""MCP ``fetch`` paging (``start_index`` > 0) reads a stored result of the same user from
ANY conversation: another MCP token's, an OAuth client's, the web assistant's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_webfetch.mcp import calls, paging
from django_webfetch.models import AccessToken, ToolCall
from django_webfetch.models.calls import CallState

pytestmark = pytest.mark.django_db

TEXT = "secret intranet page text " * 50
FENCED = (
    "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce=abc>>>\n"
    + TEXT
    + "\n<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce=abc>>>"
)


def test_a_second_token_pages_the_first_tokens_page(users):
    editor = users["editor"]
    first, _ = AccessToken.objects.issue(editor, "client A", by=editor)
    second, _ = AccessToken.objects.issue(editor, "client B (less trusted)", by=editor)
    ToolCall.objects.create(
        tool="fetch_external_url",
        user=editor,
        conversation=calls.conversation_of(first),
        arguments={"url": "https://intranet.example/hr", "mode": "main"},
        state=CallState.SUCCEEDED,
        finished_at=timezone.now(),
        result={"content": FENCED, "error": "", "meta": {}},
    )
    window = paging.Window(url="https://intranet.example/hr", mode="main", start=10, length=100)
    found = paging.stored_fetch(second.user, window, since=timezone.now() - timedelta(hours=1))
    # calls.conversation_of(second) != the stored call's conversation: it should not be found.
    assert found is None or found.conversation == calls.conversation_of(second), (
        f"token {second.pk} pages the result of {found.conversation}"
    )
