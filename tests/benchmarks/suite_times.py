"""Where the suite's time goes: the worker-seconds of each test directory, from the JUnit
report ``tests/run.sh`` writes (``.pytest-results.xml``; setup + call + teardown of each
test, summed over the workers), and the slowest tests.

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
    cases = []
    for path in paths:
        try:
            cases.extend(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError) as exc:
            print(f"no JUnit report at {path}: {exc}")
    if not cases:
        return 0
    seconds: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    slowest: list[tuple[float, str]] = []
    for case in cases:
        took = float(case.get("time") or 0.0)
        where = directory_of(case.get("classname") or "")
        seconds[where] += took
        counts[where] += 1
        slowest.append((took, f"{case.get('classname')}::{case.get('name')}"))
    total = sum(seconds.values())
    print(f"{'directory':<14} {'tests':>6} {'worker-s':>9} {'share':>6}")
    for where, took in seconds.most_common():
        print(f"{where:<14} {counts[where]:>6} {took:>9.0f} {took / total:>6.1%}")
    print(f"{'total':<14} {sum(counts.values()):>6} {total:>9.0f}")
    print(f"slowest {top}:")
    for took, name in sorted(slowest, reverse=True)[:top]:
        print(f"  {took:7.1f} s  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
