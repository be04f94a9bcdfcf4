"""The group approval rule (DESIGN.md §7), in one place.

A call of a tool that reaches the network waits for a human, unless the operator set its
group's ``skip_approval_with_allowlist`` AND the group grants somewhere to go (its
allowlist is not empty; for a plugin tool, the instance's effective grant).  Without a
group row the call waits.  ``ToolApprovalRule`` (``tools/base.py``), ``probe_url`` and the
plugin tools all decide with :func:`group_requires_approval`; the write-effect rule and a
tool's own extra approval stay in ``ToolApprovalRule``.

A URL the model composed (issue 19, item 15): where approval is skipped through the
allowlist, a group with ``fetch_only_seen_urls`` (on by default) still sends a call of a
tool in the ``external_filtered`` scope (``fetch_external_url``) to a human unless its URL
is one the conversation already showed: the editor wrote it, or an earlier tool result
carried it (:func:`url_provenance`: the URL in its canonical form, ``net.urlnorm``, which
is also the form the tool sends).  The set
of seen URLs comes in with the call (``ToolContext.seen_urls``, built by
``assistant.provenance``); a call requested outside a conversation (the API) brings none,
and the rule does not apply to it: its caller wrote the URL.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from django_webfetch.net.urlnorm import normalise_url

__all__ = [
    "COMPOSED",
    "COMPOSED_NOTE",
    "SEEN",
    "composed_url_requires_approval",
    "group_requires_approval",
    "has_allowlist",
    "tool_group",
    "url_provenance",
]

#: :func:`url_provenance` of a URL the conversation showed / one the model composed.
SEEN = "seen"
COMPOSED = "composed"
#: What the approval card says of a composed URL.
COMPOSED_NOTE = "The model composed this URL; it did not appear in the conversation."


def group_requires_approval(group: Any, *, network: bool, granted: Callable[[], bool]) -> bool:
    """Does a call wait for a human under ``group`` (a ``ToolGroup`` row or ``None``)?

    ``network``: the call can reach the network at all (no egress, no approval).
    ``granted``: whether the group grants a destination (asked only when the skip flag is
    on, so that a group without it costs no query).
    """
    if not network:
        return False
    if group is None or not group.skip_approval_with_allowlist:
        return True
    return not granted()


def tool_group(slug: str) -> Any:
    """The ``ToolGroup`` row of ``slug``, or ``None``."""
    from django_webfetch.models import ToolGroup

    return ToolGroup.objects.filter(slug=slug).first()


def has_allowlist(group: Any) -> bool:
    """Has the group at least one allowlist entry?"""
    from django_webfetch.models import HostListEntry, ListKind

    return HostListEntry.objects.filter(group=group, list=ListKind.ALLOW).exists()


def url_provenance(url: Any, seen_urls: Collection[str] | None) -> str | None:
    """:data:`SEEN` when ``url`` is one of ``seen_urls`` (normalised) *as it is spelt*: in
    its one canonical form (``net.urlnorm``), the form the tool sends; :data:`COMPOSED`
    when it is not (another spelling of a seen URL included: its spelling could carry bits
    out, issue 29 finding 7); ``None`` when there is nothing to decide (no URL, or no
    conversation: ``seen_urls`` is ``None``).  ``fetch_external_url`` writes its URL in
    the canonical form before this is asked (``Tool.canonical_arguments``)."""
    if seen_urls is None or not isinstance(url, str):
        return None
    normal = normalise_url(url)
    return SEEN if normal is not None and normal == url and normal in seen_urls else COMPOSED


def composed_url_requires_approval(group: Any, provenance: str | None) -> bool:
    """Does a call whose group skipped approval through its allowlist still wait, because
    its URL is one the model composed and the group fetches only seen URLs?"""
    return (
        provenance == COMPOSED
        and group is not None
        and bool(getattr(group, "fetch_only_seen_urls", True))
    )
