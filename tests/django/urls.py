from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("django_webfetch.api.urls")),
    path("assistant/", include("django_webfetch.cms.urls")),
    # The OAuth authorization server for MCP clients (tests/mcp/test_oauth*.py).
    path("", include("django_webfetch.oauth.urls")),
    # django CMS serves every other path (tests/cms/): keep it last.
    path("", include("cms.urls")),
]
