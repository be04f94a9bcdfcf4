"""System checks of the django CMS integration (ids ``django_webfetch.E050``-``E059`` and
``W050``-``W059``)."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core import checks


def check_cms_installed(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """E050: ``django_webfetch.cms`` needs django CMS (the ``cms`` extra) and its apps."""
    needed = ("cms", "menus", "sekizai", "django.contrib.sites")
    missing = [app for app in needed if not apps.is_installed(app)]
    if not missing:
        return []
    return [
        checks.Error(
            "django_webfetch.cms needs django CMS: " + ", ".join(missing) + " not installed.",
            hint='install the "cms" extra (pip install "/path/to/django_webfetch[cms]") and '
            "add django CMS's apps to INSTALLED_APPS "
            "(see the guide 'Add it to your django CMS site').",
            id="django_webfetch.E050",
        )
    ]


def check_approver_mail(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W050: approvers are e-mailed when a call starts waiting; without a sender address
    Django's default ``webmaster@localhost`` is used, which most mail servers refuse."""
    if getattr(settings, "DEFAULT_FROM_EMAIL", "webmaster@localhost") != "webmaster@localhost":
        return []
    if "console" in getattr(settings, "EMAIL_BACKEND", "") or "locmem" in getattr(
        settings, "EMAIL_BACKEND", ""
    ):
        return []
    return [
        checks.Warning(
            "DEFAULT_FROM_EMAIL is not set: approval notifications go out from "
            "webmaster@localhost.",
            hint="Set DEFAULT_FROM_EMAIL to an address your mail server accepts.",
            id="django_webfetch.W050",
        )
    ]


#: Django's placeholder domain for the first ``Site`` (what ``migrate`` creates).
PLACEHOLDER_DOMAIN = "example.com"


def check_site_domain(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W051 (database): the current Site's domain is still ``example.com``, so the links in
    approval mails and the page sources the content tools give point at example.com.
    Runs only where the check framework was given databases (``check --database``,
    ``migrate``), as Django's own database checks do."""
    if not kwargs.get("databases") or not apps.is_installed("django.contrib.sites"):
        return []
    from django.contrib.sites.models import Site
    from django.db import DatabaseError

    site_id = getattr(settings, "SITE_ID", None)
    try:
        site = Site.objects.filter(pk=site_id).first() if site_id is not None else None
    except DatabaseError:
        return []  # not migrated yet
    if site is None or site.domain.strip().lower() != PLACEHOLDER_DOMAIN:
        return []
    return [
        checks.Warning(
            f"The current Site's domain is {PLACEHOLDER_DOMAIN!r}: the approval mails' links "
            "and the sources of this site's pages name example.com.",
            hint="Set the domain (host or host:port) in the admin under Sites, or with "
            "Site.objects.filter(pk=SITE_ID).update(domain=...); see docs/cms.rst.",
            obj=site,
            id="django_webfetch.W051",
        )
    ]
