"""The Celery app of the test workers: ``celery -A tests.celery_app worker``.

Configured from Django settings (``CELERY_*``), as an integrator's project would be;
``tests/runs/worker_settings.py`` takes the database, broker and lab from the environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.runs.worker_settings")

app = Celery("webfetch_tests")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["django_webfetch"])


@worker_ready.connect
def _announce_ready(**kwargs: Any) -> None:
    ready_file = os.environ.get("WEBFETCH_TEST_READY_FILE")
    if ready_file:
        Path(ready_file).write_text(str(os.getpid()))
