"""The REST API (Django REST framework): the only package of the app that imports DRF.

Include it in your URLconf::

    path("webfetch/api/", include("django_webfetch.api.urls")),
"""

from __future__ import annotations
