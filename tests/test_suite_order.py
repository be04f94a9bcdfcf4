"""The long tests start first, spread over the xdist workers (tests/conftest.py): checked
against xdist's own ``load`` scheduler, fed the order the hook makes."""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler.load import LoadScheduling

from tests.conftest import _xdist_chunks, spread_first


class _Config:
    def __init__(self, workers: int, maxschedchunk: int | None = None) -> None:
        self.workerinput = {"workercount": workers}
        self.maxschedchunk = maxschedchunk

    def getvalue(self, name: str) -> Any:
        return [f"{self.workerinput['workercount']}*popen"] if name == "tx" else None

    def getoption(self, name: str, default: Any = None) -> Any:
        return self.maxschedchunk if name == "maxschedchunk" else default


class _Node:
    def __init__(self, index: int) -> None:
        self.sent: list[int] = []
        self.shutting_down = False
        self.gateway = type("Gateway", (), {"id": f"gw{index}"})()

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


@pytest.mark.parametrize(("count", "workers", "long"), [(6012, 4, 30), (91, 2, 17), (400, 4, 5)])
def test_each_worker_starts_with_its_share_of_the_long_tests(count, workers, long):
    config = _Config(workers)
    names = [f"long{i}" for i in range(long)]
    order = spread_first(
        names, [f"t{i}" for i in range(count - long)], *_xdist_chunks(config, count)
    )
    assert sorted(order) == sorted(names + [f"t{i}" for i in range(count - long)])
    scheduler = LoadScheduling(config)  # type: ignore[arg-type]
    nodes = [_Node(i) for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)  # type: ignore[arg-type]
        scheduler.add_node_collection(node, order)  # type: ignore[arg-type]
    scheduler.schedule()
    firsts = [[order[i] for i in node.sent] for node in nodes]
    share = -(-long // workers)  # each worker's first tests are its long ones
    for first in firsts:
        assert all(name.startswith("long") for name in first[: long // workers]), first[:share]
    assert sum(name.startswith("long") for first in firsts for name in first) == long


@pytest.mark.parametrize(("count", "workers", "long"), [(6012, 4, 30), (91, 2, 17), (400, 4, 5)])
def test_one_test_at_a_time_sends_every_long_test_before_any_other(count, workers, long):
    """``--maxschedchunk 1`` (tests/run.sh): xdist sends each worker two tests, then one as
    each finishes, in the hook's order, so the long tests, all first, start before any other
    and no worker holds a batch while the others are idle."""
    config = _Config(workers, maxschedchunk=1)
    names = [f"long{i}" for i in range(long)]
    rest = [f"t{i}" for i in range(count - long)]
    order = spread_first(names, rest, *_xdist_chunks(config, count))
    assert sorted(order) == sorted(names + rest)
    # The first two of each worker, then one at a time in the order: a long test not sent
    # first is sent before any other test.
    later = order[2 * workers :]
    longs_later = [i for i, name in enumerate(later) if name.startswith("long")]
    assert not longs_later or max(longs_later) < min(
        i for i, name in enumerate(later) if not name.startswith("long")
    )
    scheduler = LoadScheduling(config)  # type: ignore[arg-type]
    scheduler.maxschedchunk = 1
    nodes = [_Node(i) for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)  # type: ignore[arg-type]
        scheduler.add_node_collection(node, order)  # type: ignore[arg-type]
    scheduler.schedule()
    assert [len(node.sent) for node in nodes] == [2] * workers
