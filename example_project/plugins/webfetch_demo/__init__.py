"""A small, harmless django_webfetch plugin to try on the example site (README.md).

One tool, ``demo_page_title``: the ``<title>`` of a page on a host the operator granted,
fetched through the host-owned client (``plugin.http``), never a client of its own.
Installed by hand in this directory (its ``.dist-info`` beside it), the way
``pip install --no-deps --target`` leaves a plugin: list the directory in
``WEBFETCH_PLUGIN_DIRS``.  A template for a plugin of your own (docs/plugins.rst).
"""

from __future__ import annotations

import html
import re
from typing import Any

_TITLE = re.compile(rb"<title[^>]{0,200}>([^<]{0,300})</title", re.IGNORECASE)


def page_title(plugin: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    response = plugin.http.get(arguments["url"])
    found = _TITLE.search(response.content[:65536])
    title = html.unescape(found.group(1).decode("utf-8", "replace")).strip() if found else ""
    return {"status": response.status_code, "title": title}


def manifest() -> dict[str, Any]:
    return {
        "name": "demo",
        "version": "1.0",
        "description": "A demonstration plugin: the title of a page on example.org.",
        "egress": ["example.org", "www.example.org"],
        "tools": [
            {
                "name": "demo_page_title",
                "description": "The <title> of a page on example.org (a demonstration tool).",
                "parameters": {
                    "type": "object",
                    "properties": {"url": {"type": "string", "maxLength": 300}},
                    "required": ["url"],
                },
                "handler": page_title,
            }
        ],
    }
