"""The test settings on the throwaway PostgreSQL cluster of ``tests/runs/test_postgres.py``
(its socket directory and port come from the environment)."""

from __future__ import annotations

import os

from tests.settings import *  # noqa: F403

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("WEBFETCH_TEST_DB", "webfetch"),
        "HOST": os.environ.get("WEBFETCH_TEST_DB_HOST", ""),
        "PORT": os.environ.get("WEBFETCH_TEST_DB_PORT", ""),
        "USER": os.environ.get("WEBFETCH_TEST_DB_USER", "postgres"),
    }
}
