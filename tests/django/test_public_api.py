from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from django_webfetch.conf import SETTING_NAMES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "module",
    [
        "django_webfetch.egress",
        "django_webfetch.exceptions",
        "django_webfetch.models",
        "django_webfetch.tools",
        "django_webfetch.tools.registry",
        "django_webfetch.tools.base",
    ],
)
def test_all_is_sorted_and_exported(module):
    mod = importlib.import_module(module)
    assert list(mod.__all__) == sorted(mod.__all__, key=lambda n: (n.upper() != n, n))
    for name in mod.__all__:
        assert hasattr(mod, name), name


def test_every_check_id_is_documented_and_used():
    source = (ROOT / "django_webfetch" / "checks.py").read_text()
    source += (ROOT / "django_webfetch" / "assistant" / "checks.py").read_text()
    source += (ROOT / "django_webfetch" / "cms" / "checks.py").read_text()
    docs = (ROOT / "docs" / "checks.rst").read_text()
    used = set(re.findall(r"django_webfetch\.[EW]\d{3}", source))
    documented = set(re.findall(r"^``(django_webfetch\.[EW]\d{3})``", docs, re.M))
    assert used == documented
    # Every id is documented; the count only proves the scan found them (ids grow).
    assert len(used) >= 29


def test_every_setting_is_documented():
    docs = (ROOT / "docs" / "settings.rst").read_text()
    for name in SETTING_NAMES:
        assert f"``{name}``" in docs, name


def test_exceptions_reexport_the_net_tree():
    from django_webfetch import exceptions
    from django_webfetch.net import errors

    for name in errors.__all__:
        assert getattr(exceptions, name) is getattr(errors, name)
    assert not hasattr(exceptions, "ApprovalRequired")  # nothing raised it: removed
    missing = exceptions.WebFetchImproperlyInstalled("celery", "celery")
    assert isinstance(missing, ImportError)
    assert "django-webfetch[celery]" in str(missing)
