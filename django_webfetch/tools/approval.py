"""The group approval rule (DESIGN.md §7), in one place.

A call of a tool that reaches the network waits for a human, unless the operator set its
group's ``skip_approval_with_allowlist`` AND the group grants somewhere to go (its
allowlist is not empty; for a plugin tool, the instance's effective grant).  Without a
group row the call waits.  ``ToolApprovalRule`` (``tools/base.py``), ``probe_url`` and the
plugin tools all decide with :func:`group_requires_approval`; the write-effect rule and a
tool's own extra approval stay in ``ToolApprovalRule``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["group_requires_approval", "has_allowlist", "tool_group"]


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
