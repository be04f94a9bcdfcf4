"""The authorization server against the session-2 outside review (in-process, the lab for
the client metadata documents): who may make the site fetch and store a client, what a
redirect URI may contain, a deleted grant, framing, and when a grant is issued."""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.test import Client
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
)

from django_webfetch.models import AccessToken, EgressEvent, TokenEvent, TokenKind
from django_webfetch.oauth.cimd import TOOL, MetadataRefused, check_redirect_uri
from django_webfetch.oauth.grants import principal

MCP_URL = "https://testserver/mcp"
REDIRECT = "http://127.0.0.1:33418/callback"
CLIENT_HOST = "clients.lab.example"
#: One "redirect URI" that is two once the toolkit joins the list with spaces and splits it.
SMUGGLED = "http://127.0.0.1:33418/callback http://intranet.lab.example/steal"


def _pkce() -> tuple[str, dict[str, str]]:
    verifier = secrets.token_urlsafe(64)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, {
        "code_challenge": challenge.decode().rstrip("="),
        "code_challenge_method": "S256",
    }


def _cimd(name: str, redirect: str = REDIRECT) -> str:
    """A client id the lab serves a document for (its name and redirect from the query)."""
    return f"https://{CLIENT_HOST}/client-metadata.json?" + urlencode(
        {"name": name, "redirect": redirect}
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


@pytest.fixture
def oauth_lab(web: Any, site: Client) -> Any:
    web.dns.set(CLIENT_HOST, a=[web.PUBLIC_V4[3]])
    return web


def _documented() -> int:
    return int(get_application_model().objects.filter(registration_source="cimd").count())


# -- a client's document is fetched and stored only for a signed-in user -------------------


@pytest.mark.lab
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_an_anonymous_client_cannot_fill_the_client_table(oauth_lab, settings, users):
    """The token endpoint (anyone may POST it) fetches nothing and stores nothing for an
    unknown client: ``invalid_client``, no egress, no audit row, and no back-off that would
    lock the real client out; the editor's real client then connects."""
    settings.WEBFETCH_OAUTH_MAX_CLIENTS = 3
    anonymous = Client(HTTP_HOST="testserver")
    real = _cimd("Real IDE")
    for client_id in [_cimd(f"junk {n}") for n in range(5)] + [real]:
        answer = _anonymous_token_request(anonymous, client_id)
        assert answer.status_code == 401 and answer.json()["error"] == "invalid_client"
    # The unauthenticated consent page (prompt=none validates the request) fetches nothing.
    anonymous.get(_authorize(real, prompt="none"), secure=True)
    assert _documented() == 0
    assert not EgressEvent.objects.filter(tool=TOOL).exists()
    assert not TokenEvent.objects.exists()
    editor = Client(HTTP_HOST="testserver")
    editor.force_login(users["editor"])
    page = editor.get(_authorize(real), secure=True)
    assert page.status_code == 200, page.content[-500:]
    assert b"Real IDE" in page.content
    assert _documented() == 1


@pytest.mark.lab
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_anonymous_refusals_do_not_write_unbounded_audit_rows(oauth_lab):
    oauth_lab.dns.set("inside.lab.example", a=["10.0.0.10"])
    anonymous = Client(HTTP_HOST="testserver")
    for n in range(25):
        _anonymous_token_request(anonymous, f"https://inside.lab.example/c/{n}.json")
    assert not TokenEvent.objects.exists()
    assert not EgressEvent.objects.filter(tool=TOOL).exists()


@pytest.mark.lab
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_user_brings_a_bounded_number_of_new_clients_per_hour(oauth_lab, settings, users):
    """``WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR``: past it, a new client is refused
    (``client_rate``, said on the page, one audit row); a client already stored still
    opens, and another user has their own bound."""
    settings.WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR = 2
    editor = Client(HTTP_HOST="testserver")
    editor.force_login(users["editor"])
    for n in range(2):
        assert editor.get(_authorize(_cimd(f"tool {n}")), secure=True).status_code == 200
    for n in range(2, 5):
        page = editor.get(_authorize(_cimd(f"tool {n}")), secure=True)
        assert page.status_code == 400 and b"client_rate" in page.content
    assert _documented() == 2
    refused = TokenEvent.objects.filter(action=TokenEvent.Action.CLIENT_REFUSED)
    assert list(refused.values_list("reason", "user")) == [("client_rate", users["editor"].pk)]
    assert editor.get(_authorize(_cimd("tool 0")), secure=True).status_code == 200
    admin = Client(HTTP_HOST="testserver")
    admin.force_login(users["admin"])
    assert admin.get(_authorize(_cimd("tool 2")), secure=True).status_code == 200
    assert _documented() == 3


# -- redirect URIs and client ids: no whitespace, no control character -----------------------


@pytest.mark.parametrize(
    "uri",
    [
        SMUGGLED,
        "http://127.0.0.1:33418/callback\thttp://intranet.lab.example/steal",
        "http://127.0.0.1:33418/callback\u00a0http://intranet.lab.example/steal",
        "http://127.0.0.1:33418/callback\u2003https://intranet.lab.example/",
        "http://127.0.0.1:33418/call back",
        "http://127.0.0.1:33418/callback\x00",
        "http://127.0.0.1:33418/callback\u200b",
    ],
)
def test_a_space_or_control_character_in_a_redirect_uri_is_refused(uri):
    with pytest.raises(MetadataRefused) as refused:
        check_redirect_uri(uri)
    assert refused.value.reason == "redirect_uri_form"


@pytest.mark.lab
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_smuggled_redirect_uri_is_never_registered(oauth_lab, users):
    client_id = _cimd("Smuggler", redirect=SMUGGLED)
    editor = Client(HTTP_HOST="testserver")
    editor.force_login(users["editor"])
    page = editor.get(
        _authorize(client_id, redirect_uri="http://intranet.lab.example/steal"), secure=True
    )
    assert page.status_code == 400 and b"redirect_uri_form" in page.content
    assert not get_application_model().objects.filter(client_id=client_id).exists()
    refused = TokenEvent.objects.get(action=TokenEvent.Action.CLIENT_REFUSED)
    assert refused.reason == "redirect_uri_form" and refused.user == users["editor"]


@pytest.mark.lab
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_client_id_with_whitespace_is_refused_before_any_fetch(oauth_lab, users):
    editor = Client(HTTP_HOST="testserver")
    editor.force_login(users["editor"])
    client_id = f"https://{CLIENT_HOST}/client-metadata.json?name=a%20b&x= y"
    page = editor.get(_authorize(client_id), secure=True)
    assert page.status_code == 400
    assert not EgressEvent.objects.filter(tool=TOOL).exists()
    assert TokenEvent.objects.get().reason == "client_id_form"


# -- grants: issued after validation, and a deleted one leaves no working token --------------


def _code(site: Client, user: Any) -> tuple[str, str]:
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
    }
    answer = site.post("/oauth/authorize/", form, secure=True)
    location = answer.headers.get("Location", "")
    code = parse_qs(urlsplit(location).query).get("code", [""])[0]
    assert code, (answer.status_code, location)
    site.logout()
    return code, verifier


