"""The example project's ASGI application (``sh example_project/run.sh`` serves it with
uvicorn): Server-Sent Events for the assistant's run events, the MCP server's Streamable
HTTP endpoint at ``/mcp`` (it needs the ASGI lifespan: ``uvicorn --lifespan on``), static
files served here (a demo: a production site serves them from its web server), and the
background runner started with the server, so runs advance off the request and a restarted
server takes up the runs its predecessor left."""

from __future__ import annotations

import os

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

django_application = get_asgi_application()

from django_webfetch.api.shutdown import watch_signals  # noqa: E402 - after django.setup()
from django_webfetch.mcp.http import with_mcp  # noqa: E402
from django_webfetch.runs.runner import start_serving  # noqa: E402

application = with_mcp(ASGIStaticFilesHandler(django_application), path="/mcp")

start_serving()
# On SIGTERM/SIGINT the open run streams and long-polls end (the editors' pages reconnect
# to the next server), so a graceful stop does not wait for them (docs/operations.rst).
watch_signals()
