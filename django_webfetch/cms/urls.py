"""``path("assistant/", include("django_webfetch.cms.urls"))``: the assistant page.

URL names live in the ``webfetch_cms`` namespace (``webfetch_cms:assistant``).
"""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "webfetch_cms"

urlpatterns = [
    path("", views.AssistantView.as_view(), name="assistant"),
    path("approvals/", views.ApprovalsView.as_view(), name="approvals"),
    path("status/", views.StatusView.as_view(), name="status"),
]
