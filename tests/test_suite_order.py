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


def _scheduled(scheduler: Any, workers: int, order: list[str]) -> list[_Node]:
    """``workers`` nodes, each given the collection ``order``, and the first schedule made."""
    nodes = [_Node(i) for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, order)
    scheduler.schedule()
    return nodes


@pytest.mark.parametrize(("count", "workers", "long"), [(6012, 4, 30), (91, 2, 17), (400, 4, 5)])
def test_each_worker_starts_with_its_share_of_the_long_tests(count, workers, long):
    config = _Config(workers)
    names = [f"long{i}" for i in range(long)]
    order = spread_first(
        names, [f"t{i}" for i in range(count - long)], *_xdist_chunks(config, count)
    )
    assert sorted(order) == sorted(names + [f"t{i}" for i in range(count - long)])
    scheduler = LoadScheduling(config)  # type: ignore[arg-type]
    nodes = _scheduled(scheduler, workers, order)
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
    nodes = _scheduled(scheduler, workers, order)
    assert [len(node.sent) for node in nodes] == [2] * workers


def _module_scoped_fixture_modules() -> set[str]:
    """Every test module (or conftest's directory) that declares a fixture of module, class
    or package scope, as a node-id prefix."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    found = set()
    for path in (root / "tests").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "scope":
                value = node.value
                if isinstance(value, ast.Constant) and value.value in (
                    "module",
                    "class",
                    "package",
                ):
                    relative = path.relative_to(root).as_posix()
                    found.add(
                        relative.rsplit("/", 1)[0] + "/" if path.name == "conftest.py" else relative
                    )
    return found


def test_every_module_with_a_module_scoped_set_up_is_sent_whole():
    """A module-scoped fixture is set up again whenever a worker comes back to its module:
    every module (or directory, for a conftest's fixture) that declares one is in
    ``SHARED_SETUP``, so its tests go to one worker together."""
    from tests.scheduling import SHARED_SETUP, group_of

    declared = _module_scoped_fixture_modules()
    assert declared, "the scan found no module-scoped fixture at all"
    for prefix in declared:
        assert group_of(prefix if prefix.endswith(".py") else prefix + "test_x.py"), prefix
    # and nothing is grouped that has no such set-up
    for prefix in SHARED_SETUP:
        assert any(d.startswith(prefix) or prefix.startswith(d) for d in declared), prefix


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("seed", range(5))
def test_the_tests_of_a_shared_set_up_module_go_to_one_worker_and_the_rest_one_at_a_time(
    workers, seed
):
    """The grouped scheduler (tests/scheduling.py) against xdist's own: every test is sent
    exactly once; the tests of a ``SHARED_SETUP`` module all reach one worker; every other
    test is sent one at a time as before (no worker is sent more than two ungrouped tests
    ahead of what it finished)."""
    import random

    from tests.scheduling import GroupedLoadScheduling, group_of

    rng = random.Random(seed)
    modules = [f"tests/browser/test_m{i}.py" for i in range(3)] + [
        f"tests/runs/test_r{i}.py" for i in range(20)
    ]
    order = [f"{module}::test_{j}" for module in modules for j in range(rng.randint(1, 6))]
    rng.shuffle(order)
    config = _Config(workers, maxschedchunk=1)
    scheduler = GroupedLoadScheduling(config)  # type: ignore[arg-type]
    scheduler.maxschedchunk = 1
    nodes = _scheduled(scheduler, workers, order)
    # Finish tests one at a time, the first pending of a random worker each time.
    while any(scheduler.node2pending[node] for node in nodes):
        busy = [node for node in nodes if scheduler.node2pending[node]]
        node = rng.choice(busy)
        ungrouped = [i for i in scheduler.node2pending[node] if group_of(order[i]) is None]
        assert len(ungrouped) <= 2, ungrouped
        scheduler.mark_test_complete(node, scheduler.node2pending[node][0], duration=0.01)  # type: ignore[arg-type]
    sent = [index for node in nodes for index in node.sent]
    assert sorted(sent) == list(range(len(order)))
    for module in modules[:3]:
        holders = {
            node.gateway.id for node in nodes for i in node.sent if order[i].startswith(module)
        }
        assert len(holders) <= 1, (module, holders)
