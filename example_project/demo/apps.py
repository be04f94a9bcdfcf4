from __future__ import annotations

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "example_project.demo"
    label = "webfetch_demo"
    verbose_name = "django_webfetch demo"
