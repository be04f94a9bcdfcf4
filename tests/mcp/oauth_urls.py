"""The MCP server processes' URLconf: the run tests' routes, the site's login and the
OAuth authorization server (``django_webfetch.oauth.urls``)."""

from __future__ import annotations

from django.contrib.auth.views import LoginView
from django.urls import include, path

from tests.runs.urls import urlpatterns as run_urls

urlpatterns = [
    *run_urls,
    path("accounts/login/", LoginView.as_view(template_name="admin/login.html"), name="login"),
    path("", include("django_webfetch.oauth.urls")),
]
