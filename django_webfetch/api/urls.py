"""``include("django_webfetch.api.urls")``: URL names live in the ``django_webfetch``
namespace (``django_webfetch:call-detail``...)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path, re_path

from django_webfetch import __version__

from . import assistant, stream, views
from ._schema import AVAILABLE as _SCHEMA_AVAILABLE
from .permissions import IsActiveUser

app_name = "django_webfetch"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.ApiRootView.as_view(), name="api-root"),
    path("tools/", views.ToolListView.as_view(), name="tool-list"),
    path("calls/", views.CallListView.as_view(), name="call-list"),
    path("calls/<uuid:pk>/", views.CallDetailView.as_view(), name="call-detail"),
    path("calls/<uuid:pk>/approve/", views.CallApproveView.as_view(), name="call-approve"),
    path("calls/<uuid:pk>/deny/", views.CallDenyView.as_view(), name="call-deny"),
    path("calls/<uuid:pk>/cancel/", views.CallCancelView.as_view(), name="call-cancel"),
    path("conversations/", assistant.ConversationListView.as_view(), name="conversation-list"),
    path(
        "conversations/<uuid:pk>/",
        assistant.ConversationDetailView.as_view(),
        name="conversation-detail",
    ),
    path(
        "conversations/<uuid:pk>/messages/",
        assistant.ConversationMessagesView.as_view(),
        name="conversation-messages",
    ),
    path("runs/<uuid:pk>/", assistant.RunDetailView.as_view(), name="run-detail"),
    path("runs/<uuid:pk>/cancel/", assistant.RunCancelView.as_view(), name="run-cancel"),
    path("runs/<uuid:pk>/events/", stream.run_events, name="run-events"),
    path("runs/<uuid:pk>/stream/", stream.run_stream, name="run-stream"),
]

if _SCHEMA_AVAILABLE:
    from typing import Any

    from django.urls import reverse
    from drf_spectacular.views import SpectacularAPIView

    class SchemaView(views.JSONErrorsMixin, SpectacularAPIView):
        """The OpenAPI schema of this API only; its server is where the API is mounted.

        Like every other endpoint, it is not public; its errors are JSON like the others'
        (not YAML).
        """

        permission_classes = [IsActiveUser]

        def get(self, request: Any, *args: Any, **kwargs: Any) -> Any:
            mount = reverse("django_webfetch:tool-list").removesuffix("tools/")
            self.custom_settings = {**(self.custom_settings or {}), "SERVERS": [{"url": mount}]}
            return super().get(request, *args, **kwargs)  # type: ignore[no-untyped-call]

    urlpatterns.append(
        path(
            "schema/",
            SchemaView.as_view(
                urlconf=list(urlpatterns),
                custom_settings={
                    "TITLE": "django_webfetch API",
                    "DESCRIPTION": "Tool specs, durable tool calls and their approval.",
                    "VERSION": __version__,
                },
            ),
            name="schema",
        )
    )

# Keep this the last pattern: every other path under the API is a JSON 404
# (tests/runs/test_api_edge.py checks that it stays last).
urlpatterns.append(re_path(r"^", views.NotFoundView.as_view(), name="not-found"))
