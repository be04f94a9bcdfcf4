"""Outside attacks on the OAuth 2.1 authorization server (issue 32).

Each test asserts the SECURE behaviour: a failing test is a finding."""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import get_application_model

from django_webfetch.models import AccessToken, TokenEvent, TokenKind
from django_webfetch.oauth.cimd import MetadataRefused, check_redirect_uri

MCP_URL = "https://testserver/mcp"
REDIRECT = "http://127.0.0.1:33418/callback"
CLIENT_HOST = "clients.lab.example"


def _pkce() -> tuple[str, dict[str, str]]:
    verifier = secrets.token_urlsafe(64)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, {
        "code_challenge": challenge.decode().rstrip("="),
        "code_challenge_method": "S256",
    }


def _cimd(name: str) -> str:
    return f"https://{CLIENT_HOST}/client-metadata.json?" + urlencode(
        {"name": name, "redirect": REDIRECT}
    )


@pytest.fixture
def site(settings: Any) -> Client:
    settings.ROOT_URLCONF = "tests.mcp.oauth_urls"
    settings.LOGIN_URL = "/accounts/login/"
    return Client(HTTP_HOST="testserver")


@pytest.fixture
def application(db: Any) -> Any:
    return get_application_model().objects.create(
        name="registered client",
        client_id="registered-client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris=REDIRECT,
    )


def _authorize(client_id: str = "registered-client", **extra: str) -> str:
    _verifier, pkce = _pkce()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "s1",
        "resource": MCP_URL,
        "scope": "mcp",
        **pkce,
        **extra,
    }
    return f"/oauth/authorize/?{urlencode(params)}"


# -- consent page ------------------------------------------------------------------------


def test_consent_page_cannot_be_framed(site, application, users):
    """Clickjacking: the consent page's 'Connect' button must not be frameable by another
    origin, whatever middleware the project has."""
    site.force_login(users["editor"])
    page = site.get(_authorize(), secure=True)
    assert page.status_code == 200, page.content[-500:]
    assert b'name="allow"' in page.content or b"allow" in page.content
    csp = page.headers.get("Content-Security-Policy", "")
    assert page.headers.get("X-Frame-Options") in ("DENY", "SAMEORIGIN") or (
        "frame-ancestors" in csp
    ), dict(page.headers)


def test_connected_apps_page_cannot_be_framed(site, users):
    site.force_login(users["editor"])
    page = site.get("/oauth/connections/", secure=True)
    assert page.status_code == 200
    assert page.headers.get("X-Frame-Options") in ("DENY", "SAMEORIGIN"), dict(page.headers)


def test_consent_post_needs_csrf(settings, application, users):
    settings.ROOT_URLCONF = "tests.mcp.oauth_urls"
    strict = Client(HTTP_HOST="testserver", enforce_csrf_checks=True)
    strict.force_login(users["editor"])
    _v, pkce = _pkce()
    form = {
        "allow": "Connect",
        "client_id": "registered-client",
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "scope": "mcp",
        "state": "s",
        "resource": MCP_URL,
        **pkce,
    }
    answer = strict.post("/oauth/authorize/", form, secure=True)
    assert answer.status_code == 403
    assert not AccessToken.objects.filter(kind=TokenKind.OAUTH).exists()


@pytest.mark.parametrize(
    "tamper",
    [
        {"resource": f"{MCP_URL} https://evil.example/api"},
        {"resource": "https://testserver/mcp/../admin"},
        {"resource": "https://TESTSERVER/mcp"},
        {"resource": ""},
        {"code_challenge_method": "plain"},
        {"code_challenge_method": "", "code_challenge": ""},
        {"code_challenge": "x"},
    ],
)
def test_consent_post_with_tampered_fields_is_refused(site, application, users, tamper):
    site.force_login(users["editor"])
    _v, pkce = _pkce()
    form = {
        "allow": "Connect",
        "client_id": "registered-client",
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "scope": "mcp",
        "state": "s",
        "resource": MCP_URL,
        **pkce,
        **tamper,
    }
    answer = site.post("/oauth/authorize/", form, secure=True)
    assert answer.status_code == 400 or "code=" not in answer.headers.get("Location", "")
    assert not AccessToken.objects.filter(kind=TokenKind.OAUTH).exists()


def test_no_grant_is_issued_when_the_authorization_itself_fails(site, application, users):
    """The consent POST with 'allow' but a redirect_uri the client never registered: the
    toolkit refuses the authorization, so no grant should exist either."""
    site.force_login(users["editor"])
    _v, pkce = _pkce()
    form = {
        "allow": "Connect",
        "client_id": "registered-client",
        "redirect_uri": "http://127.0.0.1:9/elsewhere",
        "response_type": "code",
        "scope": "mcp",
        "state": "s",
        "resource": MCP_URL,
        **pkce,
    }
    answer = site.post("/oauth/authorize/", form, secure=True)
    assert "code=" not in answer.headers.get("Location", "")
    assert not AccessToken.objects.filter(kind=TokenKind.OAUTH).exists(), (
        "a grant was issued for an authorization the toolkit refused"
    )


# -- redirect URIs a client metadata document may name --------------------------------------