def _tokens(site: Client, user: Any) -> dict[str, Any]:
    code, verifier = _code(site, user)
    answer = site.post(
        "/oauth/token/",
        {
            "grant_type": "authorization_code",
            "client_id": "registered-client",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
        },
        secure=True,
    )
    assert answer.status_code == 200, answer.content
    return dict(answer.json())


def _refresh(site: Client, refresh_token: str) -> Any:
    return site.post(
        "/oauth/token/",
        {
            "grant_type": "refresh_token",
            "client_id": "registered-client",
            "refresh_token": refresh_token,
        },
        secure=True,
    )


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["queryset", "instance"])
def test_a_deleted_grant_leaves_no_working_token(site, application, users, how):
    """Deleting a grant (the admin's *delete selected* is a queryset delete) does what
    revoking it does: its access tokens go, its refresh tokens are revoked, and a new
    approval does not revive them."""
    editor = users["editor"]
    tokens = _tokens(site, editor)
    grants = AccessToken.objects.filter(kind=TokenKind.OAUTH, user=editor)
    if how == "queryset":
        grants.delete()
    else:
        grants.get().delete()
    assert principal(tokens["access_token"], MCP_URL) is None
    assert not get_access_token_model().objects.exists()
    assert not get_refresh_token_model().objects.filter(revoked__isnull=True).exists()
    _code(site, editor)  # approved again
    assert principal(tokens["access_token"], MCP_URL) is None
    assert _refresh(site, tokens["refresh_token"]).status_code == 400


@pytest.mark.django_db
def test_no_grant_is_issued_when_the_authorization_itself_fails(site, application, users):
    """'Connect' with a redirect URI the client never registered: the toolkit refuses the
    authorization, and no grant exists either (it is issued when the code is saved)."""
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
    assert not AccessToken.objects.filter(kind=TokenKind.OAUTH).exists()
    site.logout()
    _code(site, users["editor"])  # the same with the registered redirect: one grant
    assert AccessToken.objects.filter(kind=TokenKind.OAUTH).count() == 1


# -- framing ----------------------------------------------------------------------------------


def _not_framed(page: Any) -> None:
    assert page.headers.get("X-Frame-Options") == "DENY", dict(page.headers)
    assert "frame-ancestors 'none'" in page.headers.get("Content-Security-Policy", "")


@pytest.mark.django_db
def test_consent_page_cannot_be_framed(site, application, users):
    site.force_login(users["editor"])
    page = site.get(_authorize(), secure=True)
    assert page.status_code == 200 and b'name="allow"' in page.content
    _not_framed(page)
    refused = site.get(_authorize("https://unknown.example/c.json"), secure=True)
    _not_framed(refused)


@pytest.mark.django_db
def test_connected_apps_page_cannot_be_framed(site, users):
    site.force_login(users["editor"])
    page = site.get("/oauth/connections/", secure=True)
    assert page.status_code == 200
    _not_framed(page)


# -- what the consent page shows --------------------------------------------------------------


@pytest.mark.django_db
def test_the_consent_page_shows_a_tools_description_with_its_invisible_characters_escaped(
    site, application, users, tool_registry, group_factory
):
    """A tool's description is its author's text (a plugin's manifest): a right-to-left
    override or an invisible character in it would make the consent page's list of tools
    read otherwise than it is.  Shown escaped (``tools.display.visible_text``), as on the
    approval surfaces.  (History: issue 30, round 25, a lead of the outside review.)"""
    from django_webfetch.net.policy import Scope
    from django_webfetch.tools import Effect, Tool

    class Disguised(Tool):
        name = "consent_disguised"
        group = "consent-test"
        scope = Scope.NONE
        effect = Effect.READ
        enabled_by_default = True
        description = "Reads pages\u202e.sdrawkcab\u200b"
        parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

        def execute(self, arguments: Any, context: Any) -> Any:  # pragma: no cover
            raise AssertionError("never called")

    tool_registry.register(Disguised)
    group_factory("consent-test", enabled=True)
    site.force_login(users["editor"])
    page = site.get(_authorize(), secure=True)
    assert page.status_code == 200
    text = page.content.decode()
    assert "consent_disguised" in text
    assert "\u202e" not in text and "\u200b" not in text
    assert "Reads pages\\u202e.sdrawkcab\\u200b" in text
