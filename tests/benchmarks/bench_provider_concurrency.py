"""Benchmark of concurrent model streams on the background runner:
``python -m tests.benchmarks.bench_provider_concurrency`` (as root: it runs in a private
network namespace).

The scripted OpenAI-compatible provider of the tests (``tests/assistant/provider.py``,
HTTPS on a public-looking address of the namespace's loopback, through the guard and the
real SDK) thinks 0.3 s, then streams an answer of about 1,200 characters in 12-character
chunks, 20 ms apart (about 2 s).  Editors (one user each) post their questions at once to
a process whose background runner has the default 4 threads.  Measured, over ``ROUNDS``
rounds:

- **first text**: from posting the message to the run's first ``text_delta`` event (the
  event row's time), p50 and p99 over every run, with 4 and with 40 concurrent streams;
- **hung**: four editors' models hang (the provider holds the request until the
  provider timeout, set to ``HUNG_TIMEOUT`` here); the time a fifth editor's plain
  question takes to complete, against the same question asked alone (the delay).

The baseline, in the same process, is the runner thread holding the provider request for
as long as it streams (the runner before issue 33 item 2: ``detach`` off, which is what
Celery tasks and inline runs still do); "loop" is the shipped background runner, which
hands the request to the provider I/O loop.  Nothing leaves the namespace.  Not collected
by pytest.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock

from tests.benchmarks._netns import in_namespace
from tests.benchmarks.bench_streaming import CHUNK, CHUNK_DELAY, TEXT, THINK, _setup

ROUNDS = 3
HUNG_TIMEOUT = 10.0


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


@contextlib.contextmanager
def _mode(mode: str) -> Iterator[None]:
    """``thread``: the runner thread waits for its provider request (the baseline)."""
    from django_webfetch.runs.runner import runner

    if mode == "loop":
        yield
        return
    with mock.patch.object(runner, "on_worker_thread", lambda: False):
        yield


def _users(count: int) -> list[Any]:
    from django.contrib.auth import get_user_model

    User = get_user_model()
    return [
        User.objects.get_or_create(username=f"editor{n}", defaults={"is_staff": True})[0]
        for n in range(count)
    ]


def _post(user: Any, content: str) -> tuple[Any, float]:
    from django.utils import timezone

    from django_webfetch.assistant.services import create_conversation, post_message

    conversation = create_conversation(user)
    posted = timezone.now()
    run = post_message(conversation, content, user=user)
    return run.pk, posted.timestamp()


def _first_text(runs: list[tuple[Any, float]]) -> list[float]:
    from django_webfetch.assistant.models import RunEvent

    latencies = []
    for run_id, posted in runs:
        first = (
            RunEvent.objects.filter(run_id=run_id, kind="text_delta")
            .order_by("seq")
            .values_list("created", flat=True)
            .first()
        )
        assert first is not None, f"run {run_id} streamed no text"
        latencies.append(first.timestamp() - posted)
    return latencies


def _streams(provider: Any, users: list[Any]) -> list[float]:
    from django_webfetch.assistant.models import AssistantRun
    from django_webfetch.runs.runner import runner
    from tests.assistant.provider import Turn

    provider.reset()
    provider.add(
        *[Turn(text=TEXT, chunk=CHUNK, chunk_delay=CHUNK_DELAY, delay=THINK) for _ in users]
    )
    runs = [_post(user, f"question {n}") for n, user in enumerate(users)]
    assert runner.wait_idle(600), "the runs did not end"
    states = set(
        AssistantRun.objects.filter(pk__in=[r for r, _ in runs]).values_list("state", flat=True)
    )
    assert states == {"completed"}, states
    return _first_text(runs)


def _hung(provider: Any, users: list[Any], hung: int = 4) -> float:
    """Seconds a fifth editor's plain question takes while ``hung`` models hang."""
    from django.test import override_settings

    from django_webfetch.assistant.models import AssistantRun
    from django_webfetch.runs.runner import runner
    from tests.assistant.provider import Turn

    hold = threading.Event()

    def turn(record: Any) -> Turn:
        if "hang" in str(record.body):
            return Turn(text="late", hold=hold)
        return Turn(text=TEXT, chunk=CHUNK, chunk_delay=CHUNK_DELAY, delay=THINK)

    provider.reset()
    provider.add(*[turn] * 16)
    with override_settings(WEBFETCH_ASSISTANT_TIMEOUT=HUNG_TIMEOUT):
        for n, user in enumerate(users[:hung]):
            _post(user, f"hang {n}")
        while sum("hang" in str(r.body) for r in provider.requests) < hung:
            time.sleep(0.01)
        start = time.monotonic()
        run_id, _ = _post(users[hung], "plain")
        while not AssistantRun.objects.get(pk=run_id).finished:
            time.sleep(0.01)
        took = time.monotonic() - start
        assert AssistantRun.objects.get(pk=run_id).state == "completed"
        hold.set()
        assert runner.wait_idle(600)
    return took


def main(argv: list[str] | None = None) -> None:
    if not in_namespace("tests.benchmarks.bench_provider_concurrency"):
        return
    sys.setswitchinterval(0.001)
    with tempfile.TemporaryDirectory(prefix="webfetch-bench-provider-") as workdir:
        provider, _ca, _cookies = _setup(workdir)
        from django_webfetch.runs.runner import runner

        runner.start()
        users = _users(40)
        _streams(provider, users[:2])  # warm-up (imports, TLS, the SDK)
        results: dict[tuple[str, int], tuple[float, float]] = {}
        hung: dict[str, float] = {}
        alone: dict[str, float] = {}
        for mode in ("thread", "loop"):
            with _mode(mode):
                for count in (4, 40):
                    latencies = [
                        x for _ in range(ROUNDS) for x in _streams(provider, users[:count])
                    ]
                    p50, p99 = _percentile(latencies, 0.5), _percentile(latencies, 0.99)
                    results[mode, count] = (p50, p99)
                    print(
                        f"{mode:6} {count:2} streams: first text p50 {p50 * 1e3:8.1f} ms"
                        f"  p99 {p99 * 1e3:8.1f} ms  ({len(latencies)} runs)",
                        flush=True,
                    )
                alone[mode] = statistics.median(_hung(provider, users, 0) for _ in range(ROUNDS))
                hung[mode] = statistics.median(_hung(provider, users) for _ in range(ROUNDS))
                print(
                    f"{mode:6} 4 hung models: a fifth editor's answer took"
                    f" {hung[mode] * 1e3:8.1f} ms, alone {alone[mode] * 1e3:8.1f} ms"
                    f" (delay {(hung[mode] - alone[mode]) * 1e3:8.1f} ms; median of {ROUNDS})",
                    flush=True,
                )
        for count in (4, 40):
            before, after = results["thread", count], results["loop", count]
            print(
                f"{count:2} streams: first text thread / loop = p50 {before[0] / after[0]:.1f}x,"
                f" p99 {before[1] / after[1]:.1f}x"
            )
        print(
            "4 hung models: a fifth editor's answer, thread / loop ="
            f" {hung['thread'] / hung['loop']:.1f}x"
        )
        runner.stop()
        provider.stop()


if __name__ == "__main__":
    main()
