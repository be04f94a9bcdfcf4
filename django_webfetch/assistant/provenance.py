"""Which URLs a conversation has shown (issue 19, item 15).

:func:`seen_urls` collects, normalised (``net.urlnorm``), every absolute http(s) URL in

- what the editor wrote (the conversation's user messages), and
- the tool results of the conversation so far, as the model read them (tool messages),
  except the URLs of the call's own arguments: a tool that repeats what the model sent it
  (an echo, a search that quotes its query) does not turn a composed URL into a seen one.

The approval rule (``tools.approval``) lets a call of ``fetch_external_url`` skip approval
through the allowlist only for a URL in this set.  The model's own text never adds to it.
The scan is linear (``str.find`` and one pass per URL; no regular expression), each URL is
at most 2,048 characters as the tool's schema allows, and the set stops growing at
:data:`MAX_SEEN_URLS` (a URL past it counts as composed: it waits for a human).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django_webfetch.net.urlnorm import normalise_url

from .models import Message, MessageRole

__all__ = ["MAX_SEEN_URLS", "seen_urls", "urls_in"]

#: The most URLs one conversation's set holds.
MAX_SEEN_URLS = 20_000
_MAX_URL = 2048
#: A URL ends before any of these (or whitespace, or a control character).
_STOP = frozenset('<>"`{}|\\^')
#: Trailing characters that are more likely prose or Markdown than part of the URL: the
#: URL is taken with and without them.
_TRAILING = ".,;:!?'\")]}*_~"


def _candidates(text: str) -> Iterator[str]:
    position = 0
    while True:
        mark = text.find("://", position)
        if mark < 0:
            return
        position = mark + 3
        if text[max(mark - 5, 0) : mark].lower() == "https":
            start = mark - 5
        elif text[max(mark - 4, 0) : mark].lower() == "http":
            start = mark - 4
        else:
            continue
        end = position
        limit = min(len(text), start + _MAX_URL + 1)
        while end < limit and text[end] > " " and text[end] not in _STOP and text[end] != "\x7f":
            end += 1
        position = end
        if end - start > _MAX_URL:
            continue  # longer than any URL the tool takes
        url = text[start:end]
        yield url
        trimmed = url.rstrip(_TRAILING)
        if trimmed != url:
            yield trimmed


def urls_in(text: str) -> set[str]:
    """The normalised http(s) URLs written in ``text``."""
    found = set()
    for url in _candidates(text):
        normal = normalise_url(url)
        if normal is not None:
            found.add(normal)
    return found


def _argument_urls(arguments: Any) -> set[str]:
    found: set[str] = set()
    stack = [arguments]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found |= urls_in(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _shown(messages: Iterable[Message]) -> Iterator[set[str]]:
    for message in messages:
        urls = urls_in(message.content or "")
        if message.role == MessageRole.TOOL and message.tool_call is not None:
            urls -= _argument_urls(message.tool_call.arguments)
        yield urls


def seen_urls(conversation_id: Any) -> frozenset[str]:
    """Every URL the conversation has shown so far (module docstring), normalised."""
    messages = (
        Message.objects.filter(
            conversation_id=conversation_id, role__in=[MessageRole.USER, MessageRole.TOOL]
        )
        .select_related("tool_call")
        .order_by("seq")
    )
    seen: set[str] = set()
    for urls in _shown(messages.iterator()):
        for url in urls:
            if len(seen) >= MAX_SEEN_URLS:
                return frozenset(seen)
            seen.add(url)
    return frozenset(seen)
