"""The authorization server's rules, in-process (Django's test client, over "https").

Discovery documents, the grants it refuses, Dynamic Client Registration off by default,
the redirect URIs a client's metadata document may name, grants in the admin beside
personal tokens and what revoking one there does.  The end-to-end flow with the SDK's
OAuth client is ``test_oauth.py``.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
)

from django_webfetch.models import AccessToken, TokenEvent, TokenKind
from django_webfetch.oauth.cimd import MetadataRefused, check_redirect_uri
from django_webfetch.oauth.grants import principal

MCP_URL = "https://testserver/mcp"
REDIRECT = "http://127.0.0.1:33418/callback"


def test_discovery_names_the_resource_code_with_s256_and_client_metadata_documents(site, db):
    resource = site.get("/.well-known/oauth-protected-resource/mcp", secure=True).json()
    assert resource["resource"] == MCP_URL
    assert resource["authorization_servers"] == ["https://testserver"]
    server = site.get("/.well-known/oauth-authorization-server", secure=True).json()
    assert server["issuer"] == "https://testserver"
    assert server["authorization_endpoint"] == "https://testserver/oauth/authorize/"
    assert server["token_endpoint"] == "https://testserver/oauth/token/"
    assert server["response_types_supported"] == ["code"]
    assert server["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert server["token_endpoint_auth_methods_supported"] == ["none"]
    assert server["client_id_metadata_document_supported"] is True
    # Dynamic Client Registration is the operator's opt-in: off, not advertised, 404.
    assert "registration_endpoint" not in server
    registered = site.post(
        "/oauth/register/",
        data={"redirect_uris": [REDIRECT], "client_name": "x"},
        content_type="application/json",
        secure=True,
    )
    assert registered.status_code == 404
    assert not get_application_model().objects.exists()


def test_password_implicit_and_client_credentials_grants_are_refused(site, application, users):
    for grant in ("password", "client_credentials", "urn:ietf:params:oauth:grant-type:device_code"):
        answer = site.post(
            "/oauth/token/",
            {
                "grant_type": grant,
                "client_id": "registered-client",
                "username": "editor",
                "password": "x",
            },
            secure=True,
        )
        assert answer.status_code == 400, grant
        assert answer.json()["error"] == "unsupported_grant_type"
    assert not get_access_token_model().objects.exists()
    site.force_login(users["editor"])
    params = {
        "response_type": "token",
        "client_id": "registered-client",
        "redirect_uri": REDIRECT,
        "resource": MCP_URL,
    }
    implicit = site.get(f"/oauth/authorize/?{urlencode(params)}", secure=True)
    assert implicit.status_code == 400 and b"invalid_request" in implicit.content
    # No PKCE: refused (PKCE_REQUIRED), and plain PKCE too (S256 only).
    for extra in ({}, {"code_challenge": "a" * 43, "code_challenge_method": "plain"}):
        no_pkce = site.get(
            f"/oauth/authorize/?{urlencode({**params, 'response_type': 'code', **extra})}",
            secure=True,
        )
        assert no_pkce.status_code == 400 and b"S256" in no_pkce.content
    assert not AccessToken.objects.filter(kind=TokenKind.OAUTH).exists()


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1:33418/callback",
        "http://127.0.0.1:1/",
        "http://[::1]:65535/cb?x=1",
    ],
)
def test_a_native_clients_loopback_redirect_is_accepted(uri):
    check_redirect_uri(uri)


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("http://localhost:33418/callback", "redirect_uri_not_loopback"),
        ("http://127.0.0.1/callback", "redirect_uri_not_loopback"),  # no port: not native
        ("http://10.0.0.10:8080/cb", "redirect_uri_not_loopback"),
        ("http://169.254.169.254:80/", "redirect_uri_not_loopback"),
        ("http://client.example/cb", "redirect_uri_not_loopback"),
        ("http://127.0.0.2:33418/cb", "redirect_uri_not_loopback"),
        ("http://[::ffff:127.0.0.1]:33418/cb", "redirect_uri_not_loopback"),
        ("https://127.0.0.1/cb", "redirect_uri:address_class:loopback"),
        ("https://10.0.0.10/cb", "redirect_uri:address_class:private"),
        ("https://169.254.169.254/latest", "redirect_uri:address_class:metadata"),
        ("javascript:alert(1)", "redirect_uri_scheme"),
        ("cursor://callback", "redirect_uri_scheme"),
        ("http://127.0.0.1:33418/cb#frag", "redirect_uri_form"),
        ("http://user@127.0.0.1:33418/cb", "redirect_uri_form"),
        (42, "redirect_uri_form"),
    ],
)
def test_a_redirect_uri_elsewhere_than_loopback_or_a_public_https_host_is_refused(uri, reason, db):
    with pytest.raises(MetadataRefused) as refused:
        check_redirect_uri(uri)
    assert refused.value.reason == reason


@given(
    host=st.one_of(
        st.ip_addresses().map(lambda a: f"[{a}]" if a.version == 6 else str(a)),
        st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,5}){0,2}", fullmatch=True),
    ),
    port=st.integers(1, 65535),
)
def test_an_http_redirect_is_accepted_for_the_loopback_literals_only(host, port):
    uri = f"http://{host}:{port}/callback"
    if host in ("127.0.0.1", "[::1]"):
        check_redirect_uri(uri)
    else:
        with pytest.raises(MetadataRefused):
            check_redirect_uri(uri)


def _mint(user: Any, application: Any, resource: list[str]) -> str:
    secret = secrets.token_urlsafe(30)
    token = get_access_token_model().objects.create(
        user=user,
        application=application,
        token=secret,
        expires=timezone.now() + timedelta(hours=1),
        scope="mcp",
        resource=resource,
    )
    get_refresh_token_model().objects.create(
        user=user, application=application, token=secrets.token_urlsafe(30), access_token=token
    )
    return secret


def test_the_admin_lists_oauth_grants_beside_personal_tokens_and_revoking_one_ends_it(
    site, application, users
):
    editor, admin = users["editor"], users["admin"]
    AccessToken.objects.issue(editor, "laptop IDE", by=editor)
    grant, _ = AccessToken.objects.issue(
        editor, "OAuth: registered", by=editor, kind=TokenKind.OAUTH, client_id="registered-client"
    )
    secret = _mint(editor, application, [MCP_URL])
    assert principal(secret, MCP_URL) == grant
    # The grant is not a personal token: its (unknown) secret never authenticates as one.
    assert AccessToken.objects.filter(kind=TokenKind.OAUTH).count() == 1
    site.force_login(admin)
    listing = site.get("/admin/django_webfetch/accesstoken/", secure=True)
    assert listing.status_code == 200
    page = listing.content.decode()
    assert "laptop IDE" in page and "OAuth: registered" in page and "registered-client" in page
    answer = site.post(
        "/admin/django_webfetch/accesstoken/",
        {"action": "revoke_selected", "_selected_action": [grant.pk]},
        secure=True,
    )
    assert answer.status_code == 302
    grant.refresh_from_db()
    assert grant.revoked is not None
    assert principal(secret, MCP_URL) is None
    assert not get_access_token_model().objects.filter(user=editor).exists()
    assert not get_refresh_token_model().objects.filter(user=editor, revoked__isnull=True).exists()
    assert TokenEvent.objects.filter(
        token=grant, action=TokenEvent.Action.REVOKED, by="admin"
    ).exists()
    # A new approval is a new grant: the old tokens do not come back to it.
    again, _ = AccessToken.objects.issue(
        editor, "OAuth: registered", by=editor, kind=TokenKind.OAUTH, client_id="registered-client"
    )
    assert again.pk != grant.pk and principal(secret, MCP_URL) is None


def test_a_grant_acts_with_its_users_rights_at_each_request(application, users):
    editor = users["editor"]
    grant, _ = AccessToken.objects.issue(
        editor, "OAuth: registered", by=editor, kind=TokenKind.OAUTH, client_id="registered-client"
    )
    secret = _mint(editor, application, [MCP_URL])
    assert principal(secret, MCP_URL).user == editor
    editor.is_active = False
    editor.save()
    assert principal(secret, MCP_URL) is None
    editor.is_active = True
    editor.save()
    assert principal(secret, MCP_URL) == grant
    get_access_token_model().objects.update(expires=timezone.now() - timedelta(seconds=1))
    assert principal(secret, MCP_URL) is None


def test_e070_w070_w071_oauth_on_without_or_with_a_weakened_toolkit(settings):
    from django_webfetch.checks import check_oauth
    from django_webfetch.oauth.provider import oauth_provider_settings

    assert check_oauth() == []  # the tests' settings: OAuth on, as oauth_provider_settings
    settings.WEBFETCH_OAUTH_RESOURCE = None
    assert check_oauth() == []  # off: nothing to say
    settings.WEBFETCH_OAUTH_RESOURCE = "https://other.example/mcp"
    assert [m.id for m in check_oauth()] == ["django_webfetch.E070"]
    settings.WEBFETCH_OAUTH_RESOURCE = MCP_URL
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "oauth2_provider"]
    assert [m.id for m in check_oauth()] == ["django_webfetch.E070"]
    settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, "oauth2_provider"]
    settings.OAUTH2_PROVIDER = oauth_provider_settings(
        MCP_URL, dynamic_registration=True, PKCE_REQUIRED=False
    )
    messages = check_oauth()
    assert [m.id for m in messages] == ["django_webfetch.W070", "django_webfetch.W071"]
    assert "PKCE_REQUIRED" in messages[0].msg
    # A document fetched by the toolkit's own fetcher, or for anyone: weakened too.
    settings.OAUTH2_PROVIDER = oauth_provider_settings(
        MCP_URL,
        CIMD_METADATA_FETCHER="oauth2_provider.cimd.SafeMetadataFetcher",
        CIMD_REGISTRATION_PERMISSION_CLASSES=("oauth2_provider.cimd.AllowAllCIMDPermission",),
    )
    messages = check_oauth()
    assert [m.id for m in messages] == ["django_webfetch.W070"]
    assert "CIMD_METADATA_FETCHER" in messages[0].msg
    assert "CIMD_REGISTRATION_PERMISSION_CLASSES" in messages[0].msg


def test_clients_known_by_a_document_are_bounded(settings, users):
    from django_webfetch.oauth.cimd import make_room

    Application = get_application_model()
    settings.WEBFETCH_OAUTH_MAX_CLIENTS = 2
    editor = users["editor"]

    def known(n: int, *, stale: bool) -> Any:
        return Application.objects.create(
            name=f"client {n}",
            client_id=f"https://clients.example/{n}.json",
            client_type="public",
            authorization_grant_type="authorization-code",
            redirect_uris=REDIRECT,
            registration_source="cimd",
            cimd_expires_at=timezone.now() + timedelta(hours=-1 if stale else 1),
        )

    approved = known(1, stale=True)
    AccessToken.objects.issue(
        editor, "OAuth: 1", by=editor, kind=TokenKind.OAUTH, client_id=approved.client_id
    )
    unused = known(2, stale=True)
    make_room("https://clients.example/new.json")  # the stale, unapproved one goes
    assert not Application.objects.filter(pk=unused.pk).exists()
    assert Application.objects.filter(pk=approved.pk).exists()
    known(3, stale=False)
    with pytest.raises(MetadataRefused) as refused:
        make_room("https://clients.example/new.json")  # full of clients in use
    assert refused.value.reason == "client_limit"
    make_room("https://clients.example/3.json")  # a known client takes no new room
