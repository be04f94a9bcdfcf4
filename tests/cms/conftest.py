"""Fixtures of the django CMS tests: published pages (one login-only, one restricted to a
group), users, and an approver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

PAGES = {
    "home": "<h1>Welcome</h1><p>Fresh bread every morning.</p>",
    "about": "<h1>About us</h1><p>Founded in 1952 by Anna and Karl.</p>",
    "hours": (
        "<h1>Opening hours</h1><table><tr><th>Day</th><th>Open</th></tr>"
        "<tr><td>Saturday</td><td>07:00</td></tr></table>"
        "<ul><li>Market Street 1</li><li>Harbour Road 17</li></ul>"
    ),
    "members": "<p>Members only: the secret recipe is rye.</p>",
    "staff": "<p>Staff only: the safe code is 4711.</p>",
}


@pytest.fixture(autouse=True)
def _cms_site(settings: Any) -> None:
    """django CMS's middleware, and no permission or verdict cached by an earlier test
    (django CMS caches page permissions per user id, and ids are reused after rollbacks)."""
    from django.core.cache import cache

    settings.MIDDLEWARE = [*settings.MIDDLEWARE, *settings.CMS_MIDDLEWARE]
    cache.clear()


@pytest.fixture
def cms_page_factory(db: Any, superuser: Any) -> Callable[..., Any]:
    from cms.api import add_plugin, create_page
    from cms.models import PageContent

    def make(title: str, slug: str, body: str, **kwargs: Any) -> Any:
        page = create_page(
            title, "cms_test_page.html", "en", slug=slug, created_by=superuser, **kwargs
        )
        content = PageContent.admin_manager.get(page=page, language="en")
        placeholder = content.get_placeholders().get(slot="content")
        add_plugin(placeholder, "TextPlugin", "en", body=body)
        return page

    return make


@pytest.fixture
def site_pages(cms_page_factory: Callable[..., Any], superuser: Any) -> dict[str, Any]:
    """The site's pages, created in a transaction: django CMS locks the page tree when it
    sets the home page, which needs one (the tests commit for real, as a site does)."""
    from cms.models import PagePermission
    from django.contrib.auth.models import Group
    from django.db import transaction

    with transaction.atomic():
        pages = {
            "home": cms_page_factory("Home", "home", PAGES["home"]),
            "about": cms_page_factory("About us", "about", PAGES["about"]),
            "hours": cms_page_factory("Opening hours", "opening-hours", PAGES["hours"]),
            "members": cms_page_factory(
                "Members", "members", PAGES["members"], login_required=True
            ),
            "staff": cms_page_factory("Staff", "staff", PAGES["staff"]),
        }
        pages["home"].set_as_homepage(superuser)
    staff_group, _ = Group.objects.get_or_create(name="Bakery staff")
    PagePermission.objects.create(page=pages["staff"], group=staff_group, can_view=True)
    return pages


@pytest.fixture
def content_group(group_factory: Callable[..., Any]) -> Any:
    return group_factory("content", enabled=True)


@pytest.fixture
def approver_factory(user_factory: Callable[..., Any]) -> Callable[..., Any]:
    def make(**kwargs: Any) -> Any:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Permission

        user = user_factory(staff=True, **kwargs)
        user.user_permissions.add(
            Permission.objects.get(
                codename="approve_toolcall", content_type__app_label="django_webfetch"
            )
        )
        return get_user_model().objects.get(pk=user.pk)  # drop the cached permissions

    return make


@pytest.fixture
def approver(approver_factory: Callable[..., Any]) -> Any:
    return approver_factory(username="approver")
