"""Settings of the MCP server processes the tests start (uvicorn, ``manage.py webfetch
mcp``, the MCP Inspector's stdio server): the test settings, plus the database file and the
lab's DNS server and CA that the test process hands over in the environment."""

from __future__ import annotations

import json
import os

from tests.settings import *  # noqa: F403

_env = os.environ.get

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": _env("WEBFETCH_TEST_DB", ":memory:"),
        "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
    }
}
ROOT_URLCONF = "tests.runs.urls"
WEBFETCH_ASYNC_RUNS = False
WEBFETCH_MCP_WAIT = float(_env("WEBFETCH_TEST_MCP_WAIT", "60"))
if _env("WEBFETCH_TEST_NAMESERVERS"):
    WEBFETCH_DNS_NAMESERVERS = json.loads(_env("WEBFETCH_TEST_NAMESERVERS", "[]"))
if _env("WEBFETCH_TEST_CA_FILE"):
    WEBFETCH_CA_FILE = _env("WEBFETCH_TEST_CA_FILE")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}
