"""The example project: a django CMS 5.1 site with django_webfetch's assistant page.

Embedded by default: SQLite, tool calls run in-process, e-mail printed on the console.
Scaled with no code change, from the environment:

* ``DATABASE_URL=postgres://USER:PASSWORD@HOST:PORT/NAME`` (a Unix socket:
  ``postgres://USER@/NAME?host=/run/postgresql``) uses PostgreSQL;
* ``CELERY_BROKER_URL=redis://HOST:6379/0`` runs tool calls on Celery workers
  (``celery -A example_project.celery_app worker``).

Not for production: the secret key and DEBUG are demo values.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from django.utils.translation import gettext_lazy as _

BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-project-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
USE_TZ = True
TIME_ZONE = "UTC"
USE_I18N = True
LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("de", _("German"))]

INSTALLED_APPS = [
    # First: its admin/base_site.html adds the approvers' counter to every admin page
    # (it extends the next admin/base_site.html, Django's or the project's).
    "django_webfetch.cms",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.sites",
    # django CMS
    "cms",
    "menus",
    "treebeard",
    "sekizai",
    "djangocms_text",
    # django_webfetch: the core, and its django CMS integration (the ``cms`` extra)
    "rest_framework",
    "django_webfetch",
    # the demo's set-up command
    "example_project.demo",
]
SITE_ID = 1

MIDDLEWARE = [
    # First: an error raised in any later middleware (django CMS's toolbar reads the
    # database on every request) is answered in JSON with a code on the API's paths.
    "django_webfetch.api.middleware.JSONErrorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "cms.middleware.user.CurrentUserMiddleware",
    "cms.middleware.page.CurrentPageMiddleware",
    "cms.middleware.toolbar.ToolbarMiddleware",
    "cms.middleware.language.LanguageCookieMiddleware",
]

ROOT_URLCONF = "example_project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "sekizai.context_processors.sekizai",
                "cms.context_processors.cms_settings",
            ]
        },
    }
]

# django CMS 5.1 with django-treebeard 5.x warns about its own PageManager.
SILENCED_SYSTEM_CHECKS = ["treebeard.E001"]

CMS_TEMPLATES = [("page.html", _("Page"))]
CMS_CONFIRM_VERSION4 = True
X_FRAME_OPTIONS = "SAMEORIGIN"
LOGIN_URL = "admin:login"

# OAuth sign-in for remote MCP clients (docs/mcp.rst, "Signing in with OAuth"): set
# WEBFETCH_OAUTH_RESOURCE to the public URL of /mcp (https://mysite.example/mcp) to turn it on.
WEBFETCH_OAUTH_RESOURCE = os.environ.get("WEBFETCH_OAUTH_RESOURCE") or None
if WEBFETCH_OAUTH_RESOURCE:
    from django_webfetch.oauth.provider import oauth_provider_settings

    INSTALLED_APPS.append("oauth2_provider")
    OAUTH2_PROVIDER = oauth_provider_settings(WEBFETCH_OAUTH_RESOURCE)


def _database(url: str) -> dict[str, Any]:
    """``DATABASE_URL`` (postgres:// or postgresql://) as a Django DATABASES entry.

    No persistent connections (``CONN_MAX_AGE = 0``): under ASGI each request runs in a
    thread of its own, so a connection kept open by one request is never reused by another
    (they pile up until PostgreSQL refuses new ones).  A pool of psycopg's own
    (``psycopg[pool]``) keeps at most ``WEBFETCH_EXAMPLE_DB_POOL`` (10) connections per
    process instead, and checks each before lending it (a restarted server's dead
    connections are replaced, not lent).  ``WEBFETCH_EXAMPLE_DB_POOL=0``: no pool (a
    connection per request, closed after it).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError("DATABASE_URL must be a postgres:// URL")
    query = parse_qs(parts.query)
    database: dict[str, Any] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": query.get("host", [unquote(parts.hostname or "")])[0],
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": 0,
    }
    size = int(os.environ.get("WEBFETCH_EXAMPLE_DB_POOL", "10"))
    try:
        import psycopg_pool  # noqa: F401
    except ImportError:  # without the pool: one connection per request, closed after it
        return database
    if size <= 0:
        return database
    # With the pool: each connection is checked before it is lent.
    database["CONN_HEALTH_CHECKS"] = True
    database["OPTIONS"] = {
        "pool": {
            "min_size": 1,
            "max_size": size,
            # A request waits this long for a free connection, then fails (503, JSON).
            "timeout": 10,
        }
    }
    return database


if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": _database(os.environ["DATABASE_URL"])}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("WEBFETCH_EXAMPLE_DB", str(BASE_DIR / "db.sqlite3")),
            # The background runner's threads and the requests write at once: BEGIN
            # IMMEDIATE makes a writer wait for the other (timeout), never fail "locked".
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "static"

# The approvers' notification: printed on the console in the demo.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = "assistant@example.org"

# -- django_webfetch ----------------------------------------------------------------------
# None: the system's resolv.conf, read by dnspython (never getaddrinfo, never /etc/hosts).
# WEBFETCH_DNS_NAMESERVERS="192.0.2.53,..." names the resolvers to use instead.
_NAMESERVERS = os.environ.get("WEBFETCH_DNS_NAMESERVERS", "")
WEBFETCH_DNS_NAMESERVERS = [n.strip() for n in _NAMESERVERS.split(",") if n.strip()] or None
# A CA bundle for the fetches (default: certifi's).
WEBFETCH_CA_FILE = os.environ.get("WEBFETCH_CA_FILE") or None
# Bounds may only be lowered: values above the hard ceilings are clamped (check W001).
WEBFETCH_TIMEOUT = 20
WEBFETCH_MAX_RESPONSE_BYTES = 2 * 1024 * 1024
WEBFETCH_EVENT_RETENTION_DAYS = 30
# Directories of untrusted plugins (``pip install --no-deps --target DIR``), never put on
# sys.path (docs/plugins.rst, "Installing a plugin"): WEBFETCH_PLUGIN_DIRS="/srv/plugins/a:...".
WEBFETCH_PLUGIN_DIRS = [
    d for d in os.environ.get("WEBFETCH_PLUGIN_DIRS", "").split(os.pathsep) if d
]
# /metrics answers signed-in staff, and a scraper sending "Authorization: Bearer <token>"
# when this is set (at least 16 characters: a shorter one is refused as misconfigured).
WEBFETCH_METRICS_TOKEN = os.environ.get("WEBFETCH_METRICS_TOKEN", "")


def _env_int(name: str) -> int | str | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        return raw  # not an integer: django_webfetch refuses it with a clear error


# A self-hosted model's context window (docs/assistant.rst, "Self-hosted models"), e.g.
# WEBFETCH_ASSISTANT_CONTEXT_TOKENS=4096 sh example_project/run.sh; unset: unknown.
WEBFETCH_ASSISTANT_CONTEXT_TOKENS = _env_int("WEBFETCH_ASSISTANT_CONTEXT_TOKENS")

# With a broker, tool calls (and assistant runs) run on Celery workers; without one,
# in-process.  Needs the ``celery`` extra: pip install "django-webfetch[celery,cms]".
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
WEBFETCH_ASYNC_RUNS = bool(CELERY_BROKER_URL)
