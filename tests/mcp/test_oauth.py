"""OAuth 2.1 sign-in for remote MCP clients, driven by the official SDK's OAuth client.

The MCP server (uvicorn, ``tests.mcp.server_settings``) is reached as a TLS-terminating
proxy would reach it: the client speaks ``https://testserver/...``; the test transport
below carries each request to the server's Unix socket with ``X-Forwarded-Proto: https``
(``SECURE_PROXY_SSL_HEADER``) and refuses any other destination, so the client's loopback
redirect URI is never contacted: the "browser" reads the code from the ``Location``.
The client identifies itself with a Client ID Metadata Document served by a lab HTTPS
server on a public-looking address; the MCP server fetches it through the guard.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import anyio
import httpx2
import pytest
from django.db import connections
from django.utils import timezone
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from oauth2_provider.models import get_access_token_model, get_application_model

from django_webfetch.models import AccessToken, EgressEvent, TokenEvent, TokenKind
from django_webfetch.oauth.cimd import TOOL
from django_webfetch.tools import tools_for_user

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

ORIGIN = "https://testserver"
MCP_URL = f"{ORIGIN}/mcp"
REDIRECT = "http://127.0.0.1:33418/callback"
CLIENT_HOST = "clients.lab.example"
CIMD_URL = f"https://{CLIENT_HOST}/client-metadata.json?" + urlencode(
    {"name": "Lab MCP client", "redirect": REDIRECT}
)
_ACCEPT = {"Accept": "application/json, text/event-stream"}
_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


class ProxyTransport(httpx2.AsyncBaseTransport):
    """``https://testserver`` to the server's Unix socket, as a TLS-terminating proxy."""

    def __init__(self, socket_path: str) -> None:
        self.inner = httpx2.AsyncHTTPTransport(uds=socket_path)
        self.hosts: list[str] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.hosts.append(request.url.host)
        if request.url.scheme != "https" or request.url.host != "testserver":
            raise httpx2.ConnectError(f"the test proxy serves testserver only: {request.url}")
        forwarded = httpx2.Request(
            request.method,
            request.url.copy_with(scheme="http"),
            headers=[*request.headers.raw, (b"X-Forwarded-Proto", b"https")],
            stream=request.stream,
            extensions=request.extensions,
        )
        return await self.inner.handle_async_request(forwarded)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Inputs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "input" and found.get("name") and found.get("type") in ("hidden", None):
            self.values[found["name"] or ""] = found.get("value") or ""


def _inputs(html: str) -> dict[str, str]:
    parser = _Inputs()
    parser.feed(html)
    return parser.values


class Browser:
    """The editor's browser: signs in on the site's own login page, reads the consent
    page and posts its form as the browser would."""

    def __init__(self, transport: ProxyTransport) -> None:
        self.client = httpx2.AsyncClient(
            transport=transport, headers={"Origin": ORIGIN}, timeout=httpx2.Timeout(60)
        )
        self.pages: list[str] = []

    async def get(self, url: str) -> httpx2.Response:
        response = await self.client.get(url)
        self.pages.append(response.text)
        return response

    async def sign_in_and_open(self, authorize_url: str, username: str) -> httpx2.Response:
        """GET the authorization URL, signing in on the way when asked to."""
        first = await self.get(authorize_url)
        if first.status_code != 302 or "/accounts/login/" not in first.headers["location"]:
            return first
        login_url = urljoin(authorize_url, first.headers["location"])
        form = await self.get(login_url)
        fields = _inputs(form.text)
        fields.update(username=username, password="x")
        signed_in = await self.client.post(login_url, data=fields)
        assert signed_in.status_code == 302, signed_in.text[-2000:]
        return await self.get(urljoin(login_url, signed_in.headers["location"]))

    async def consent(self, authorize_url: str, username: str, *, allow: bool = True) -> str:
        page = await self.sign_in_and_open(authorize_url, username)
        assert page.status_code == 200, page.text[-2000:]
        fields = _inputs(page.text)
        if allow:
            fields["allow"] = "Connect"
        answer = await self.client.post(str(page.url), data=fields)
        assert answer.status_code == 302, answer.text[-2000:]
        return answer.headers["location"]

    async def aclose(self) -> None:
        await self.client.aclose()


