"""Benchmark of the assistant: ``python -m tests.benchmarks.bench_assistant``.

1. ``bound_result`` (the 50,000-byte tool-result bound that keeps the fence) on a 2 MiB
   result and on adversarial ones (thousands of fence markers), as a ratio against the
   baseline of one pass over the same text (UTF-8 encoding plus one scan for markers).
2. The durable loop's overhead: one whole offline-planner turn (``post_message``: records,
   events, history as JSON, the state machine) against the bare Pydantic AI request it
   wraps (``model_request_sync`` on the same ``FunctionModel``), in the same process.

Needs no network.  Not collected by pytest.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable


def _best(fn: Callable[[], object], rounds: int = 7) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_bound() -> None:
    from django_webfetch.assistant.bounds import _MARKER_RE, bound_result
    from django_webfetch.text.fence import BEGIN_MARKER, END_MARKER

    page = "Lorem ipsum dolor sit amet, é€ consectetur. " * 48_000  # ~2 MiB
    opens = "".join(BEGIN_MARKER.format(nonce=f"{i:032x}") + " x " for i in range(20_000))
    mixed = "".join(
        BEGIN_MARKER.format(nonce=f"{i:032x}") + " y " + END_MARKER.format(nonce=f"{i + 1:032x}")
        for i in range(10_000)
    )
    for name, text in (("2 MiB page", page), ("20k open fences", opens), ("20k crossed", mixed)):
        base = _best(lambda t=text: (t.encode("utf-8"), _MARKER_RE.findall(t)))
        took = _best(lambda t=text: bound_result(t, 50_000))
        out = bound_result(text, 50_000)
        print(
            f"bound_result {name:16} {len(text.encode()) / 1e6:5.2f} MB: {took * 1e3:7.2f} ms"
            f"  baseline {base * 1e3:6.2f} ms  ratio {took / base:6.1f}x"
            f"  out {len(out.encode())} bytes"
        )


def bench_loop() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from pydantic_ai.direct import model_request_sync
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters

    from django_webfetch.assistant import services
    from django_webfetch.assistant.planner import offline_model
    from django_webfetch.models import AssistantRun

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="x", is_staff=True)
    conversation = services.create_conversation(user)
    model = offline_model()
    params = ModelRequestParameters(function_tools=[], allow_text_output=True)

    def bare() -> None:
        model_request_sync(
            model, [ModelRequest(parts=[UserPromptPart("hello")])], model_request_parameters=params
        )

    def turn() -> None:
        run = services.post_message(conversation, "hello", user=user)
        assert AssistantRun.objects.get(pk=run.pk).state == "completed"

    n = 30
    base = _best(lambda: [bare() for _ in range(n)], rounds=3) / n
    took = _best(lambda: [turn() for _ in range(n)], rounds=3) / n
    print(
        f"offline turn (durable loop) {took * 1e3:6.2f} ms  bare model request "
        f"{base * 1e3:6.2f} ms  ratio {took / base:5.1f}x"
    )


def main() -> None:
    bench_bound()
    bench_loop()


if __name__ == "__main__":
    main()
