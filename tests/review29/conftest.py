"""Fixtures of the review29 tests (issue 29): the run tests' tools and approvers."""

from __future__ import annotations

from tests.runs.conftest import approver, approver_factory, run_tools  # noqa: F401
