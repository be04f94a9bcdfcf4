"""``start_index`` paging of the MCP ``fetch`` tool over a page fetched before.

The reference MCP fetch server downloads the page again for every ``start_index``; this
one reads the text of the call that fetched it (the same user, the same conversation, i.e.
the same MCP token, the same URL and mode, within
``WEBFETCH_MCP_PAGE_TTL``), cuts the window out of it and fences the window again with a
fresh nonce.  Nothing is downloaded, nothing is asked of an approver a second time.

The text comes from one adapter, :func:`stored_page_text`: today it is the page text of the
call's stored result (between the fence's markers, so at most the fence's 20,000
characters).  When ``fetch_external_url`` keeps the whole extracted text in its own store,
only that function changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django_webfetch.models import CallState, ToolCall
from django_webfetch.text import fence
from django_webfetch.values import ToolResult

from .answers import Answer

__all__ = ["Window", "render", "stored_fetch", "stored_page_text"]

_BEGIN_RE = re.compile(r"^<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce=([0-9a-f]{32})>>>\n", re.M)


@dataclass(frozen=True)
class Window:
    url: str
    mode: str
    start: int
    length: int


def stored_page_text(result: ToolResult) -> str | None:
    """The page text of a stored ``fetch_external_url`` result (``None`` if it has none).

    The fence's body is already defused: no line inside carries the nonce, so the text is
    exactly what lies between the BEGIN line and the END line of that nonce.
    """
    content = result.content
    match = _BEGIN_RE.search(content)
    if match is None:
        return None
    end = f"\n<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce={match.group(1)}>>>"
    if not content.endswith(end):
        return None
    return content[match.end() : len(content) - len(end)]


def stored_fetch(
    user: Any, window: Window, *, conversation: str, since: datetime
) -> ToolCall | None:
    """The latest call of ``user`` in ``conversation`` (``calls.conversation_of(token)``:
    another token's, another OAuth client's or the web assistant's page is never read) that
    fetched ``window.url`` in ``window.mode`` since ``since`` and still has its content."""
    if not conversation:
        return None
    candidates = ToolCall.objects.filter(
        user=user,
        conversation=conversation,
        tool="fetch_external_url",
        state=CallState.SUCCEEDED,
        arguments__url=window.url,
        finished_at__gte=since,
        content_pruned_at__isnull=True,
    ).order_by("-finished_at")[:20]
    for call in candidates:
        if (call.arguments or {}).get("mode", "main") == window.mode:
            return call
    return None


def render(call: ToolCall, result: ToolResult, window: Window, data: dict[str, Any]) -> Answer:
    """The window of the page, fenced again; outside the fence only our words."""
    text = stored_page_text(result)
    if text is None:
        return Answer(result.content, data=data)
    total = len(text)
    if window.start >= total and total:
        return Answer(
            f"No more content: the page text has {total} characters (start_index {window.start}).",
            is_error=True,
            data={**data, "error": "no_more_content", "total": total},
        )
    end = min(window.start + window.length, total)
    finished = call.finished_at.isoformat() if call.finished_at else ""
    body = fence(
        text[window.start : end],
        source_url=window.url,
        status_line=f"characters {window.start}-{end} of {total} of the page text"
        + (f", fetched {finished}" if finished else ""),
    )
    data = {**data, "start_index": window.start, "end_index": end, "total": total}
    if end < total:
        body += (
            f"\n\nContent truncated. Call the fetch tool with a start_index of {end} "
            "to get more content."
        )
        data["next_start_index"] = end
    return Answer(body, data=data)
