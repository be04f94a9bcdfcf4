"""Issue 8: a running call keeps its lease while it works, so the owner's read (``refresh``,
the API's GET) never declares a live call lost and throws its result away.

The run is real and slow: a tool that extracts the text of a real 256 KiB page again and
again for longer than several leases (``WEBFETCH_LEASE_SECONDS`` lowered to 2 s; the
process's heartbeat, ``durable.keeper``, renews it), run on the background runner's thread
while the owner reads the call in the test's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from django_webfetch import runs
from django_webfetch.models import CallState, ToolCall
from django_webfetch.net.policy import Scope
from django_webfetch.tools import Effect, Tool, ToolContext, ToolResult
from tests.benchmarks.bench_text import realistic_page
from tests.settle import SAFETY_NET, settled_call

real_db = pytest.mark.django_db(transaction=True, serialized_rollback=True)


class SlowExtractTool(Tool):
    """Extracts a real page's text repeatedly for ``seconds`` (a slow extraction)."""

    name = "runs_slow_extract"
    group = "runs-test"
    scope = Scope.NONE
    effect = Effect.READ
    enabled_by_default = True
    description = "Extract page text slowly (run tests)."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"seconds": {"type": "number"}},
        "required": ["seconds"],
        "additionalProperties": False,
    }

    def requires_approval(self, call: Any, context: ToolContext | None = None) -> bool:
        return False

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        from django_webfetch.text import extract_text

        body = realistic_page(256 * 1024).encode()
        stop = time.monotonic() + arguments["seconds"]
        rounds = 0
        while time.monotonic() < stop:
            text = extract_text(body, "text/html", url="https://example.org/")
            rounds += 1
        return ToolResult(content=text[:100], meta={"rounds": rounds})


@real_db
def test_a_slow_run_keeps_its_lease_and_its_result(tool_registry, editor, settings):
    settings.WEBFETCH_TIMEOUT = 1.0
    settings.WEBFETCH_LEASE_SECONDS = 2
    lease = runs.lease_seconds()
    assert lease == 2.0
    tool_registry.register(SlowExtractTool)
    # The call runs on the background runner's thread while the owner reads it here.
    call = runs.request_call("runs_slow_extract", {"seconds": 3 * lease + 1}, user=editor)
    seen: list[str] = []
    leases = set()
    started = time.monotonic()
    while True:
        row = runs.refresh(ToolCall.objects.get(pk=call.pk))  # the owner's GET: loss on read
        seen.append(row.state)
        if row.lease_expires_at is not None:
            leases.add(row.lease_expires_at)
        if row.finished:
            break
        assert time.monotonic() - started < SAFETY_NET, f"the call did not finish: {seen}"
        time.sleep(0.25)  # the owner's poll interval
    assert time.monotonic() - started > lease  # the run outlived its first lease
    call = settled_call(call)
    assert call.state == CallState.SUCCEEDED, call.reason
    assert call.attempts == 1
    assert call.tool_result().meta["rounds"] > 1
    assert "failed" not in seen and seen.count(CallState.RUNNING) > 10
    assert len(leases) >= 3  # the first lease and at least two renewals
