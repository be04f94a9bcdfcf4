from __future__ import annotations

import struct
import zlib

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def _favicon_bytes(size: int = 16, rgb: tuple[int, int, int] = (0x1E, 0x5A, 0xC8)) -> bytes:
    """A one-colour square as an ICO holding a PNG (no binary file in the checkout)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    header = struct.pack("<HHH", 0, 1, 1)
    entry = struct.pack("<BBBBHHII", size, size, 0, 0, 1, 32, len(png), 6 + 16)
    return header + entry + png


_FAVICON = _favicon_bytes()


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask every site for /favicon.ico; without it django CMS's catch-all made
    every page log a 404 (after APPEND_SLASH's redirect to /favicon.ico/)."""
    response = HttpResponse(_FAVICON, content_type="image/x-icon")
    response["Cache-Control"] = "max-age=86400"
    return response


urlpatterns = [
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    # The DRF API: /api/tools/, /api/calls/, /api/schema/ (see docs/api.rst).
    path("api/", include("django_webfetch.api.urls")),
    # The assistant page for editors: /assistant/ (see docs/cms.rst).
    path("assistant/", include("django_webfetch.cms.urls")),
    # Prometheus metrics for staff or WEBFETCH_METRICS_TOKEN: /metrics (docs/operations.rst).
    path("metrics", include("django_webfetch.metrics.urls")),
]
if getattr(settings, "WEBFETCH_OAUTH_RESOURCE", None):
    # OAuth for remote MCP clients: /.well-known/..., /oauth/... (docs/mcp.rst).
    urlpatterns.append(path("", include("django_webfetch.oauth.urls")))
# django CMS serves every other path: keep it last.
urlpatterns.append(path("", include("cms.urls")))
