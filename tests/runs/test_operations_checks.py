"""The checks of a production run (docs/operations.rst): W060, W061, W062."""

from __future__ import annotations

import sys
import types
import warnings
from typing import Any

import pytest
from django.urls import clear_url_caches, include, path

from django_webfetch.checks import check_operations


def _ids(messages):
    return {m.id for m in messages}


def test_w060_visibility_timeout_shorter_than_the_lease(settings, celery_eager):
    settings.WEBFETCH_ASYNC_RUNS = True
    celery_eager.conf.broker_transport_options = {"visibility_timeout": 10}
    assert "django_webfetch.W060" in _ids(check_operations())
    celery_eager.conf.broker_transport_options = {"visibility_timeout": 300}
    assert "django_webfetch.W060" not in _ids(check_operations())
    celery_eager.conf.broker_transport_options = {"visibility_timeout": 10}
    settings.WEBFETCH_ASYNC_RUNS = False
    assert "django_webfetch.W060" not in _ids(check_operations())


def _w062(databases):
    from django.test import override_settings

    # Django warns that overriding DATABASES may surprise: only the check reads them here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with override_settings(DATABASES=databases):
            return [m for m in check_operations() if m.id == "django_webfetch.W062"]


def test_w062_sqlite_without_immediate_transactions(settings):
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "x.sqlite3", "OPTIONS": {}}
    settings.WEBFETCH_RUNNER = "background"
    [warning] = _w062({"default": sqlite})
    assert "'default'" in warning.msg
    settings.WEBFETCH_RUNNER = "inline"
    assert _w062({"default": sqlite}) == []
    settings.WEBFETCH_RUNNER = "background"
    immediate = {**sqlite, "OPTIONS": {"transaction_mode": "IMMEDIATE"}}
    assert _w062({"default": immediate}) == []
    assert _w062({"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "x"}}) == []


def test_the_readmes_minimal_settings_print_no_w062(settings, tmp_path):
    """Issue 31 item 6: the settings of the README's "Add it to a Django site", as a user
    copies them, raise no W062 under the default background runner."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    [block] = re.findall(r"```python\n# settings\.py\n(.*?)\n# urls\.py", readme, re.S)
    namespace = {"BASE_DIR": tmp_path}
    exec(block.replace("    ...,\n", ""), namespace)
    assert namespace["DATABASES"]["default"]["ENGINE"] == "django.db.backends.sqlite3"
    settings.WEBFETCH_RUNNER = "background"
    assert _w062(namespace["DATABASES"]) == []
    without = {"default": {**namespace["DATABASES"]["default"], "OPTIONS": {}}}
    assert len(_w062(without)) == 1  # the check does look at these settings


@pytest.fixture
def root_urlconf(settings):
    module = types.ModuleType("webfetch_test_root_urls")
    module.urlpatterns = [path("", include("django_webfetch.api.urls"))]
    sys.modules[module.__name__] = module
    settings.ROOT_URLCONF = module.__name__
    clear_url_caches()
    yield
    del sys.modules[module.__name__]
    clear_url_caches()


def test_w061_api_mounted_at_the_root(settings, root_urlconf):
    assert "django_webfetch.W061" in _ids(check_operations())


def test_no_w061_under_a_prefix(settings):
    settings.ROOT_URLCONF = "tests.runs.urls"
    clear_url_caches()
    assert "django_webfetch.W061" not in _ids(check_operations())


def test_w064_a_lease_below_the_floor(settings):
    def w064() -> list[Any]:
        return [m for m in check_operations() if m.id == "django_webfetch.W064"]

    settings.WEBFETCH_LEASE_SECONDS = 4
    [warning] = w064()
    assert "(4 s)" in warning.msg and "5 s" in warning.msg
    settings.WEBFETCH_LEASE_SECONDS = 5
    assert w064() == []
    del settings.WEBFETCH_LEASE_SECONDS  # the default, 15 s
    assert w064() == []
