"""The scrape endpoint: Prometheus' text format, for staff or a bearer token.

``WEBFETCH_METRICS_TOKEN`` set: a request with ``Authorization: Bearer <token>`` is
answered (compared in constant time); a signed-in active staff user who may view egress
events (``django_webfetch.view_egressevent``, as the operations page; superusers may)
always is: a CMS editor is staff too, and reads no operator's numbers.  Anyone else:
``401`` (no credentials) or ``403``.  With ``PROMETHEUS_MULTIPROC_DIR`` set the
values of every process that wrote there are merged (``MultiProcessCollector``).
"""

from __future__ import annotations

import hmac
import os
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from django_webfetch.conf import conf
from django_webfetch.exceptions import WebFetchImproperlyInstalled

from .instruments import available, sources

__all__ = ["VIEW_EVENTS", "metrics_view", "registry"]

#: The permission that lets a staff user read the metrics (and the operations page).
VIEW_EVENTS = "view_egressevent"


def _authorized(request: HttpRequest) -> bool | None:
    """``True``: answer; ``False``: refused (403); ``None``: no credentials (401)."""
    token = conf.WEBFETCH_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        given = header.removeprefix("Bearer ").strip().encode()
        return hmac.compare_digest(given, token.encode())
    user: Any = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return bool(
            user.is_active and user.is_staff and user.has_perm(f"django_webfetch.{VIEW_EVENTS}")
        )
    return False if header else None


class _Sources:
    """The gauges read when scraped (approvals waiting, plugin connections in use)."""

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        for source in sources():
            for name, documentation, values in source():
                names = [k for k, _ in next(iter(values))] if values else []
                family = GaugeMetricFamily(name, documentation, labels=names)
                for labels, value in values.items():
                    family.add_metric([v for _, v in labels], value)
                yield family


class _Default:
    """This process's instruments (no multiprocess directory)."""

    def collect(self) -> Any:
        from prometheus_client import REGISTRY

        yield from REGISTRY.collect()


def registry() -> Any:
    """A registry of one scrape: every process's instruments, and the scrape-time gauges."""
    from prometheus_client import CollectorRegistry

    scrape = CollectorRegistry(auto_describe=True)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(scrape)  # type: ignore[no-untyped-call]
    else:
        scrape.register(_Default())
    scrape.register(_Sources())
    return scrape


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not available():
        raise WebFetchImproperlyInstalled("prometheus_client", "metrics")
    allowed = _authorized(request)
    if allowed is None:
        response = HttpResponse("authentication required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if not allowed:
        return HttpResponse("forbidden\n", status=403, content_type="text/plain")
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)
