"""Review round 4 (issue 29), finding 2 (medium): a staff account holding only "Can add access
token" issued
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
    # Expected: no token for the superuser exists.  The delegate may have issued one for
    # themselves (the form has no user to pick); a secret shown is theirs, not root's.
    assert not AccessToken.objects.filter(user=superuser).exists()
    for message in messages:
        if "secret" in message:
            token = AccessToken.objects.authenticate(message.rsplit(" ", 1)[-1])
            assert token is not None and token.user == delegate


# -- every issuing surface goes through the one door ------------------------------------


def test_the_one_door_issues_own_tokens_and_superusers_issue_any(user_factory, superuser):
    from django_webfetch.models.tokens import OPERATOR, TokenIssueDenied

    delegate = _one_permission(user_factory, "add_accesstoken")
    editor = user_factory(username="someone")
    assert AccessToken.objects.issue(delegate, "mine", by=delegate)[0].user == delegate
    assert AccessToken.objects.issue(editor, "theirs", by=superuser)[0].user == editor
    assert AccessToken.objects.issue(superuser, "shell", by=OPERATOR)[0].user == superuser
    for user, by in ((superuser, delegate), (editor, delegate), (delegate, None)):
        with pytest.raises(TokenIssueDenied):
            AccessToken.objects.issue(user, "refused", by=by)
    inactive = user_factory(username="gone", active=False)
    for by in (inactive, superuser, OPERATOR):
        with pytest.raises(TokenIssueDenied):
            AccessToken.objects.issue(inactive, "refused", by=by)
    # No way around the door: a row saved or created directly is refused.
    with pytest.raises(TokenIssueDenied):
        AccessToken.objects.create(user=delegate, name="direct", token_hash="0" * 64)
    with pytest.raises(TokenIssueDenied):
        AccessToken(user=delegate, name="direct", token_hash="1" * 64).save()
    assert AccessToken.objects.count() == 3


def test_the_admin_lets_a_delegate_issue_and_see_only_their_own(client, user_factory, superuser):
    delegate = _one_permission(user_factory, "add_accesstoken")
    delegate.user_permissions.add(
        Permission.objects.get(
            codename="view_accesstoken", content_type__app_label="django_webfetch"
        )
    )
    AccessToken.objects.issue(superuser, "root's", by=superuser)
    client.force_login(delegate)
    form = client.get("/admin/django_webfetch/accesstoken/add/").content.decode()
    assert 'name="user"' not in form  # nobody to pick
    response = client.post(
        "/admin/django_webfetch/accesstoken/add/", {"name": "my IDE"}, follow=True
    )
    [message] = [str(m) for m in response.context["messages"] if "secret" in str(m)]
    token = AccessToken.objects.authenticate(message.rsplit(" ", 1)[-1])
    assert token is not None and token.user == delegate and token.name == "my IDE"
    listing = client.get("/admin/django_webfetch/accesstoken/").content.decode()
    assert "my IDE" in listing and "root&#x27;s" not in listing and "root's" not in listing


def test_a_superuser_issues_for_another_user_in_the_admin(client, superuser, editor):
    client.force_login(superuser)
    response = client.post(
        "/admin/django_webfetch/accesstoken/add/", {"user": editor.pk, "name": "theirs"}
    )
    assert response.status_code == 302
    assert AccessToken.objects.get().user == editor


def test_the_cli_issues_as_the_operator(editor):
    import io

    from django.core.management import call_command

    out = io.StringIO()
    arguments = ("token", "create", "--user", "editor", "--name", "IDE")
    call_command("webfetch", *arguments, stdout=out, stderr=io.StringIO())
    token = AccessToken.objects.authenticate(out.getvalue().strip().splitlines()[-1])
    assert token is not None and token.user == editor


def test_a_tokens_rights_are_its_owners_at_each_request(user_factory, tool_registry):
    """A superuser's token offers admin-only tools; demoted, the next request does not."""
    from django_webfetch.mcp.calls import offered_tools
    from tests.runs.conftest import AdminTool

    tool_registry.register(AdminTool)
    root = user_factory(superuser=True, username="root2")
    _token, secret = AccessToken.objects.issue(root, "agent", by=root)
    before = {s.name for s in offered_tools(AccessToken.objects.authenticate(secret).user)}
    assert AdminTool.name in before
    type(root).objects.filter(pk=root.pk).update(is_superuser=False)
    after = {s.name for s in offered_tools(AccessToken.objects.authenticate(secret).user)}
    assert AdminTool.name not in after
    type(root).objects.filter(pk=root.pk).update(is_active=False)
    assert AccessToken.objects.authenticate(secret) is None
