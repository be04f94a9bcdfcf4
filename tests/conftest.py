from __future__ import annotations

import itertools
import os
import resource
import tempfile
import time
import warnings
from collections.abc import Iterator
from typing import Any

import coverage
import pytest
from coverage.exceptions import CoverageWarning
from hypothesis import HealthCheck, settings

from tests.lab import tracefix

tracefix.install()  # before any lab thread starts (see the module)

# No example's answer depends on how busy the machine is: hypothesis's per-example deadline
# (200 ms by default) and its "too slow" health check are clocks, so they are off for every
# property test, on a developer's machine as in CI (where hypothesis's own "ci" profile,
# derandomized, is the parent).
settings.register_profile(
    "webfetch",
    parent=settings(),  # the active profile: "ci" under CI=true, else "default"
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("webfetch")

# The lab plugin moves the whole test process into a private network namespace before any
# test runs (see tests/lab/); the fixtures plugin holds the Django model factories.
pytest_plugins = ["tests.lab.plugin", "tests.fixtures"]


def _use_a_database_file() -> None:
    """Every session's SQLite test database is a file (in ``/dev/shm`` where there is one),
    never shared memory: real workers (other processes, tests/runs) open it, and it locks
    as a site's file database does.  Shared memory's cache locks a table for every other
    connection, and SQLite's busy timeout does not wait that out: a test reading a run the
    background runner was writing failed with "database table is locked" (tests/cms run on
    their own, where the file was tests/runs' choice only).  Runs at import, before
    pytest-django creates the test database; affects nothing but where SQLite keeps it."""
    from django.db import connections

    settings_dict = connections["default"].settings_dict
    if settings_dict["ENGINE"] != "django.db.backends.sqlite3":
        return
    test = settings_dict.setdefault("TEST", {})
    if test.get("NAME") in (None, "", ":memory:") and settings_dict["NAME"] == ":memory:":
        directory = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        test["NAME"] = os.path.join(directory, f"webfetch-test-{os.getpid()}.sqlite3")


_use_a_database_file()

# One throwaway PostgreSQL cluster per process for every directory: a module or conftest
# that imported the fixture had a session-scoped cluster of its own (an initdb each, five
# servers per worker).
from tests.runs.infra import postgres_cluster  # noqa: E402,F401


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_CPU_START = pytest.StashKey[float]()


_WALL_START = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU_START] = cpu_seconds()
    item.stash[_WALL_START] = time.time()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Each test's CPU seconds (set-up, call and tear-down; this process's threads and the
    child processes reaped meanwhile) as the ``cpu`` property of its JUnit entry, read by
    ``python -m tests.benchmarks.suite_times`` (issue 28: the suite's bound is CPU)."""
    if call.when == "teardown" and _CPU_START in item.stash:
        item.user_properties.append(("cpu", f"{cpu_seconds() - item.stash[_CPU_START]:.3f}"))
        # When it started and on which worker: how busy each worker was (suite_times).
        item.user_properties.append(("start", f"{item.stash[_WALL_START]:.3f}"))
        item.user_properties.append(("worker", os.environ.get("PYTEST_XDIST_WORKER", "")))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "unmeasured(reason): runs with coverage's tracer stopped; the other tests of net/ and "
        "text/ cover its lines (tests/conftest.py)",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test marked ``unmeasured`` runs (set-up, call and tear-down, the session fixtures it
    starts among them) with coverage's tracer stopped in this process (issue 28): a test of
    large inputs whose lines the other tests of ``net/`` and ``text/`` already cover cost 2.3
    times its CPU under the tracer.  Every assertion runs as before; the gate (100 % of
    ``net/`` and ``text/``, tests/run.sh) still reads every other test, so a line that only
    such a test reaches fails the gate instead of passing unmeasured."""
    current = None
    if item.get_closest_marker("unmeasured") is not None:
        current = coverage.Coverage.current()
    if current is None:
        return (yield)
    current.stop()
    try:
        return (yield)
    finally:
        _clear_pure_caches()
        with warnings.catch_warnings():
            # Restarted, coverage warns of the measured modules already imported (under
            # ``coverage run``, one process): they were imported while it measured.
            warnings.simplefilter("ignore", CoverageWarning)
            current.start()


def _clear_pure_caches() -> None:
    """Empty every ``functools`` cache of ``net/`` and ``text/``: a value first computed in an
    unmeasured test is computed again, traced, by the next test that needs it (otherwise a
    cache hit would hide its lines from the gate, depending on the order)."""
    import sys

    for name, module in list(sys.modules.items()):
        if not name.startswith(("django_webfetch.net", "django_webfetch.text")):
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and hasattr(value, "__wrapped__"):
                value.cache_clear()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests marked ``long`` (tens of seconds each: a nested PostgreSQL session, a walk
    of a few hundred pages) start first, spread over the xdist workers, instead of being a
    tail at the end of a run (docs/testing.rst, "Where the time goes").

    xdist's ``load`` scheduler first sends each worker a chunk of consecutive tests (of
    ``len(items) // workers // 4``), worker ``k`` the ``k``-th; the long tests are dealt
    round-robin to the fronts of those chunks.  This runs after pytest-randomly's shuffle
    and pytest-django's grouping (trylast), so the order is still the seed's.  A long test
    that flushes the database must restore it (``serialized_rollback``): it runs before
    tests that read what the migrations wrote."""
    from tests.scheduling import first_in_order

    long = [item for item in items if item.get_closest_marker("long") is not None]
    grouped = [item for item in first_in_order(items) if item not in long]
    if not long and not grouped:
        return
    for item in long:
        marker = item.get_closest_marker("django_db")
        flushes = marker is not None and marker.kwargs.get("transaction")
        if flushes and not marker.kwargs.get("serialized_rollback"):
            raise pytest.UsageError(
                f"{item.nodeid}: long and transactional without serialized_rollback: "
                "it cannot run first"
            )
    first = set(long) | set(grouped)
    rest = [item for item in items if item not in first]
    items[:] = spread_first(long + grouped, rest, *_xdist_chunks(config, len(items)))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist load`` with the modules of ``tests.scheduling.SHARED_SETUP`` sent whole."""
    if config.getvalue("dist") != "load":
        return None
    from tests.scheduling import GroupedLoadScheduling

    return GroupedLoadScheduling(config, log)


def _xdist_chunks(config: pytest.Config, count: int) -> tuple[int, int]:
    """The number of workers, and the size of the first chunk xdist's ``load`` scheduler
    sends each (as ``xdist.scheduler.load.LoadScheduling.schedule`` computes it)."""
    workerinput = getattr(config, "workerinput", None)
    workers = int(workerinput.get("workercount", 1)) if workerinput else 1
    if workers <= 1 or count < 2 * workers:
        return 1, count
    chunk = count // workers // 4
    maxschedchunk = config.getoption("maxschedchunk", None)
    if maxschedchunk:
        chunk = min(chunk, maxschedchunk)
    return workers, max(chunk, 2)


def spread_first(long: list[Any], rest: list[Any], workers: int, chunk: int) -> list[Any]:
    """``long`` dealt round-robin to the fronts of the first ``workers`` chunks of ``chunk``
    items, ``rest`` in its order around them."""
    fronts: list[list[Any]] = [[] for _ in range(workers)]
    for index, item in enumerate(long):
        fronts[index % workers].append(item)
    order: list[Any] = []
    remaining = iter(rest)
    for front in fronts:
        order.extend(front)
        order.extend(itertools.islice(remaining, max(0, chunk - len(front))))
    order.extend(remaining)
    return order
