"""Who reads what a tool call returned: the one door (DESIGN.md §10, issue 29 finding 1).

A call's ``result`` (a page's text, search hits, a source file, a plugin's answer) is read
by the call's requester and by superusers; whoever may read the call's record
(``runs.permissions.can_read``: approvers, for a call that went to approval) also reads the
result of a call that never ran (denied, expired, cancelled: the outcome in the host's
words).  Nobody else, on any surface.

Every surface that shows a principal a result reads it here, and nowhere else: the API's
serializer, the admin's tool-call pages, the MCP tools (``webfetch_call_status``,
``fetch``'s paging) and resources, the assistant's loop (what the model reads back for its
run's user).  ``tests/runs/test_one_door_for_results.py`` fails on any module of the
package, other than this one and the writers (``runs.state``, ``runs.decide``, the
pruning of ``runs.recover``), that touches ``ToolCall.result`` or ``tool_result()``; and
``tests/runs/test_every_surface_reads_results_through_the_door.py`` walks every URL
route, MCP handler and tool, admin registration and mail.
"""

from __future__ import annotations

from typing import Any

from django_webfetch.models import ToolCall
from django_webfetch.values import ToolResult

from .permissions import can_read_result

__all__ = ["read_result", "result_dict", "withheld"]


def read_result(user: Any, call: ToolCall) -> ToolResult | None:
    """``call``'s result as a ``ToolResult`` for ``user``; ``None`` while it has none, and
    for a reader who may not read it (:func:`withheld` tells the two apart)."""
    if call.result is None or not can_read_result(user, call):
        return None
    return ToolResult.from_dict(call.result)


def result_dict(user: Any, call: ToolCall) -> dict[str, Any] | None:
    """``call``'s stored result (JSON) for ``user``; ``None`` as :func:`read_result`."""
    if call.result is None or not can_read_result(user, call):
        return None
    return dict(call.result)


def withheld(user: Any, call: ToolCall) -> bool:
    """``True``: ``call`` has a result that ``user`` may not read."""
    return call.result is not None and not can_read_result(user, call)
