"""Sphinx configuration.  Build with ``sphinx-build -W -b html docs docs/_build``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django_webfetch import __version__  # noqa: E402

project = "django-webfetch"
author = "django_webfetch developers"
copyright = "django_webfetch developers"
version = release = __version__

extensions = ["sphinx.ext.intersphinx"]
# Inventories are fetched only when a build asks for them (they need the network);
# ``-D intersphinx_disabled_reftypes=*`` or an offline build simply leaves the links plain.
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}

html_theme = "furo"
html_title = f"django-webfetch {release}"
exclude_patterns = ["_build"]
nitpicky = False
