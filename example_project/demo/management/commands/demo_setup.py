"""``manage.py demo_setup``: the demo's pages, an approver and an editor.  Idempotent.

* published django CMS pages: Home, About us, Opening hours (a table and a list);
* ``admin`` (superuser, may approve tool calls) and ``editor`` (staff, edits pages, may
  not approve): self-approval is refused by default, so a call needs both;
* the site's domain (``--domain``).

Passwords come from ``DEMO_ADMIN_PASSWORD`` / ``DEMO_EDITOR_PASSWORD`` (default: the user
name); an existing user keeps its password.  The tool groups are left as they are
(created disabled by the migrations).
"""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.sites.models import Site
from django.core.management.base import BaseCommand
from django.db import transaction

PAGES: tuple[dict[str, Any], ...] = (
    {
        "title": "Home",
        "slug": "home",
        "body": (
            "<h1>Welcome to the Example Bakery</h1>"
            "<p>We bake bread, rolls and cakes every morning from six o'clock.</p>"
            "<p>This site is the demo of <strong>django_webfetch</strong>: open the "
            "<em>Assistant</em> menu in the toolbar to ask about this page or any public "
            "web page.</p>"
        ),
    },
    {
        "title": "About us",
        "slug": "about",
        "body": (
            "<h1>About us</h1>"
            "<p>The Example Bakery was founded in 1952 by Anna and Karl Beispiel in a small "
            "shop on Market Street.</p>"
            "<p>Today twelve bakers work in our kitchen. Our sourdough starter is older than "
            "the shop itself.</p>"
        ),
    },
    {
        "title": "Opening hours",
        "slug": "opening-hours",
        "body": (
            "<h1>Opening hours</h1>"
            "<table><thead><tr><th>Day</th><th>Open</th><th>Close</th></tr></thead><tbody>"
            "<tr><td>Monday to Friday</td><td>06:00</td><td>18:00</td></tr>"
            "<tr><td>Saturday</td><td>07:00</td><td>14:00</td></tr>"
            "<tr><td>Sunday</td><td>closed</td><td>closed</td></tr>"
            "</tbody></table>"
            "<p>Our branches:</p>"
            "<ul><li>Market Street 1</li><li>Station Square 4</li><li>Harbour Road 17</li></ul>"
        ),
    },
)

EDITOR_PERMISSIONS = (
    ("cms", "page", ("add", "change", "delete", "view", "publish")),
    ("cms", "pagecontent", ("add", "change", "delete", "view")),
    ("cms", "placeholder", ("use_structure",)),
    ("cms", "pageurl", ("add", "change", "delete", "view")),
    ("djangocms_text", "text", ("add", "change", "delete", "view")),
    ("django_webfetch", "toolcall", ("view",)),
    # Their own MCP access tokens (the admin shows and issues a user's own tokens only).
    ("django_webfetch", "accesstoken", ("add", "change", "view")),
)


class Command(BaseCommand):
    help = "Create the demo's pages, its approver (admin) and its editor (editor)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--domain", default="127.0.0.1:8000")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        Site.objects.update_or_create(
            pk=1, defaults={"domain": options["domain"], "name": "Example Bakery"}
        )
        admin = self._user("admin", os.environ.get("DEMO_ADMIN_PASSWORD", "admin"), admin=True)
        editor = self._user("editor", os.environ.get("DEMO_EDITOR_PASSWORD", "editor"))
        group, _ = Group.objects.get_or_create(name="Editors")
        for app_label, model, actions in EDITOR_PERMISSIONS:
            for action in actions:
                codename = f"{action}_{model}"
                perm = Permission.objects.filter(
                    content_type__app_label=app_label, codename=codename
                ).first()
                if perm is not None:
                    group.permissions.add(perm)
        editor.groups.add(group)
        self._pages(admin)
        self.stdout.write("demo pages and users are ready")

    def _user(self, name: str, password: str, *, admin: bool = False) -> Any:
        User = get_user_model()
        user = User.objects.filter(username=name).first()
        if user is None:
            user = User(username=name, email=f"{name}@example.org", is_staff=True)
            user.is_superuser = admin
            user.set_password(password)
            user.save()
            self.stdout.write(f"created user {name}")
        return user

    def _pages(self, admin: Any) -> None:
        from cms.api import add_plugin, create_page
        from cms.models import Page, PageContent

        if Page.objects.exists():
            return
        for spec in PAGES:
            page = create_page(
                spec["title"],
                "page.html",
                "en",
                slug=spec["slug"],
                created_by=admin,
                in_navigation=True,
            )
            content = PageContent.admin_manager.get(page=page, language="en")
            placeholder = content.get_placeholders().get(slot="content")
            add_plugin(placeholder, "TextPlugin", "en", body=spec["body"])
            if spec["slug"] == "home":
                page.set_as_homepage(admin)
        self.stdout.write(f"created {len(PAGES)} published pages")
