"""The example project's settings with the database connections of one ``bench_serving``
configuration (``WEBFETCH_BENCH_DB_MODE``):

- ``persistent``: ``CONN_MAX_AGE = 60``, no pool (the example before issue 33);
- ``per-request``: ``CONN_MAX_AGE = 0``, no pool;
- ``pool``: the example as shipped (psycopg's pool, ``WEBFETCH_EXAMPLE_DB_POOL``).

``WEBFETCH_BENCH_PROCESS`` names the process's connections (``application_name``).
"""

from __future__ import annotations

import os

from example_project.settings import *  # noqa: F403

_MODE = os.environ.get("WEBFETCH_BENCH_DB_MODE", "pool")
_DB = DATABASES["default"]  # noqa: F405
if _MODE != "pool":
    _DB.pop("OPTIONS", None)
    _DB["CONN_HEALTH_CHECKS"] = _MODE == "persistent"
    _DB["CONN_MAX_AGE"] = 60 if _MODE == "persistent" else 0
# Each uvicorn process names its connections, so the benchmark counts them per process.
_DB.setdefault("OPTIONS", {})["application_name"] = os.environ.get(
    "WEBFETCH_BENCH_PROCESS", "webfetch"
)

# The benchmark's watchers are one editor's many tabs on one run: the per-editor bound on
# open streams (6 by default, a policy) is raised so that the 200 streams measured are open.
WEBFETCH_OPEN_PER_PRINCIPAL = {"streams": 200}

if os.environ.get("WEBFETCH_BENCH_LOG_LEVEL") == "info":
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"console": {"class": "logging.StreamHandler"}},
        "loggers": {"django_webfetch": {"handlers": ["console"], "level": "INFO"}},
    }
