"""Reading a long text in parts, from the text kept with the call that fetched it (issue 21).

A tool that extracts a page (``fetch_external_url``, ``read_page``) keeps its whole text (at
most ``MAX_STORED_CHARS`` characters, with its link URLs) in a ``StoredText`` row, for the
conversation, the user and the URL of the call, for ``WEBFETCH_STORED_TEXT_TTL`` seconds
(the retention sweep deletes it then: ``django_webfetch.retention``).  The conversation of
an assistant run's call is the run's assistant conversation (every step and every later
run of it share the text), of any other call its caller's ``conversation`` text.
The tool's ``page`` argument picks the part: part 1 comes from the fetch, a later part from
the stored text, without another network request.  Each part says where it is
(``part 2 of 5, characters 20,000–40,000``) in the status line, outside the fence, in our
words; its link definitions follow it inside the fence.

A later part read from a stored text makes no request, so it needs no new approval
(``ToolApprovalRule``): the stored text exists only because a fetch of that URL in that
conversation ran, approved or allowed.  A new URL, another conversation, another user, or a
text past its time is a new fetch, with the approval rule as always.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from django.utils import timezone

from django_webfetch.conf import conf
from django_webfetch.text import MAX_RESULT_BYTES, MAX_TEXT_CHARS, Document, Part, fence
from django_webfetch.values import ToolResult

if TYPE_CHECKING:
    from .base import ToolContext

__all__ = [
    "MAX_PAGES",
    "PAGE_PARAMETER",
    "conversation_of",
    "find",
    "keep",
    "part_of",
    "reads_stored_part",
    "render_part",
]

#: Parts of at most ``MAX_TEXT_CHARS`` characters of a text of at most ``MAX_STORED_CHARS``.
MAX_PAGES = 20
PAGE_PARAMETER: dict[str, Any] = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_PAGES,
    "default": 1,
    "description": (
        "Which part of a long text to read (1, the default, is the start). A long text comes"
        " in parts of about 20,000 characters; each part's status line says where it is"
        ' ("part 2 of 5, characters 20,000–40,000"). A later part of the same URL in this'
        " conversation is read from the text already fetched: no new request, no new"
        " approval."
    ),
}
#: Bytes a part may take in the fenced result beside the preamble and the markers.
_PART_BYTES = MAX_RESULT_BYTES - 4_000


def conversation_of(context: ToolContext) -> str:
    """The key of the conversation of the call that runs in ``context`` ("" when there is
    none): the assistant conversation of the run that asked for it (``ToolCall.run``, a
    typed link the run writes), else a digest of the caller's free-text ``conversation``
    (the MCP server's ``mcp:token-<id>``, an API client's text; never parsed, and not
    copied into the stored row)."""
    from django_webfetch.models import ToolCall

    try:
        call_id = uuid.UUID(str(context.call_id))
    except ValueError:
        return ""
    row = (
        ToolCall.objects.filter(pk=call_id)
        .values_list("conversation", "run__conversation_id")
        .first()
    )
    if row is None:
        return ""
    # NULL for a call no run asked for (the stubs type the joined column as never NULL).
    text, assistant_conversation = cast("tuple[str, uuid.UUID | None]", row)
    if assistant_conversation is not None:
        return f"assistant-conversation:{assistant_conversation.hex}"
    if not text:
        return ""
    return f"caller:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


def _user_id(user: Any) -> Any:
    return getattr(user, "pk", None)


def find(tool: str, context: ToolContext, url: str, mode: str) -> Any:
    """The unexpired text ``tool`` kept for ``url`` (and ``mode``) in this call's
    conversation, for this user; None when there is none."""
    from django_webfetch.models import StoredText

    conversation = conversation_of(context)
    if not conversation or _user_id(context.user) is None:
        return None
    return (
        StoredText.objects.filter(
            tool=tool,
            conversation=conversation,
            user_id=_user_id(context.user),
            url=url[:2048],
            mode=mode,
            expires_at__gt=timezone.now(),
        )
        .order_by("-created")
        .first()
    )


def keep(
    tool: str,
    context: ToolContext,
    url: str,
    document: Document,
    *,
    mode: str,
    status_line: str,
    final_url: str = "",
) -> Any:
    """Keep ``document`` with the call (None when the call has no conversation: nothing
    could ask for its later parts)."""
    conversation = conversation_of(context)
    if not conversation or _user_id(context.user) is None:
        return None
    from django_webfetch.models.outage import survive_outage

    return survive_outage(
        lambda: _keep(tool, context, url, document, conversation, mode, status_line, final_url),
        what="the kept text",
    )


def _keep(
    tool: str,
    context: ToolContext,
    url: str,
    document: Document,
    conversation: Any,
    mode: str,
    status_line: str,
    final_url: str,
) -> Any:
    from django_webfetch.models import StoredText, ToolCall

    return StoredText.objects.create(
        call=ToolCall.objects.get(pk=uuid.UUID(str(context.call_id))),
        tool=tool,
        conversation=conversation,
        user_id=_user_id(context.user),
        url=url[:2048],
        final_url=final_url[:2048],
        mode=mode,
        status_line=status_line[:200],
        text=document.text,
        links=list(document.links),
        expires_at=timezone.now() + timedelta(seconds=conf.WEBFETCH_STORED_TEXT_TTL),
    )


def reads_stored_part(tool: Any, arguments: Mapping[str, Any], context: Any) -> bool:
    """Whether a call reads a later part of a text kept for it (no request is made)."""
    page = arguments.get("page", 1)
    url = arguments.get("url") or arguments.get("path") or arguments.get("page_id")
    if not isinstance(page, int) or page <= 1 or url is None or context is None:
        return False
    return find(tool.name, context, str(url), str(arguments.get("mode", "main"))) is not None


def _part_size(document: Document) -> int:
    """Characters a part may hold so that it fits the fenced result's byte bound."""
    text = document.text
    if not text:
        return MAX_TEXT_CHARS
    bytes_per_char = len(text.encode("utf-8")) / len(text)
    return max(1_000, min(MAX_TEXT_CHARS, int(_PART_BYTES / bytes_per_char)))


def part_of(document: Document, number: int) -> Part | None:
    return document.part(number, _part_size(document))


def render_part(
    document: Document,
    number: int,
    *,
    source_url: str,
    source: str = "external",
    status_line: str,
    preface: str = "",
    meta: Mapping[str, Any] | None = None,
    stored: bool = False,
) -> ToolResult:
    """Part ``number`` of ``document`` in the fence, its place in the status line."""
    part = part_of(document, number)
    if part is None:
        total = len(document.boundaries(_part_size(document)))
        return ToolResult.failure(
            "no_such_part",
            f"The text has {total} part(s); there is no part {number}.",
            parts=total,
        )
    line = status_line
    if part.total > 1:
        line += f", {part.location}"
        if part.number < part.total:
            line += f"; page={part.number + 1} reads the next part"
    if stored:
        line += " (from the text already fetched, no new request)"
    text = f"{preface}{part.text}" if preface else part.text
    return ToolResult(
        content=fence(text, source_url=source_url, status_line=line, source=source),
        meta={
            **dict(meta or {}),
            "part": part.number,
            "parts": part.total,
            "start": part.start,
            "end": part.end,
            "chars": len(document.text),
            "stored": stored,
        },
    )
