"""``path("metrics", include("django_webfetch.metrics.urls"))``: the scrape endpoint."""

from __future__ import annotations

from django.urls import URLPattern, path

from .views import metrics_view

app_name = "django_webfetch_metrics"

urlpatterns: list[URLPattern] = [path("", metrics_view, name="metrics")]
