"""Serving: every error of an API path is JSON whichever middleware failed
(``JSONErrorsMiddleware``), and the warning ``django_webfetch.W072`` for persistent
connections under ASGI."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.http import Http404

from django_webfetch import checks

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

MIDDLEWARE = "django_webfetch.api.middleware.JSONErrorsMiddleware"


class Failing:
    """A middleware that fails before any view, as django CMS's toolbar does when the
    database is down: what it raises is chosen per test (``FAILURE``)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        failure = FAILURE.get("raise")
        if failure == "database":
            # A real error of the real database.
            with connection.cursor() as cursor:
                cursor.execute("SELECT * FROM no_such_table_anywhere")
        elif failure is not None:
            raise failure
        return self.get_response(request)


FAILURE: dict[str, Any] = {}


@pytest.fixture
def failing(settings: Any, client: Any, editor: Any) -> Any:
    settings.ROOT_URLCONF = "tests.django.urls"
    settings.MIDDLEWARE = [MIDDLEWARE, *settings.MIDDLEWARE, "tests.django.test_serving.Failing"]
    client.force_login(editor)
    client.raise_request_exception = False  # answered as a server answers it
    yield client
    FAILURE.clear()


@pytest.mark.parametrize(
    ("failure", "status", "code"),
    [
        ("database", 503, "database_unavailable"),
        (ValueError("boom"), 500, "server_error"),
        (PermissionDenied(), 403, "permission_denied"),
        (Http404(), 404, "not_found"),
    ],
    ids=["database", "unexpected", "permission", "not-found"],
)
def test_an_error_before_the_view_is_json_on_api_paths_only(failing, failure, status, code):
    FAILURE["raise"] = failure
    for path in ("/api/tools/", "/api/conversations/"):
        response = failing.get(path)
        assert response.status_code == status
        assert response["Content-Type"].startswith("application/json")
        assert response.json()["code"] == code
        if code == "database_unavailable":
            assert response["Retry-After"] == "5"
    # Outside the API, Django's own answer (HTML) is kept.
    other = failing.get("/admin/")
    assert other.status_code == (500 if status == 503 else status)
    assert not other["Content-Type"].startswith("application/json")
    # Without a failure, the API's own answers pass unchanged (a JSON error too).
    FAILURE.clear()
    assert failing.get("/api/tools/").status_code == 200
    missing = failing.get("/api/runs/00000000-0000-0000-0000-000000000000/")
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")


def test_debug_keeps_the_technical_page_except_for_the_database(failing, settings):
    settings.DEBUG = True
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    FAILURE["raise"] = ValueError("boom")
    response = failing.get("/api/tools/")
    assert response.status_code == 500
    assert not response["Content-Type"].startswith("application/json")
    FAILURE["raise"] = "database"
    response = failing.get("/api/tools/")
    assert (response.status_code, response.json()["code"]) == (503, "database_unavailable")


@pytest.fixture
def fresh_warning(monkeypatch: Any) -> None:
    # Once per process: the test starts as a new process would.
    monkeypatch.setattr(checks, "_persistent_connections_warned", False)


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_w072_is_logged_once_under_asgi_with_persistent_connections(
    settings, caplog, fresh_warning
):
    settings.DATABASES = {
        "default": {**settings.DATABASES["default"], "CONN_MAX_AGE": 60},
        "pooled": {"ENGINE": "x", "CONN_MAX_AGE": 60, "OPTIONS": {"pool": True}},
    }
    with caplog.at_level(logging.WARNING, logger="django_webfetch"):
        checks.warn_persistent_connections_under_asgi(sender=WSGIHandler)
        assert not caplog.records  # WSGI reuses a thread's connection
        checks.warn_persistent_connections_under_asgi(sender=ASGIHandler)
        checks.warn_persistent_connections_under_asgi(sender=ASGIHandler)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1
    assert messages[0].startswith("django_webfetch.W072")
    assert "for default:" in messages[0]  # a pooled database is not named


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_no_w070_without_persistent_connections(settings, caplog, fresh_warning):
    settings.DATABASES = {"default": {**settings.DATABASES["default"], "CONN_MAX_AGE": 0}}
    with caplog.at_level(logging.WARNING, logger="django_webfetch"):
        checks.warn_persistent_connections_under_asgi(sender=ASGIHandler)
    assert not caplog.records
