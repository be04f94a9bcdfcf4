"""The WSGI application of ``bench_faults``: Django, with the project's Celery app loaded
(as an integrator's ``proj/__init__.py`` imports theirs), so the API queues on Redis."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.benchmarks.fault_settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

import tests.celery_app  # noqa: E402,F401 - the Celery app the API publishes with

application = get_wsgi_application()
