"""Tool calls as durable runs: a package of journeys, re-exported here.

============================  ==========================================================
``runs.errors``               the error tree (below)
``runs.durable``              lease + heartbeat, compare-and-set, SQLite retry, worker
                              label: the plumbing shared with the assistant's runs
``runs.limits``               settings-derived values: async or not, time limits, lease
``runs.permissions``          who may approve, read, cancel; the calls a user may read
``runs.results``              the one reader of a call's result (who reads what it returned)
``runs.state``                :func:`transition`, the one place that changes a call
``runs.request``              requesting a call, with the pre-flight; refusing one
``runs.decide``               approve, deny, cancel
``runs.execute``              running an approved call once
``runs.recover``              expiry, lost workers, lost messages, pruning, the sweep
``runs.queue``                starting an approved call; queueing and re-queueing
``runs.polling``              when a client should ask about an open call again
``runs.settle``               waiting for a call just requested or approved to settle
``runs.dispatch``             work sent by task name (Celery, or an in-process handler)
``runs.runner``               the background runner: in-process threads, periodic sweep
``runs.bounds``               what input may be stored
============================  ==========================================================

The errors (``runs.errors``) all derive from ``RunError``, each with a stable ``.code``.

Runs happen off the request: on the background runner's threads in the web process (the
default, ``runs.runner``), or, with ``WEBFETCH_ASYNC_RUNS`` on, in the
``django_webfetch.run_tool_call`` Celery task on a worker, once the transaction that
approved them has committed.  ``WEBFETCH_RUNNER = "inline"`` runs them right where the
call was approved (tests).
"""

from __future__ import annotations

from django_webfetch.models.calls import FINISHED_STATES

from .bounds import InputRejected
from .decide import approve, cancel, deny
from .errors import (
    ApprovalPermissionDenied,
    CallExpiredError,
    CancelPermissionDenied,
    CancelReasonRequired,
    InvalidTransition,
    RunError,
    SelfApprovalDenied,
    ToolNotOfferedError,
)
from .execute import ExecuteOutcome, execute
from .limits import (
    MAX_ATTEMPTS,
    lease_seconds,
    off_request,
    runner_mode,
    runs_async,
    step_seconds,
    time_limits,
)
from .permissions import (
    APPROVE_PERMISSION,
    can_approve,
    can_cancel,
    can_read,
    can_read_result,
    reads_every_result,
    visible_calls,
)
from .polling import POLL_MAX, POLL_MIN, poll_after, retry_after_header
from .recover import SweepReport, expire_due, prune_calls, recover_lost, refresh, sweep
from .request import preflight, refuse_call, request_call
from .results import read_result, result_dict, withheld
from .settle import SETTLING_STATES, settle
from .state import call_finished, call_transitioned, transition

__all__ = [
    "APPROVE_PERMISSION",
    "FINISHED_STATES",
    "MAX_ATTEMPTS",
    "POLL_MAX",
    "POLL_MIN",
    "SETTLING_STATES",
    "ApprovalPermissionDenied",
    "CallExpiredError",
    "CancelPermissionDenied",
    "CancelReasonRequired",
    "ExecuteOutcome",
    "InputRejected",
    "InvalidTransition",
    "RunError",
    "SelfApprovalDenied",
    "SweepReport",
    "ToolNotOfferedError",
    "approve",
    "call_finished",
    "call_transitioned",
    "can_approve",
    "can_cancel",
    "can_read",
    "can_read_result",
    "cancel",
    "deny",
    "execute",
    "expire_due",
    "lease_seconds",
    "off_request",
    "poll_after",
    "preflight",
    "prune_calls",
    "recover_lost",
    "refresh",
    "refuse_call",
    "request_call",
    "retry_after_header",
    "runner_mode",
    "runs_async",
    "settle",
    "step_seconds",
    "sweep",
    "time_limits",
    "transition",
    "read_result",
    "reads_every_result",
    "result_dict",
    "visible_calls",
    "withheld",
]
