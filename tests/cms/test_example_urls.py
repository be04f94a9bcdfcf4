"""The example site's own URLs (example_project/urls.py)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.urls("example_project.urls")]


def test_the_example_serves_a_favicon(client):
    """README trial 9: every page logged ``/favicon.ico/`` 404 (the browser's own request,
    sent on by APPEND_SLASH to django CMS's catch-all)."""
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    body = response.content
    assert body[:6] == b"\x00\x00\x01\x00\x01\x00"  # an ICO with one image
    assert body[22:30] == b"\x89PNG\r\n\x1a\n"  # the image: a PNG, right after the entry
