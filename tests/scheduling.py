"""xdist's ``load`` scheduler, with the tests that share a costly set-up sent together
(issue 28; docs/testing.rst, "Where the time goes").

A module-scoped fixture is set up again each time a worker goes from another module back
to the module: under ``--dist load --maxschedchunk 1`` the tests of one module are spread
over every worker, between other modules' tests, so the browser modules' served example
site and Chromium were made almost once per test (a full run: 203 CPU seconds for 15
tests, 138 when each module's set-up is made once).  The modules of :data:`SHARED_SETUP`
are sent whole: when the first test of such a module goes to a worker, every other test of
that module still pending goes with it, in the order.  Every other test is scheduled as
before, one at a time.

The controller process decides (it sees node ids, not markers), so the rule is a tuple of
node-id prefixes; ``tests/test_suite_order.py`` checks that every test module declaring a
module-scoped fixture is covered, and the schedule against xdist's own.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler.load import LoadScheduling

#: Node-id prefixes of the modules whose tests share a module-scoped set-up worth keeping
#: (a served site, a browser, a server): each such module is one unit of work.
SHARED_SETUP = (
    "tests/browser/",
    "tests/assistant/test_self_hosted.py",
    "tests/mcp/",  # the served MCP app of tests/mcp/conftest.py (test_server, test_tasks)
    "tests/plugins/test_implicit_imports_of_the_site.py",
    "tests/plugins/test_pinned_library_search_path_and_soname.py",
    "tests/plugins/test_registry_failure_memory.py",
    "tests/test_packaging.py",
)


def group_of(nodeid: str) -> str | None:
    """The module a test is sent with, or ``None`` for a test scheduled alone."""
    module = nodeid.split("::", 1)[0]
    return module if module.startswith(SHARED_SETUP) else None


class GroupedLoadScheduling(LoadScheduling):
    """``load``, except that the tests of a :func:`group_of` module go to one worker."""

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        # A worker holding a module's tests (more than the usual two) is sent nothing
        # more until it is down to one, as a worker of ``load`` with one at a time is.
        if self.pending and len(self.node2pending[node]) >= 2:
            return
        super().check_schedule(node, duration)

    def _send_tests(self, node: Any, num: int) -> None:
        chosen = self.pending[:num]
        if not chosen:
            return
        del self.pending[:num]
        assert self.collection is not None
        groups = {group_of(self.collection[index]) for index in chosen} - {None}
        if groups:
            together = [i for i in self.pending if group_of(self.collection[i]) in groups]
            if together:
                taken = set(together)
                self.pending[:] = [i for i in self.pending if i not in taken]
                chosen += together
        self.node2pending[node].extend(chosen)
        node.send_runtest_some(chosen)


def first_in_order(items: list[Any]) -> list[Any]:
    """The items of the :data:`SHARED_SETUP` modules (in their order): they go first, as the
    long tests do, so that a module of slow browser tests is not the run's tail."""
    return [item for item in items if group_of(item.nodeid) is not None]
