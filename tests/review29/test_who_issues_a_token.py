"""review29, finding 2 (medium): a staff account holding only "Can add access token" issued
a token *for a superuser* in the admin, was shown its secret, and used admin-only tools and
every user's results over MCP.

The rule: a user issues tokens for themselves; only a superuser issues one for another
user (never above their own rights: a superuser has every right).  A token's rights are its
owner's rights at each request.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from django_webfetch.models import AccessToken

pytestmark = pytest.mark.django_db


def _one_permission(user_factory: Any, codename: str) -> Any:
    user = user_factory(staff=True, username="delegate")
    user.user_permissions.add(
        Permission.objects.get(codename=codename, content_type__app_label="django_webfetch")
    )
    return get_user_model().objects.get(pk=user.pk)


def test_a_staff_user_with_add_token_issues_none_for_a_superuser_in_the_admin(
    client, user_factory, superuser
):
    delegate = _one_permission(user_factory, "add_accesstoken")
    client.force_login(delegate)
    response = client.post(
        "/admin/django_webfetch/accesstoken/add/",
        {"user": superuser.pk, "name": "not mine"},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]] if response.context else []
    # Expected: refused; no token for the superuser exists, no secret was shown.
    assert not AccessToken.objects.filter(user=superuser).exists()
    assert not any("wfpat_" in m for m in messages)
    assert "wfpat_" not in response.content.decode()
