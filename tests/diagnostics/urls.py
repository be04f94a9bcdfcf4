from __future__ import annotations

from django.urls import include, path

from . import views

urlpatterns = [
    path("boom/", views.boom),
    path("fine/", views.fine),
    path("away/", views.away),
    path("leaky/", views.leaky),
    path("away-with-code/", views.away_with_code),
    path("", include("tests.django.urls")),
]