class MemoryStorage:
    """The SDK's ``TokenStorage``: the client's tokens and client information."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def _in_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
    def run() -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return anyio.to_thread.run_sync(run)


class Client:
    """An MCP client with the SDK's ``OAuthClientProvider`` and the editor's browser."""

    def __init__(self, server: Any, username: str) -> None:
        self.transport = ProxyTransport(str(server.socket_path))
        self.browser = Browser(self.transport)
        self.storage = MemoryStorage()
        self.username = username
        self.authorize_urls: list[str] = []
        self.callbacks: list[str] = []
        self.provider = OAuthClientProvider(
            server_url=MCP_URL,
            client_metadata=OAuthClientMetadata(
                redirect_uris=[REDIRECT],  # type: ignore[list-item]
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
                client_name="Lab MCP client",
            ),
            storage=self.storage,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=CIMD_URL,
        )

    async def _redirect(self, url: str) -> None:
        self.authorize_urls.append(url)

    async def _callback(self) -> AuthorizationCodeResult:
        location = await self.browser.consent(self.authorize_urls[-1], self.username)
        self.callbacks.append(location)
        query = parse_qs(urlsplit(location).query)
        return AuthorizationCodeResult(
            code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0]
        )

    def http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            transport=self.transport, auth=self.provider, timeout=httpx2.Timeout(30, read=120)
        )

    def raw(self, bearer: str | None) -> httpx2.AsyncClient:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        return httpx2.AsyncClient(
            transport=self.transport, headers=headers, timeout=httpx2.Timeout(30)
        )


def _pkce() -> dict[str, str]:
    verifier = secrets.token_urlsafe(64)
    challenge = hashlib.sha256(verifier.encode()).digest()
    return {
        "code_challenge": base64.urlsafe_b64encode(challenge).decode().rstrip("="),
        "code_challenge_method": "S256",
    }


def _authorize_url(client_id: str, **extra: str) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "s1",
        "resource": MCP_URL,
        **_pkce(),
        **extra,
    }
    return f"{ORIGIN}/oauth/authorize/?{urlencode(params)}"


@pytest.fixture
def oauth_lab(web: Any) -> Any:
    web.dns.set(CLIENT_HOST, a=[web.PUBLIC_V4[3]])
    return web


def test_an_editor_connects_with_oauth_lists_their_tools_refreshes_and_revokes(
    http_server, users, group_factory, content_group, oauth_lab
):
    group_factory("code", enabled=True)  # admin-only tools: never the editor's
    server = http_server(WEBFETCH_TEST_OAUTH_TOKEN_SECONDS="2")
    client = Client(server, "editor")

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with (
            client.http() as http,
            streamable_http_client(MCP_URL, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            seen["tools"] = {t.name for t in (await session.list_tools()).tools}
            seen["first_token"] = client.storage.tokens.access_token
            # Past the access token's lifetime (2 s here): the SDK refreshes it, and the
            # session goes on with the new one.
            await anyio.sleep(3)
            seen["after_refresh"] = {t.name for t in (await session.list_tools()).tools}
            seen["second_token"] = client.storage.tokens.access_token
        # The old access token is refused once it expired; the new one works.
        async with client.raw(seen["first_token"]) as raw:
            seen["old"] = (await raw.post(MCP_URL, json=_INITIALIZE, headers=_ACCEPT)).status_code
        async with client.raw(seen["second_token"]) as raw:
            seen["new"] = (await raw.post(MCP_URL, json=_INITIALIZE, headers=_ACCEPT)).status_code
        # The editor revokes the client on Connected apps.
        connections_page = await client.browser.get(f"{ORIGIN}/oauth/connections/")
        seen["connections"] = connections_page.text
        grant = await _in_thread(
            lambda: AccessToken.objects.get(kind=TokenKind.OAUTH, user__username="editor")
        )
        fields = _inputs(connections_page.text)
        revoked = await client.browser.client.post(
            f"{ORIGIN}/oauth/connections/",
            data={"csrfmiddlewaretoken": fields["csrfmiddlewaretoken"], "revoke": str(grant.pk)},
        )
        seen["revoke_status"] = revoked.status_code
        async with client.raw(seen["second_token"]) as raw:
            refused = await raw.post(MCP_URL, json=_INITIALIZE, headers=_ACCEPT)
            seen["after_revoke"] = (refused.status_code, refused.headers.get("www-authenticate"))
        await client.browser.aclose()
        return seen

    seen = anyio.run(scenario)

    editor = users["editor"]
    offered = {t.name for t in tools_for_user(editor)}
    assert seen["tools"] == offered | {"fetch", "webfetch_call_status"}
    # An editor's OAuth token never sees the admin-only tools.
    assert {"read_source", "search_code"} <= {t.name for t in tools_for_user(users["admin"])}
    assert not {"read_source", "search_code"} & seen["tools"]
    assert seen["after_refresh"] == seen["tools"]
    assert seen["first_token"] != seen["second_token"]
    assert seen["old"] == 401 and seen["new"] == 200
    # The consent page named the client (from its verified metadata), the user and tools.
    consent = next(page for page in client.browser.pages if "authorizationForm" in page)
    assert "Lab MCP client" in consent and CLIENT_HOST in consent
    assert "editor" in consent and "fetch_external_url" in consent
    assert "read_source" not in consent
    # The client's metadata document came through the guard, from the lab host.
    fetched = EgressEvent.objects.filter(tool=TOOL)
    assert fetched.filter(decision="allowed", url_host=CLIENT_HOST).exists()
    application = get_application_model().objects.get(client_id=CIMD_URL)
    assert application.name == "Lab MCP client" and application.redirect_uris == REDIRECT
    # The code went to the loopback redirect only (never contacted: the proxy serves
    # testserver only), with the state the client sent.
    assert client.callbacks and all(c.startswith(REDIRECT + "?") for c in client.callbacks)
    assert set(client.transport.hosts) == {"testserver"}
    # One grant, listed beside personal tokens, revoked by the user; every step audited.
    grant = AccessToken.objects.get(kind=TokenKind.OAUTH, user=editor)
    assert grant.client_id == CIMD_URL and grant.revoked is not None
    assert "Lab MCP client" in seen["connections"] and seen["revoke_status"] == 302
    assert seen["after_revoke"][0] == 401
    assert "resource_metadata=" in seen["after_revoke"][1]
    actions = list(
        TokenEvent.objects.filter(client_id=CIMD_URL).order_by("pk").values_list("action", "by")
    )
    kinds = [a for a, _ in actions]
    assert kinds[0] == TokenEvent.Action.ISSUED and kinds[1] == TokenEvent.Action.TOKEN
    assert TokenEvent.Action.REFRESHED in kinds
    assert (TokenEvent.Action.REVOKED, "editor") in actions
    # Revoking the grant deleted its OAuth tokens.
    assert not get_access_token_model().objects.filter(user=editor).exists()


def _mint(user: Any, application: Any, resource: list[str], scope: str = "mcp") -> str:
    secret = secrets.token_urlsafe(30)
    get_access_token_model().objects.create(
        user=user,
        application=application,
        token=secret,
        expires=timezone.now() + timedelta(hours=1),
        scope=scope,
        resource=resource,
    )
    return secret


def test_a_token_for_another_resource_or_without_one_is_refused(http_server, users, oauth_lab):
    editor = users["editor"]
    application = get_application_model().objects.create(
        name="registered client",
        client_id="registered-client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris=REDIRECT,
    )
    AccessToken.objects.issue(
        editor, "OAuth: registered", by=editor, kind=TokenKind.OAUTH, client_id="registered-client"
    )
    bound = _mint(editor, application, [MCP_URL])
    other = _mint(editor, application, ["https://other.example/api"])
    both = _mint(editor, application, [MCP_URL, "https://other.example/api"])
    unbound = _mint(editor, application, [])
    no_scope = _mint(editor, application, [MCP_URL], scope="read")
    server = http_server()
    client = Client(server, "editor")

    async def status(secret: str) -> int:
        async with client.raw(secret) as raw:
            return (await raw.post(MCP_URL, json=_INITIALIZE, headers=_ACCEPT)).status_code

    async def scenario() -> dict[str, int]:
        return {
            name: await status(secret)
            for name, secret in [
                ("bound", bound),
                ("other", other),
                ("both", both),
                ("unbound", unbound),
                ("no_scope", no_scope),
            ]
        }

    assert anyio.run(scenario) == {
        "bound": 200,
        "other": 401,
        "both": 401,
        "unbound": 401,
        "no_scope": 401,
    }


@pytest.mark.parametrize(
    ("address", "reason"),
    [("10.0.0.10", "address_class:private"), ("169.254.169.254", "address_class:metadata")],
)
def test_a_client_id_on_a_private_or_metadata_address_is_refused_with_the_guards_reason(
    http_server, users, oauth_lab, address, reason
):
    oauth_lab.dns.set("inside.lab.example", a=[address])
    client_id = "https://inside.lab.example/client-metadata.json"
    server = http_server()
    client = Client(server, "editor")

    async def scenario() -> httpx2.Response:
        try:
            return await client.browser.sign_in_and_open(_authorize_url(client_id), "editor")
        finally:
            await client.browser.aclose()

    page = anyio.run(scenario)
    denied = EgressEvent.objects.get(tool=TOOL, url_host="inside.lab.example")
    assert denied.decision == "denied"
    assert denied.reason.startswith("address_class:")
    assert denied.reason == reason
    refused = TokenEvent.objects.get(action=TokenEvent.Action.CLIENT_REFUSED, client_id=client_id)
    assert refused.reason == denied.reason
    assert page.status_code == 400 and denied.reason in page.text
    assert not get_application_model().objects.filter(client_id=client_id).exists()
    assert not AccessToken.objects.filter(kind=TokenKind.OAUTH).exists()


def test_an_authorization_for_another_resource_is_refused(http_server, users, oauth_lab):
    server = http_server()
    client = Client(server, "editor")

    async def scenario() -> httpx2.Response:
        try:
            url = _authorize_url(CIMD_URL, resource="https://other.example/api")
            return await client.browser.sign_in_and_open(url, "editor")
        finally:
            await client.browser.aclose()

    page = anyio.run(scenario)
    assert page.status_code == 400 and "invalid_target" in page.text
    assert not AccessToken.objects.filter(kind=TokenKind.OAUTH).exists()