@pytest.mark.parametrize(
    "uri",
    [
        "http://127.0.0.1.evil.example:80/cb",
        "http://[::1]@evil.example:80/cb",
        "http://127.0.0.1:80@evil.example/cb",
        "http://evil.example\\@127.0.0.1:80/cb",
        "http://127.0.0.1:80\\@evil.example/cb",
        "http://127.0.0.1%2eevil.example:80/cb",
        "http://127.1:80/cb",
        "http://0x7f000001:80/cb",
        "http://2130706433:80/cb",
        "http://[::1%25eth0]:80/cb",
        "http://[0:0:0:0:0:0:0:1]:80/cb",
        "http://127.0.0.1:80/cb#x",
        "http://127.0.0.1:80/cb\n",
        "http://127.0.0.1\t:80/cb",
        "HTTP://127.0.0.1.nip.io:80/cb",
        "https://user:pw@clients.lab.example/cb",
        "data:text/html,x",
        "https:/\\evil.example/cb",
    ],
)
def test_loopback_lookalikes_are_refused(uri, web):
    with pytest.raises(MetadataRefused):
        check_redirect_uri(uri)


# -- Client ID Metadata Documents: who may make the server fetch and store --------------------


@pytest.fixture
def oauth_lab(web: Any, settings: Any) -> Any:
    settings.ROOT_URLCONF = "tests.mcp.oauth_urls"
    settings.LOGIN_URL = "/accounts/login/"
    web.dns.set(CLIENT_HOST, a=[web.PUBLIC_V4[3]])
    return web


def _anonymous_token_request(client: Client, client_id: str) -> Any:
    return client.post(
        "/oauth/token/",
        {
            "grant_type": "authorization_code",
            "client_id": client_id,
            "code": "nope",
            "redirect_uri": REDIRECT,
            "code_verifier": "v" * 43,
        },
        secure=True,
    )


@pytest.mark.lab
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_an_anonymous_client_cannot_fill_the_client_table(oauth_lab, settings, users):
    """Anyone may POST the token endpoint: each new client_id URL is fetched and stored
    (an Application row) without a signed-in user.  With WEBFETCH_OAUTH_MAX_CLIENTS rows
    that are not yet stale (max-age up to a day, the attacker's choice), every new
    legitimate client is refused ``client_limit``."""
    settings.WEBFETCH_OAUTH_MAX_CLIENTS = 3
    anonymous = Client(HTTP_HOST="testserver")
    for n in range(3):
        _anonymous_token_request(anonymous, _cimd(f"junk {n}"))
    stored = get_application_model().objects.filter(registration_source="cimd").count()
    # Now an editor's real client:
    editor = Client(HTTP_HOST="testserver")
    editor.force_login(users["editor"])
    page = editor.get(_authorize(_cimd("Real IDE")), secure=True)
    assert stored == 0 and page.status_code == 200, (
        f"anonymous requests stored {stored} clients; the editor's real client got "
        f"{page.status_code}: {TokenEvent.objects.filter(action='client_refused').values_list('reason', flat=True)[:5]}"
    )


@pytest.mark.lab
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_anonymous_refusals_do_not_write_unbounded_audit_rows(oauth_lab):
    """Each refused client_id (a private address here) writes a TokenEvent that no
    retention rule removes; an anonymous caller chooses as many distinct URLs as it likes."""
    oauth_lab.dns.set("inside.lab.example", a=["10.0.0.10"])
    anonymous = Client(HTTP_HOST="testserver")
    for n in range(25):
        _anonymous_token_request(anonymous, f"https://inside.lab.example/c/{n}.json")
    rows = TokenEvent.objects.filter(action=TokenEvent.Action.CLIENT_REFUSED).count()
    assert rows <= 5, f"{rows} audit rows written by 25 anonymous requests"


@pytest.mark.django_db
def test_retention_removes_old_token_events():
    from django_webfetch import retention

    row = TokenEvent.objects.create(
        action=TokenEvent.Action.CLIENT_REFUSED,
        client_id="https://attacker.example/secret-path?x=page-text",
        reason="address_class:private",
        by="server",
    )
    TokenEvent.objects.filter(pk=row.pk).update(created=timezone.now() - timedelta(days=3650))
    retention.prune()
    assert not TokenEvent.objects.filter(pk=row.pk).exists(), "TokenEvent is never pruned"


# -- a space in one redirect URI: the toolkit stores the list space-joined -------------------

SMUGGLED = "http://127.0.0.1:33418/callback http://intranet.lab.example/steal"


def test_a_space_smuggles_an_unchecked_redirect_uri(web):
    """``check_redirect_uri`` sees one loopback URI; the toolkit stores ``" ".join(uris)``
    and later splits on whitespace: the second URI was never checked."""
    with pytest.raises(MetadataRefused):
        check_redirect_uri(SMUGGLED)


@pytest.mark.lab
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_smuggled_redirect_uri_is_registered_and_used(oauth_lab, users):
    client_id = f"https://{CLIENT_HOST}/client-metadata.json?" + urlencode(
        {"name": "Smuggler", "redirect": SMUGGLED}
    )
    editor = Client(HTTP_HOST="testserver")
    editor.force_login(users["editor"])
    page = editor.get(
        _authorize(client_id, redirect_uri="http://intranet.lab.example/steal"), secure=True
    )
    row = get_application_model().objects.filter(client_id=client_id).first()
    stored = row.redirect_uris if row else None
    assert page.status_code != 200, (
        f"consent page served for an unchecked http redirect to a private host; stored: {stored!r}"
    )
