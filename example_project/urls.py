from __future__ import annotations

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
    # django CMS serves every other path: keep it last.
    path("", include("cms.urls")),
]
