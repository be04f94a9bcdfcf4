from __future__ import annotations

from django.urls import include, path

from . import views

urlpatterns = [
    path("boom/", views.boom),
    path("fine/", views.fine),
    path("away/", views.away),
    path("", include("tests.django.urls")),
]
