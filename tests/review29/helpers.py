"""Helpers of the review29 tests: settling a call without depending on the runner mode."""

from __future__ import annotations

import time
from typing import Any

from django_webfetch import runs
from django_webfetch.models import ToolCall


def settled(call: Any, limit: float = 30.0) -> ToolCall:
    """``call`` once it finished, whatever ``WEBFETCH_RUNNER`` is: an approved call is run
    here (``runs.execute`` is idempotent: a call the background runner took is left to it)."""
    deadline = time.monotonic() + limit
    pk = getattr(call, "pk", call)
    while True:
        row = ToolCall.objects.get(pk=pk)
        if row.finished:
            return row
        if row.state == "approved":
            runs.execute(row.pk)
            continue
        if time.monotonic() > deadline:
            raise AssertionError(f"call {pk} did not finish: {row.state}")
        time.sleep(0.05)
