"""What the retention policy adds to the periodic sweep (issue 29 finding 6).

Run: ``.venv/bin/python -m tests.benchmarks.bench_retention [calls]`` (default 20,000).

A SQLite database file holds ``calls`` finished tool calls, a tenth as many conversations
(4 messages, a run with a history and 4 run events each), as many egress events as calls
and a few hundred stored texts, most of it already pruned (the steady state of an
installation whose sweep keeps up).  Three figures, each the median of 7 rounds:

* the sweep's other work (expiry, lost workers: ``runs.expire_due`` + ``runs.recover_lost``)
  on that database: the baseline;
* ``retention.prune(limit=SWEEP_BATCH)`` in the steady state (nothing or little due);
* the same with a backlog (every call, conversation, event and text due): one sweep still
  handles at most ``SWEEP_BATCH`` rows per rule, so its cost is bounded by the batch, not
  by the backlog.

Targets: a backlog sweep touches at most ``4 x SWEEP_BATCH`` rows (counted), whatever the
backlog; in the steady state the retention's four questions cost <= 20 x the sweep's two
indexed ones, and do not grow with the tables (the pruned calls are outside the partial
index ``webfetch_call_unpruned``; conversations are asked about their runs in batches).
Measured on a loaded 2-core machine (load 45): 20,000 calls, 8.2 ms vs 0.58 ms (14 x);
5,000 calls, 11.3 ms vs 1.2 ms (9 x); a backlog sweep 1,800 rows in 0.3-0.5 s.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta

ROUNDS = 7


def _median(action: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fill(calls: int) -> None:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from django_webfetch.models import (
        AssistantRun,
        Conversation,
        EgressEvent,
        Message,
        RunEvent,
        RunState,
        StoredText,
        ToolCall,
    )

    user = get_user_model().objects.create_user("bench", password="x")
    now = timezone.now()
    old = now - timedelta(days=60)
    ToolCall.objects.bulk_create(
        ToolCall(
            tool="fetch_external_url",
            group="web",
            user=user,
            state="succeeded",
            arguments={"url": f"https://docs.example/?n={n}"},
            result={"content": "page text " * 50, "error": None, "meta": {}},
            finished_at=old,
        )
        for n in range(calls)
    )
    conversations = Conversation.objects.bulk_create(
        Conversation(owner=user, title=f"c{n}") for n in range(calls // 10)
    )
    runs = AssistantRun.objects.bulk_create(
        AssistantRun(
            conversation=c,
            user=user,
            state=RunState.COMPLETED,
            history=[{"parts": [{"content": "page text " * 50}]}],
        )
        for c in conversations
    )
    Message.objects.bulk_create(
        Message(conversation=r.conversation, run=r, seq=s, role="user", content="question")
        for r in runs
        for s in range(4)
    )
    RunEvent.objects.bulk_create(
        RunEvent(run=r, seq=s, kind="text", data={"text": "delta"}) for r in runs for s in range(4)
    )
    Conversation.objects.update(updated=old)
    AssistantRun.objects.update(updated=old, finished_at=old)
    EgressEvent.objects.bulk_create(
        EgressEvent(decision="fetched", url_host="docs.example", created=old - timedelta(days=60))
        for _ in range(calls)
    )
    anchor = ToolCall.objects.filter(content_pruned_at__isnull=True).first()
    StoredText.objects.bulk_create(
        StoredText(call=anchor, tool="t", conversation="c", url="u", text="x", expires_at=old)
        for _ in range(300)
    )


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    calls = int(args[0]) if args else 20_000
    directory = tempfile.mkdtemp(prefix="webfetch-bench-retention-")
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    import django
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = os.path.join(directory, "db.sqlite3")
    django.setup()
    from django.core.management import call_command

    from django_webfetch import retention, runs
    from django_webfetch.models import AssistantRun, Conversation, EgressEvent, ToolCall

    call_command("migrate", verbosity=0)
    _fill(calls)

    # The backlog: everything due at once.  One sweep handles at most a batch per rule.
    start = time.perf_counter()
    first = retention.prune(limit=retention.SWEEP_BATCH)
    backlog_seconds = time.perf_counter() - start
    touched = first.total
    print(
        f"backlog of {calls} calls, {calls // 10} conversations, {calls} events, 300 texts: "
        f"one sweep touched {touched} rows ({first.counts}) in {backlog_seconds * 1000:.0f} ms"
    )
    if touched > 4 * retention.SWEEP_BATCH:
        raise SystemExit(f"a sweep touched {touched} rows, over 4 x SWEEP_BATCH")

    retention.prune()  # the command: to the end
    assert not ToolCall.objects.filter(content_pruned_at__isnull=True).exists()
    assert not EgressEvent.objects.exists()
    assert not AssistantRun.objects.exclude(history=[]).exists()
    assert Conversation.objects.filter(content_pruned_at__isnull=False).count() == calls // 10

    baseline = _median(lambda: (runs.expire_due(), runs.recover_lost()))
    steady = _median(lambda: retention.prune(limit=retention.SWEEP_BATCH))
    ratio = steady / baseline
    print(
        f"steady state: sweep's other work {baseline * 1000:.2f} ms, "
        f"retention {steady * 1000:.2f} ms ({ratio:.2f} x)"
    )
    if ratio > 20:
        raise SystemExit(f"retention costs {ratio:.2f} x the sweep's other work (target <= 20)")


if __name__ == "__main__":
    main()
