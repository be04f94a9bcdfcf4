"""The ``unmeasured`` marker (tests/conftest.py, decision 0048): a marked test runs with
coverage's tracer stopped in its process, and every other test is traced again, whichever
ran before it (the order is random)."""

from __future__ import annotations

import sys

import coverage
import pytest


@pytest.mark.unmeasured("checks the marker itself")
def test_a_marked_test_runs_without_the_tracer():
    assert sys.gettrace() is None


@pytest.mark.parametrize("attempt", range(3))
def test_every_other_test_is_traced_when_coverage_runs(attempt):
    # Under coverage (tests/run.sh's measured session) the C tracer is this thread's trace
    # function; without coverage there is none.
    measuring = coverage.Coverage.current() is not None
    assert (sys.gettrace() is not None) == measuring
