from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("django_webfetch.api.urls")),
    path("metrics", include("django_webfetch.metrics.urls")),
]
