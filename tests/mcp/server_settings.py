"""Settings of the MCP server processes the tests start (uvicorn, ``manage.py webfetch
mcp``, the MCP Inspector's stdio server): the run tests' worker settings (the database and
the lab's DNS server, CA and timeout that the test process hands over in the environment),
with calls run in-process, as on the embedded default."""

from __future__ import annotations

import os

from tests.runs.worker_settings import *  # noqa: F403

ROOT_URLCONF = "tests.mcp.oauth_urls"
LOGIN_URL = "/accounts/login/"
# The HTTP tests reach uvicorn as a TLS-terminating proxy would (tests/mcp/test_oauth.py).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
WEBFETCH_ASYNC_RUNS = False
WEBFETCH_MCP_WAIT = float(os.environ.get("WEBFETCH_TEST_MCP_WAIT", "60"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}
# What one principal may hold open (``budgets.holds``), and the idle expiry of sessions.
if os.environ.get("WEBFETCH_TEST_OPEN_PER_PRINCIPAL"):
    import json

    WEBFETCH_OPEN_PER_PRINCIPAL = json.loads(os.environ["WEBFETCH_TEST_OPEN_PER_PRINCIPAL"])
WEBFETCH_MCP_SESSION_IDLE = float(os.environ.get("WEBFETCH_TEST_MCP_SESSION_IDLE", "300"))
# tests/mcp/test_oauth.py: short-lived OAuth access tokens, so the client refreshes one.
if os.environ.get("WEBFETCH_TEST_OAUTH_TOKEN_SECONDS"):
    OAUTH2_PROVIDER = {  # noqa: F405
        **OAUTH2_PROVIDER,  # noqa: F405
        "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ["WEBFETCH_TEST_OAUTH_TOKEN_SECONDS"]),
    }
