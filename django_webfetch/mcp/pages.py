"""The site's published pages as MCP resources, through the content tools.

``resources/list`` is a ``list_pages`` call and ``resources/read`` a ``read_page`` call, both
through ``runs.request_call`` for the token's user: the same offer (the ``content`` group is
enabled), the same page permissions (django CMS's view rules, "login required") and the
same audit as when the assistant or the API reads a page, and the same ``calls`` rate
(``budgets.rates``): over it nothing is requested and :class:`ResourcesThrottled` is raised.
Nothing is offered when the content tools are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django_webfetch import runs
from django_webfetch.models import AccessToken, CallState
from django_webfetch.tools import tools_for_user

from .calls import conversation_of, over_calls_rate

__all__ = [
    "PAGE_URI",
    "PageResource",
    "ResourceNotFound",
    "ResourcesThrottled",
    "list_resources",
    "read_resource",
]

#: ``webfetch://page/<id>``: one published page of this site, by its django CMS id.
PAGE_URI = "webfetch://page/{id}"
_PAGE_URI_RE = re.compile(r"^webfetch://page/([1-9][0-9]{0,9})$")
MEDIA_TYPE = "text/markdown"


class ResourceNotFound(LookupError):
    """No such resource, or not one this user may read (one answer for both)."""


class ResourcesThrottled(Exception):
    """The user is over the ``calls`` rate: nothing was requested (``retry_after`` s)."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(f"over the rate for tool calls; try again in {retry_after} s")


def _count_call(token: AccessToken) -> None:
    """A resource read is a tool call: it counts in the user's ``calls`` rate first."""
    seconds = over_calls_rate(token.user)
    if seconds is not None:
        raise ResourcesThrottled(seconds)


@dataclass(frozen=True)
class PageResource:
    uri: str
    name: str
    title: str
    description: str


def _settle_timeout() -> float:
    """How long a resource waits for its call: the call's own hard time limit (the call
    runs off the request, on the background runner or a worker)."""
    return float(runs.time_limits()[1])


def _offered(user: Any, name: str) -> bool:
    return any(t.name == name for t in tools_for_user(user))


def list_resources(token: AccessToken) -> list[PageResource]:
    if not _offered(token.user, "list_pages"):
        return []
    _count_call(token)
    call = runs.request_call("list_pages", {}, user=token.user, conversation=conversation_of(token))
    call = runs.settle(call, timeout=_settle_timeout())
    result = runs.read_result(token.user, call)
    if call.state != CallState.SUCCEEDED or result is None or not result.ok:
        return []
    resources = []
    for item in result.meta.get("items") or ():
        resources.append(
            PageResource(
                uri=PAGE_URI.format(id=int(item["id"])),
                name=str(item.get("path") or "/"),
                title=str(item.get("title") or ""),
                description="A published page of this site (its text, fenced as untrusted).",
            )
        )
    return resources


def read_resource(token: AccessToken, uri: str) -> str:
    """The fenced text of the page ``uri`` names; :class:`ResourceNotFound` otherwise."""
    match = _PAGE_URI_RE.match(uri)
    if match is None or not _offered(token.user, "read_page"):
        raise ResourceNotFound(uri)
    _count_call(token)
    call = runs.request_call(
        "read_page",
        {"page_id": int(match.group(1))},
        user=token.user,
        conversation=conversation_of(token),
    )
    call = runs.settle(call, timeout=_settle_timeout())
    result = runs.read_result(token.user, call)
    if call.state != CallState.SUCCEEDED or result is None or not result.ok:
        raise ResourceNotFound(uri)
    return str(result.content)
