"""Settings of ``bench_faults``: gunicorn, the Celery workers and the load driver share them
(the test workers' settings, on PostgreSQL, plus the API and the production settings that
docs/operations.rst recommends)."""

from __future__ import annotations

import os

from tests.runs.worker_settings import *  # noqa: F403

ROOT_URLCONF = "tests.runs.urls"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"],
}
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("WEBFETCH_BENCH_CONN_MAX_AGE", "60"))  # noqa: F405
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True  # noqa: F405
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 300}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
# The per-destination limit (issue 22), counted in the broker's Redis; 0: off (the limit
# is then its ceiling, 1000).
_per_host = int(os.environ.get("WEBFETCH_BENCH_MAX_CALLS_PER_HOST", "4"))
WEBFETCH_MAX_CALLS_PER_HOST = _per_host or 1000
WEBFETCH_REDIS_URL = os.environ.get("WEBFETCH_TEST_BROKER_URL") or None
# The bench measures the workers, not the API's rate limits.
WEBFETCH_API_RATES = {"messages": None, "calls": None, "approvals": None}
