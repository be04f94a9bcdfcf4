"""Throwaway attack probes (session 2 review); not to be merged."""

from __future__ import annotations

from tests.cms.conftest import content_group  # noqa: F401
from tests.mcp.conftest import http_server, token_for, users, web  # noqa: F401
from tests.runs.conftest import approver, approver_factory, run_tools  # noqa: F401
