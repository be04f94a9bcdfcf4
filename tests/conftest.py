from __future__ import annotations

import pytest

from tests.lab import tracefix

tracefix.install()  # before any lab thread starts (see the module)

# The lab plugin moves the whole test process into a private network namespace before any
# test runs (see tests/lab/); the fixtures plugin holds the Django model factories.
pytest_plugins = ["tests.lab.plugin", "tests.fixtures"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests marked ``long`` (tens of seconds each: a nested PostgreSQL session, a walk
    of a few hundred pages) go first, in the order they had: xdist's ``load`` scheduler
    hands the first tests out one per worker, so they start at once on different workers
    instead of being a tail at the end of a run.  After pytest-randomly's shuffle and
    pytest-django's grouping (trylast), so the order is still the seed's.  A long test that
    flushes the database must restore it (``serialized_rollback``): it runs before tests
    that read what the migrations wrote."""
    long = [item for item in items if item.get_closest_marker("long") is not None]
    for item in long:
        marker = item.get_closest_marker("django_db")
        flushes = marker is not None and marker.kwargs.get("transaction")
        if flushes and not marker.kwargs.get("serialized_rollback"):
            raise pytest.UsageError(
                f"{item.nodeid}: long and transactional without serialized_rollback: "
                "it cannot run first"
            )
    if long:
        rest = [item for item in items if item.get_closest_marker("long") is None]
        items[:] = long + rest
