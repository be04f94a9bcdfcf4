"""Settings of the test workers (and of the PostgreSQL race runner): the test settings,
plus the database, broker and lab that the test process hands over in the environment."""

from __future__ import annotations

import json
import os

from tests.settings import *  # noqa: F403

_env = os.environ.get

if _env("WEBFETCH_TEST_DB_ENGINE", "sqlite") == "postgresql":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _env("WEBFETCH_TEST_DB", "webfetch"),
            "HOST": _env("WEBFETCH_TEST_DB_HOST", ""),
            "PORT": _env("WEBFETCH_TEST_DB_PORT", ""),
            "USER": _env("WEBFETCH_TEST_DB_USER", "postgres"),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": _env("WEBFETCH_TEST_DB", ":memory:"),
            # BEGIN IMMEDIATE: writers queue on the busy timeout instead of failing with
            # "database is locked" when a read transaction turns into a write.
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
        }
    }

CELERY_BROKER_URL = _env("WEBFETCH_TEST_BROKER_URL", "memory://")
CELERY_BROKER_TRANSPORT_OPTIONS = json.loads(_env("WEBFETCH_TEST_TRANSPORT_OPTIONS", "{}"))
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = _env("WEBFETCH_TEST_QUEUE", "celery")
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = (
    {
        "django_webfetch.expire_tool_calls": {
            "task": "django_webfetch.expire_tool_calls",
            "schedule": float(_env("WEBFETCH_TEST_SWEEP_EVERY", "1")),
        }
    }
    if _env("WEBFETCH_TEST_SWEEP_EVERY")
    else {}
)

WEBFETCH_ASYNC_RUNS = True
if _env("WEBFETCH_TEST_NAMESERVERS"):
    WEBFETCH_DNS_NAMESERVERS = json.loads(_env("WEBFETCH_TEST_NAMESERVERS", "[]"))
if _env("WEBFETCH_TEST_CA_FILE"):
    WEBFETCH_CA_FILE = _env("WEBFETCH_TEST_CA_FILE")
if _env("WEBFETCH_TEST_TIMEOUT"):
    WEBFETCH_TIMEOUT = float(_env("WEBFETCH_TEST_TIMEOUT", "20"))
if _env("WEBFETCH_TEST_ASSISTANT_TIMEOUT"):
    WEBFETCH_ASSISTANT_TIMEOUT = float(_env("WEBFETCH_TEST_ASSISTANT_TIMEOUT", "60"))
if _env("WEBFETCH_TEST_REQUEUE_AFTER"):
    WEBFETCH_REQUEUE_AFTER = float(_env("WEBFETCH_TEST_REQUEUE_AFTER", "30"))
if _env("WEBFETCH_TEST_WORKER_SWEEP_EVERY"):
    WEBFETCH_WORKER_SWEEP_EVERY = float(_env("WEBFETCH_TEST_WORKER_SWEEP_EVERY", "15"))
if _env("WEBFETCH_TEST_NETWORK_QUEUE"):
    WEBFETCH_NETWORK_QUEUE = _env("WEBFETCH_TEST_NETWORK_QUEUE")
if _env("WEBFETCH_TEST_MAX_CALLS_PER_HOST"):
    WEBFETCH_MAX_CALLS_PER_HOST = int(_env("WEBFETCH_TEST_MAX_CALLS_PER_HOST", "4"))
if _env("WEBFETCH_TEST_DESTINATION_REDIS_URL"):
    WEBFETCH_REDIS_URL = _env("WEBFETCH_TEST_DESTINATION_REDIS_URL")
if _env("WEBFETCH_TEST_LEASE_SECONDS"):
    WEBFETCH_LEASE_SECONDS = float(_env("WEBFETCH_TEST_LEASE_SECONDS", "15"))
