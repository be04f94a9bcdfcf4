from __future__ import annotations

from pathlib import Path

from django_webfetch.oauth.provider import oauth_provider_settings

SECRET_KEY = "tests-only"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS = ["testserver", "site.example"]
INSTALLED_APPS = [
    # Before the admin: its admin/base_site.html adds the approvers' counter (tests/cms/).
    "django_webfetch.cms",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.sites",
    "rest_framework",
    "rest_framework.authtoken",
    "django_webfetch",
    # OAuth sign-in for remote MCP clients (the mcp extra; tests/mcp/test_oauth.py)
    "oauth2_provider",
    # django CMS and the integration (the cms extra; tests/cms/)
    "cms",
    "menus",
    "treebeard",
    "sekizai",
    "djangocms_text",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
# django CMS's middleware (toolbar, current page) is added by tests/cms/conftest.py for the
# CMS tests only: it reads the database on every response, which would change what other
# suites test (e.g. a 503 when the database is down).
CMS_MIDDLEWARE = [
    "cms.middleware.user.CurrentUserMiddleware",
    "cms.middleware.page.CurrentPageMiddleware",
    "cms.middleware.toolbar.ToolbarMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "cms" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "sekizai.context_processors.sekizai",
                "cms.context_processors.cms_settings",
            ]
        },
    }
]
ROOT_URLCONF = "tests.django.urls"
SITE_ID = 1
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": ":memory:",
        # The background runner's tests write from several threads (check W062).
        "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# django CMS (tests/cms/)
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("de", "German")]
CMS_TEMPLATES = [("cms_test_page.html", "Page")]
CMS_CONFIRM_VERSION4 = True
# Page view restrictions apply (read_page must honour them).
CMS_PERMISSION = True
SILENCED_SYSTEM_CHECKS = ["treebeard.E001"]
STATIC_URL = "static/"
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
# The shipped default: runs and calls advance on the background runner (and its sweep), as
# on every site.  A test that is about inline behaviour asks for it (settings fixture).
WEBFETCH_RUNNER = "background"
# OAuth sign-in for remote MCP clients (tests/mcp/test_oauth.py): the MCP endpoint as the
# tests' servers see it, behind a TLS-terminating proxy (tests.mcp.server_settings).
WEBFETCH_OAUTH_RESOURCE = "https://testserver/mcp"
OAUTH2_PROVIDER = oauth_provider_settings(WEBFETCH_OAUTH_RESOURCE)
