"""The app works without its extras: nothing but Celery's autodiscover (and a queued run)
imports ``django_webfetch.tasks``, so no module of the app imports celery when loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_app_does_not_import_celery():
    code = (
        "import importlib, pkgutil, sys, django\n"
        "django.setup()\n"
        "import django_webfetch\n"
        "walk = pkgutil.walk_packages(django_webfetch.__path__, 'django_webfetch.')\n"
        "names = [m.name for m in walk\n"
        "         if m.name != 'django_webfetch.tasks' and not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "extra = sorted(m for m in sys.modules if m.split('.')[0] in ('celery', 'kombu'))\n"
        "print(len(names), extra)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    count, loaded = out.stdout.strip().split(" ", 1)
    assert int(count) > 40
    assert loaded == "[]"
