from __future__ import annotations

#: A site that does not mount the django_webfetch API (check E011 has nothing to say).
urlpatterns: list[object] = []
