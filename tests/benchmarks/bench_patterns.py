"""Benchmark the issue-19 inputs on RE2 against a linear baseline in the same process.

Run: ``.venv/bin/python -m tests.benchmarks.bench_patterns``.

Each finding's input, at growing sizes, with the time it takes now; the baseline is one
``str.count`` pass over the same text (linear, C speed), so the ratio shows growth: a
linear engine keeps it roughly flat as the size doubles, a backtracking one multiplies it.
On ``re`` the same inputs took: the schema pattern, 35 characters, about an hour; the
planner's path, 39 characters, 3-9 s; the redaction, a 600-character ``Host``, 6-8 s.

* ``^([A-Za-z]+ ?)+$`` (a plugin schema pattern) on ``A`` * n + ``!`` through the tool
  argument validator;
* the offline planner's path search on ``/`` + ``a`` * n + ``#``;
* ``redact_text`` on a log line with a ``Host`` header of ``token`` * (n / 5).
"""

from __future__ import annotations

import timeit
from collections.abc import Callable

SIZES = (35, 350, 3_500, 35_000)


def _best(function: Callable[[], object]) -> float:
    return min(timeit.repeat(function, number=1, repeat=5))


def main() -> None:
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(INSTALLED_APPS=[], USE_TZ=True)
        django.setup()
    from django_webfetch.assistant.planner import _path
    from django_webfetch.diagnostics.paths import redact_text
    from django_webfetch.schemas import argument_errors

    evil = {"type": "string", "pattern": r"^([A-Za-z]+ ?)+$"}
    schema = {"type": "object", "properties": {"q": evil}}
    cases: list[tuple[str, Callable[[int], str], Callable[[str], object]]] = [
        ("schema pattern", lambda n: "A" * n + "!", lambda t: argument_errors(schema, {"q": t})),
        ("planner path", lambda n: "/" + "a" * n + "#", _path),
        (
            "redaction",
            lambda n: f"Invalid HTTP_HOST header: '{'token' * (n // 5)}'.",
            redact_text,
        ),
    ]
    print(f"{'case':<16}{'size':>8}{'time (s)':>12}{'ratio to str.count':>22}")
    for name, make, run in cases:
        for size in SIZES:
            text = make(size)
            spent = _best(lambda: run(text))  # noqa: B023 - called within the iteration
            baseline = _best(lambda: text.count("!"))  # noqa: B023
            print(f"{name:<16}{size:>8}{spent:>12.6f}{spent / max(baseline, 1e-9):>22.1f}")


if __name__ == "__main__":
    main()
