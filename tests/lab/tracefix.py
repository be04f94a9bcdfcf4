"""Coverage on Python 3.11: a thread that starts while another one installs its trace
function gets ``RuntimeError: Cannot install a trace function while another trace function
is being installed`` from ``sys.settrace`` (python/cpython#98257, fixed in 3.12).  Under
coverage every new thread calls ``sys.settrace`` in ``threading._bootstrap_inner``; on a
busy machine two of the lab's threads (DNS, HTTP, the runner's) starting together can
collide and the loser dies before running a line.  The call is retried: the race is with
an installation that takes microseconds.  Nothing of the product is changed, and on 3.12
(where coverage uses sys.monitoring and the bug is fixed) nothing is done."""

from __future__ import annotations

import sys
import time

_MESSAGE = "another trace function is being installed"


def install() -> None:
    if sys.version_info >= (3, 12) or getattr(sys.settrace, "_webfetch_retry", False):
        return
    original = sys.settrace

    def settrace(function):  # type: ignore[no-untyped-def]
        for _attempt in range(200):
            try:
                return original(function)
            except RuntimeError as exc:
                if _MESSAGE not in str(exc):
                    raise
                time.sleep(0.0005)
        return original(function)

    settrace._webfetch_retry = True  # type: ignore[attr-defined]
    sys.settrace = settrace
