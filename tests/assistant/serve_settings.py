"""Settings of an ASGI server process of the tests (uvicorn serving ``tests.runs.urls``):
the test workers' settings (database and lab from the environment), without Celery, with
the background runner."""

from __future__ import annotations

import os

from tests.runs.worker_settings import *  # noqa: F403

ROOT_URLCONF = "tests.runs.urls"
ALLOWED_HOSTS = ["127.0.0.1", "testserver"]
WEBFETCH_ASYNC_RUNS = False
WEBFETCH_RUNNER = "background"
WEBFETCH_RUNNER_SWEEP_EVERY = float(os.environ.get("WEBFETCH_TEST_SWEEP_EVERY", "1"))
WEBFETCH_RUNNER_THREADS = int(os.environ.get("WEBFETCH_TEST_RUNNER_THREADS", "4"))
WEBFETCH_ASSISTANT_PROVIDER_CONCURRENCY = int(
    os.environ.get("WEBFETCH_TEST_PROVIDER_CONCURRENCY", "64")
)
