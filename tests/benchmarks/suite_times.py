"""Where the suite's time goes: the worker-seconds and the CPU seconds of each test
directory, from the JUnit report ``tests/run.sh`` writes (``.pytest-results.xml``; setup +
call + teardown of each test, summed over the workers), the slowest tests and the tests that
take the most CPU.

A test's CPU seconds are its ``cpu`` property (tests/conftest.py): user + system time of the
worker process (every thread) and of the child processes it reaped meanwhile.  A process that
outlives its test (a pooled plugin process, a server of a session fixture) counts for the test
that reaps it; one that is never reaped (PostgreSQL's server, started by ``pg_ctl``) not at
all.  On 2 cores the suite's wall time cannot be under half its CPU seconds (issue 28).

    python -m tests.benchmarks.suite_times [REPORT...] [--top N]

A full run writes two reports (``.pytest-results-pure.xml``: ``tests/net`` and ``tests/text``
under coverage; ``.pytest-results.xml``: the rest); both are read when no report is named.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter


def directory_of(classname: str) -> str:
    parts = classname.split(".")
    if len(parts) > 2 and parts[0] == "tests":
        return parts[1] if not parts[1].startswith("test_") else "(top)"
    return "(top)"


def main(argv: list[str]) -> int:
    paths = [".pytest-results-pure.xml", ".pytest-results.xml"]
    top = 10
    args = list(argv)
    if "--top" in args:
        index = args.index("--top")
        top = int(args[index + 1])
        del args[index : index + 2]
    if args:
        paths = args
    cases: list[ET.Element] = []
    for number, path in enumerate(paths):
        try:
            found = list(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError) as exc:
            print(f"no JUnit report at {path}: {exc}")
            continue
        if number:
            # The sessions of one run (tests/run.sh runs two side by side) name their
            # workers alike: a later report's are told apart by its number.
            for case in found:
                for prop in case.iter("property"):
                    if prop.get("name") == "worker" and prop.get("value"):
                        prop.set("value", f"{prop.get('value')}/{number + 1}")
        cases.extend(found)
    if not cases:
        return 0
    seconds: dict[str, float] = {}
    cpu: dict[str, float] = {}
    counts: Counter[str] = Counter()
    slowest: list[tuple[float, str]] = []
    busiest: list[tuple[float, str]] = []
    for case in cases:
        took = float(case.get("time") or 0.0)
        used = cpu_of(case)
        where = directory_of(case.get("classname") or "")
        name = f"{case.get('classname')}::{case.get('name')}"
        seconds[where] = seconds.get(where, 0.0) + took
        cpu[where] = cpu.get(where, 0.0) + (used or 0.0)
        counts[where] += 1
        slowest.append((took, name))
        if used is not None:
            busiest.append((used, name))
    total = sum(seconds.values())
    total_cpu = sum(cpu.values())
    print(f"{'directory':<14} {'tests':>6} {'worker-s':>9} {'share':>6} {'cpu-s':>7} {'share':>6}")
    for where, took in sorted(seconds.items(), key=lambda item: -item[1]):
        cpu_share = cpu[where] / total_cpu if total_cpu else 0.0
        print(
            f"{where:<14} {counts[where]:>6} {took:>9.0f} {took / total:>6.1%}"
            f" {cpu[where]:>7.0f} {cpu_share:>6.1%}"
        )
    print(f"{'total':<14} {sum(counts.values()):>6} {total:>9.0f} {'':>6} {total_cpu:>7.0f}")
    print(f"slowest {top}:")
    for took, name in sorted(slowest, reverse=True)[:top]:
        print(f"  {took:7.1f} s  {name}")
    if busiest:
        print(f"most CPU {top}:")
        for used, name in sorted(busiest, reverse=True)[:top]:
            print(f"  {used:7.1f} s  {name}")
    workers(cases)
    return 0


def workers(cases: list[ET.Element]) -> None:
    """How busy each xdist worker was: from its first test's start to its last test's end,
    the seconds inside tests and the gaps between them (the ``start`` and ``worker``
    properties of tests/conftest.py; reports without them print nothing)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for case in cases:
        start = prop_of(case, "start")
        if start is None:
            continue
        worker = prop_of_text(case, "worker") or "main"
        spans.setdefault(worker, []).append((start, start + float(case.get("time") or 0.0)))
    if not spans:
        return
    first = min(start for runs in spans.values() for start, _ in runs)
    last = max(end for runs in spans.values() for _, end in runs)
    print(f"workers (run of {last - first:.0f} s from the first test's start):")
    print(f"  {'worker':<8} {'first':>7} {'last':>7} {'busy':>7} {'gaps':>7}")
    for worker, runs in sorted(spans.items()):
        begin, end = min(s for s, _ in runs), max(e for _, e in runs)
        busy = sum(e - s for s, e in runs)
        print(
            f"  {worker:<8} {begin - first:>7.0f} {end - first:>7.0f} {busy:>7.0f}"
            f" {end - begin - busy:>7.0f}"
        )


def prop_of(case: ET.Element, name: str) -> float | None:
    text = prop_of_text(case, name)
    return None if text is None else float(text or 0.0)


def prop_of_text(case: ET.Element, name: str) -> str | None:
    for prop in case.iter("property"):
        if prop.get("name") == name:
            return prop.get("value") or ""
    return None


def cpu_of(case: ET.Element) -> float | None:
    """The test's ``cpu`` property (CPU seconds), if its report has one."""
    for prop in case.iter("property"):
        if prop.get("name") == "cpu":
            return float(prop.get("value") or 0.0)
    return None


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
