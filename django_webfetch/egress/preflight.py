"""The pre-flight: what a group's *live* policy decides for a URL, without connecting.

The one home of "build the group's policy now, then run every guard step on the URL"
(DESIGN.md §7): the approval card of a requested call (``runs``), the CMS approvals
panel, a plugin instance's check and ``manage.py webfetch explain`` all call
:func:`live_verdict`.  DNS is looked up (unless ``resolve=False``); nothing is connected.
"""

from __future__ import annotations

from typing import Any

from django_webfetch.net.guard import Explanation, explain
from django_webfetch.net.policy import EgressPolicy, Scope

from .policy import policy_for

__all__ = ["live_verdict"]


def live_verdict(
    url: str,
    group: Any,
    *,
    user: Any = None,
    plugin_instance: Any = None,
    require_scope: Scope | str | None = None,
    resolve: bool = True,
) -> tuple[EgressPolicy, Explanation]:
    """``(policy, explanation)`` of ``url`` under ``group``'s live policy.

    Raises ``EgressDenied`` when the group gives no egress at all (``policy_for``).
    """
    policy = policy_for(
        group, user=user, plugin_instance=plugin_instance, require_scope=require_scope
    )
    return policy, explain(url, policy=policy, resolve=resolve)
