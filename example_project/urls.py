from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # The DRF API: /api/tools/, /api/calls/, /api/schema/ (see docs/api.rst).
    path("api/", include("django_webfetch.api.urls")),
    # The assistant page for editors: /assistant/ (see docs/cms.rst).
    path("assistant/", include("django_webfetch.cms.urls")),
    # Prometheus metrics for staff or WEBFETCH_METRICS_TOKEN: /metrics (docs/operations.rst).
    path("metrics", include("django_webfetch.metrics.urls")),
]
if getattr(settings, "WEBFETCH_OAUTH_RESOURCE", None):
    # OAuth for remote MCP clients: /.well-known/..., /oauth/... (docs/mcp.rst).
    urlpatterns.append(path("", include("django_webfetch.oauth.urls")))
# django CMS serves every other path: keep it last.
urlpatterns.append(path("", include("cms.urls")))
