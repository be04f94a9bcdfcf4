"""``celery -A example_project.celery_app worker``: the workers of the scaled setup
(``CELERY_BROKER_URL`` set)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

app = Celery("example_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["django_webfetch"])
