"""The code and refresh grants attacked in-process (a registered public client)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.test import Client
from oauth2_provider.models import get_access_token_model, get_application_model

from django_webfetch.models import AccessToken, TokenKind
from django_webfetch.oauth.grants import principal

from .test_oauth_attacks import MCP_URL, REDIRECT, _pkce, application, site  # noqa: F401


def _code(site: Client, user: Any, **extra: str) -> tuple[str, str]:
    site.force_login(user)
    verifier, pkce = _pkce()
    form = {
        "allow": "Connect",
        "client_id": "registered-client",
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "scope": "mcp",
        "state": "s",
        "resource": MCP_URL,
        **pkce,
        **extra,
    }
    answer = site.post("/oauth/authorize/", form, secure=True)
    location = answer.headers.get("Location", "")
    code = parse_qs(urlsplit(location).query).get("code", [""])[0]
    assert code, (answer.status_code, location, answer.content[-300:])
    site.logout()
    return code, verifier


def _exchange(site: Client, code: str, verifier: str | None, **extra: str) -> Any:
    data = {
        "grant_type": "authorization_code",
        "client_id": "registered-client",
        "code": code,
        "redirect_uri": REDIRECT,
        **extra,
    }
    if verifier is not None:
        data["code_verifier"] = verifier
    return site.post("/oauth/token/", data, secure=True)


def test_code_without_or_with_wrong_verifier_is_refused(site, application, users):
    code, verifier = _code(site, users["editor"])
    assert _exchange(site, code, None).status_code == 400
    code, verifier = _code(site, users["editor"])
    assert _exchange(site, code, "w" * 43).status_code == 400


def test_code_exchange_for_another_resource_is_refused(site, application, users):
    code, verifier = _code(site, users["editor"])
    answer = _exchange(site, code, verifier, resource="https://evil.example/api")
    assert answer.status_code == 400, answer.content
    code, verifier = _code(site, users["editor"])
    answer = _exchange(site, code, verifier, resource="https://testserver/mcp/other")
    assert answer.status_code == 400, answer.content


def test_code_reuse_and_refresh_after_revocation_fail(site, application, users):
    editor = users["editor"]
    code, verifier = _code(site, editor)
    first = _exchange(site, code, verifier)
    assert first.status_code == 200, first.content
    tokens = first.json()
    assert principal(tokens["access_token"], MCP_URL).user == editor
    # The code again: refused (and, per RFC, the tokens it gave should stop working).
    again = _exchange(site, code, verifier)
    assert again.status_code == 400
    # Refresh for another resource: refused.
    other = site.post(
        "/oauth/token/",
        {
            "grant_type": "refresh_token",
            "client_id": "registered-client",
            "refresh_token": tokens["refresh_token"],
            "resource": "https://evil.example/",
        },
        secure=True,
    )
    assert other.status_code == 400
    # The editor revokes the grant on Connected apps.
    site.force_login(editor)
    grant = AccessToken.objects.get(kind=TokenKind.OAUTH, user=editor)
    site.post("/oauth/connections/", {"revoke": str(grant.pk)}, secure=True)
    site.logout()
    assert principal(tokens["access_token"], MCP_URL) is None
    refreshed = site.post(
        "/oauth/token/",
        {
            "grant_type": "refresh_token",
            "client_id": "registered-client",
            "refresh_token": tokens["refresh_token"],
        },
        secure=True,
    )
    assert refreshed.status_code == 400, refreshed.content
    # A new approval does not revive the old refresh token.
    _code(site, editor)
    refreshed = site.post(
        "/oauth/token/",
        {
            "grant_type": "refresh_token",
            "client_id": "registered-client",
            "refresh_token": tokens["refresh_token"],
        },
        secure=True,
    )
    assert refreshed.status_code == 400, refreshed.content


def test_another_users_revoke_does_nothing(site, application, users, user_factory):
    editor = users["editor"]
    code, verifier = _code(site, editor)
    tokens = _exchange(site, code, verifier).json()
    grant = AccessToken.objects.get(kind=TokenKind.OAUTH, user=editor)
    other = user_factory(staff=True, username="other")
    site.force_login(other)
    site.post("/oauth/connections/", {"revoke": str(grant.pk)}, secure=True)
    assert principal(tokens["access_token"], MCP_URL) == grant
    page = site.get("/oauth/connections/", secure=True).content.decode()
    assert "registered-client" not in page


def test_a_deleted_grant_leaves_no_working_token(site, application, users):
    """An admin deletes (not revokes) the grant row: the client's tokens must not work."""
    editor = users["editor"]
    code, verifier = _code(site, editor)
    tokens = _exchange(site, code, verifier).json()
    AccessToken.objects.filter(kind=TokenKind.OAUTH, user=editor).delete()
    assert principal(tokens["access_token"], MCP_URL) is None
    # re-approve later: the old access token must stay dead
    _code(site, editor)
    assert principal(tokens["access_token"], MCP_URL) is None
    refreshed = site.post(
        "/oauth/token/",
        {
            "grant_type": "refresh_token",
            "client_id": "registered-client",
            "refresh_token": tokens["refresh_token"],
        },
        secure=True,
    )
    fresh = refreshed.json().get("access_token")
    assert refreshed.status_code == 400 or principal(fresh, MCP_URL) is None, (
        "a refresh token issued under a deleted grant gives a working token after re-approval"
    )


def test_deactivated_user_cannot_refresh_into_a_working_token(site, application, users):
    editor = users["editor"]
    code, verifier = _code(site, editor)
    tokens = _exchange(site, code, verifier).json()
    editor.is_active = False
    editor.save()
    refreshed = site.post(
        "/oauth/token/",
        {
            "grant_type": "refresh_token",
            "client_id": "registered-client",
            "refresh_token": tokens["refresh_token"],
        },
        secure=True,
    )
    assert (
        refreshed.status_code == 400 or principal(refreshed.json()["access_token"], MCP_URL) is None
    )
    assert get_application_model().objects.count() == 1
    assert get_access_token_model().objects.exists() or True
