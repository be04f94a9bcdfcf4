"""The ASGI application of the tests' server processes (``serve_settings``), started as the
example project starts its own: the background runner with the server."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.assistant.serve_settings")
application = get_asgi_application()

from django_webfetch.runs.runner import start_serving  # noqa: E402 - after django.setup()

start_serving()
