"""Fixtures of the error-analysis tests: a log file written by Django's own logging setup,
and a live Django server on a lab address."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def django_logging(path: Path, fmt: str = LOG_FORMAT) -> dict[str, Any]:
    """A LOGGING setting as a site would write it: Django's loggers into one file."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": fmt}},
        "handlers": {
            "file": {"class": "logging.FileHandler", "filename": str(path), "formatter": "plain"}
        },
        "loggers": {"django": {"handlers": ["file"], "level": "INFO", "propagate": False}},
    }


@pytest.fixture
def django_log_file(tmp_path: Path, settings: Any) -> Iterator[Path]:
    """Configure logging exactly as Django does at setup (``configure_logging``), with a file
    handler; restore Django's defaults afterwards."""
    from django.utils.log import configure_logging

    path = tmp_path / "django.log"
    configure_logging(settings.LOGGING_CONFIG, django_logging(path))
    settings.WEBFETCH_LOG_FILES = [str(path)]
    settings.WEBFETCH_PROJECT_ROOT = ROOT
    settings.ROOT_URLCONF = "tests.diagnostics.urls"
    try:
        yield path
    finally:
        configure_logging(settings.LOGGING_CONFIG, {})


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


@pytest.fixture
def live_site(lab_settings: Any, django_log_file: Path, settings: Any) -> Iterator[Any]:
    """This Django project served on a PRIVATE lab address (10.0.0.10:8000), as a site
    usually answers (loopback, a container, behind a load balancer).  Its own host name
    ``site.lab.example`` resolves there through the lab DNS server."""
    from django.core.handlers.wsgi import WSGIHandler

    from django_webfetch.models import SiteHost

    lab = lab_settings
    lab.expect_private_accepts = True
    lab.dns.set("site.lab.example", a=["10.0.0.10"])
    settings.ALLOWED_HOSTS = ["testserver", "site.lab.example"]
    SiteHost.objects.create(host="site.lab.example", port=8000, scheme="http")
    server = make_server(
        "10.0.0.10", 8000, WSGIHandler(), server_class=_ThreadingWSGIServer, handler_class=_Quiet
    )
    thread = threading.Thread(target=server.serve_forever, name="live-site", daemon=True)
    thread.start()
    try:
        yield lab
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
