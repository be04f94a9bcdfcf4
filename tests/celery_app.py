"""The Celery app of the test workers: ``celery -A tests.celery_app worker``.

Configured from Django settings (``CELERY_*``), as an integrator's project would be;
``tests/runs/worker_settings.py`` takes the database, broker and lab from the environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.runs.worker_settings")

app = Celery("webfetch_tests")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["django_webfetch"])


@worker_ready.connect
def _announce_ready(**kwargs: Any) -> None:
    ready_file = os.environ.get("WEBFETCH_TEST_READY_FILE")
    if ready_file:
        Path(ready_file).write_text(str(os.getpid()))


@worker_init.connect
def _preload_provider_sdk(**kwargs: Any) -> None:
    """``WEBFETCH_TEST_PRELOAD_PROVIDER=openai``: the OpenAI model of Pydantic AI is imported
    in the worker's main process, before its prefork pool forks (issue 28: each pool child
    imported it again on its first request, 2 to 3 CPU seconds each).  Only an import: each
    child still makes its own client and its own provider I/O loop."""
    if os.environ.get("WEBFETCH_TEST_PRELOAD_PROVIDER") == "openai":
        import pydantic_ai.models.openai  # noqa: F401
        import pydantic_ai.providers.openai  # noqa: F401
