"""The checks of a production run (docs/operations.rst): W060, W061."""

from __future__ import annotations

import sys
import types

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
