"""Fixtures of the MCP tests: real MCP servers in other processes, driven by the official
MCP client SDK.

- Streamable HTTP: ``uvicorn django_webfetch.mcp.asgi:application`` (Django's ASGI app with
  the MCP endpoint) on a Unix socket: the test process lives in the lab's network namespace,
  whose audit counts any TCP connect to loopback as a leak; AF_UNIX is not network traffic.
- stdio: ``python -m django webfetch mcp`` (``manage.py webfetch mcp``), spawned by the SDK's
  ``stdio_client``.

Both processes use ``tests/mcp/server_settings.py`` on the test database file (the run
tests' conftest makes it a file), with the lab's DNS server and CA: they are forked from the
test process, so they share its namespace and reach the lab through the same guard.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.cms.conftest import PAGES, cms_page_factory, content_group  # noqa: F401
from tests.runs.conftest import approver, approver_factory, run_tools  # noqa: F401 - fixtures
from tests.runs.infra import ROOT, process_env, start_logged, stop_process, wait_for

SETTINGS = "tests.mcp.server_settings"
#: The Host of the HTTP requests (in the test settings' ALLOWED_HOSTS).
HTTP_URL = "http://testserver/mcp"


def server_env(settings: Any, **extra: str) -> dict[str, str]:
    """The environment of an MCP server process (the run tests' one, with our settings)."""
    return {**process_env(SETTINGS, settings=settings), **extra}


@pytest.fixture
def web(lab_settings: Any, group_factory: Callable[..., Any], settings: Any) -> Any:
    """Group ``web`` enabled (every call waits for an approval), a lab host, the API."""
    settings.ROOT_URLCONF = "tests.runs.urls"
    group_factory("web", enabled=True)
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[2]])
    lab_settings.dns.set("intranet.lab.example", a=["10.0.0.10"])
    return lab_settings


@pytest.fixture
def token_for() -> Callable[[Any], str]:
    from django_webfetch.models import AccessToken

    def issue(user: Any, name: str = "test client") -> str:
        return AccessToken.objects.issue(user, name, by=user)[1]

    return issue


class HttpServer:
    def __init__(self, process: subprocess.Popen[bytes], socket_path: Path, log: Path) -> None:
        self.process = process
        self.socket_path = socket_path
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def http_client(self, secret: str | None) -> httpx2.AsyncClient:
        headers = {"Authorization": f"Bearer {secret}"} if secret is not None else {}
        return httpx2.AsyncClient(
            transport=httpx2.AsyncHTTPTransport(uds=str(self.socket_path)),
            headers=headers,
            timeout=httpx2.Timeout(30, read=120),
        )


def start_http_server(settings: Any, directory: Path, number: int, **extra_env: str) -> HttpServer:
    """Start ``uvicorn django_webfetch.mcp.asgi:application`` on a Unix socket in
    ``directory`` (``number`` tells the servers of one directory apart)."""
    socket_path = directory / f"mcp{number}.sock"
    log = directory / f"uvicorn{number}.log"
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "django_webfetch.mcp.asgi:application",
        "--uds",
        str(socket_path),
        "--lifespan",
        "on",
        "--log-level",
        "warning",
    ]
    process = start_logged(command, log, server_env(settings, **extra_env))
    server = HttpServer(process, socket_path, log)
    wait_for(lambda: socket_path.exists() or process.poll() is not None, 60, what="uvicorn")
    if process.poll() is not None:
        pytest.fail(f"uvicorn exited:\n{server.output()[-4000:]}")
    return server


@pytest.fixture
def http_server(settings: Any, tmp_path: Path) -> Iterator[Callable[..., HttpServer]]:
    """Start ``uvicorn django_webfetch.mcp.asgi:application`` on a Unix socket (a new
    process on every call, stopped after the test)."""
    started: list[HttpServer] = []

    def start(**extra_env: str) -> HttpServer:
        server = start_http_server(settings, tmp_path, len(started), **extra_env)
        started.append(server)
        return server

    yield start
    for server in started:
        stop_process(server.process)


@pytest.fixture(scope="module")
def _module_http_servers() -> Iterator[dict[str, HttpServer]]:
    holder: dict[str, HttpServer] = {}
    yield holder
    if "server" in holder:
        stop_process(holder["server"].process)


@pytest.fixture
def module_http_server(
    _module_http_servers: dict[str, HttpServer],
    lab_settings: Any,
    settings: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[..., HttpServer]:
    """One uvicorn for a module's HTTP tests (started by the first of them, stopped after
    the last; issue 28): each of them started one or two (~2.5 CPU-s each) for what a
    running server answers the same.  A module uses it as its ``http_server`` only when the
    process holds nothing of a test between tests: its settings are the same for all of
    them (the lab's DNS server and CA, the test database file), tokens, sessions and calls
    are read from the database on every request, and no test of the module restarts, stops
    or reconfigures it (a test that needs a server with its own environment starts one with
    ``start_http_server``)."""

    def start(**extra_env: str) -> HttpServer:
        assert not extra_env, "a server with its own environment is not shared"
        server = _module_http_servers.get("server")
        if server is None or server.process.poll() is not None:
            directory = tmp_path_factory.mktemp("mcp-http")
            server = _module_http_servers["server"] = start_http_server(settings, directory, 0)
        return server

    return start


def stdio_parameters(settings: Any, secret: str, **extra_env: str) -> StdioServerParameters:
    """``python -m django webfetch mcp`` (= ``manage.py webfetch mcp``) with the token."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "django", "webfetch", "mcp"],
        env=server_env(settings, WEBFETCH_MCP_TOKEN=secret, **extra_env),
        cwd=str(ROOT),
    )


@pytest.fixture
def connect(
    http_server: Callable[..., HttpServer], settings: Any, tmp_path: Path
) -> Callable[..., Any]:
    """``connect(transport, secret, **env)``: an initialized ``ClientSession`` (async)."""

    @contextlib.asynccontextmanager
    async def open_session(
        transport: str, secret: str, *, server: HttpServer | None = None, **extra_env: str
    ) -> AsyncIterator[ClientSession]:
        if transport == "http":
            server = server or http_server(**extra_env)
            async with (
                server.http_client(secret) as http,
                streamable_http_client(HTTP_URL, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session
        else:
            errlog = open(tmp_path / "stdio-server.log", "a")  # noqa: SIM115 - closed below
            try:
                async with (
                    stdio_client(
                        stdio_parameters(settings, secret, **extra_env), errlog=errlog
                    ) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    yield session
            finally:
                errlog.close()

    return open_session


@pytest.fixture
def pages(cms_page_factory: Callable[..., Any]) -> dict[str, Any]:  # noqa: F811
    """Published pages (tests/cms' texts): one for everyone, one login-only, one for a
    group (django CMS's tree operations need a transaction; these tests commit)."""
    from cms.models import PagePermission
    from django.contrib.auth.models import Group
    from django.db import transaction

    with transaction.atomic():
        made = {
            "about": cms_page_factory("About us", "about", PAGES["about"]),
            "members": cms_page_factory(
                "Members", "members", PAGES["members"], login_required=True
            ),
            "staff": cms_page_factory("Staff", "staff", PAGES["staff"]),
        }
        staff_group, _ = Group.objects.get_or_create(name="Bakery staff")
        PagePermission.objects.create(page=made["staff"], group=staff_group, can_view=True)
    return made


@pytest.fixture
def users(user_factory: Callable[..., Any], approver: Any) -> dict[str, Any]:  # noqa: F811
    return {
        "editor": user_factory(staff=True, username="editor"),
        "admin": user_factory(superuser=True, username="admin"),
        "approver": approver,
    }


# -- the OAuth endpoints in process (tests/mcp/test_oauth_server.py,
# test_oauth_clients_redirects_and_framing.py) --

#: The loopback redirect URI of the registered client.
OAUTH_REDIRECT = "http://127.0.0.1:33418/callback"


@pytest.fixture
def site(settings: Any) -> Any:
    """A test client of the OAuth endpoints and the login page."""
    from django.test import Client

    settings.ROOT_URLCONF = "tests.mcp.oauth_urls"
    settings.LOGIN_URL = "/accounts/login/"
    return Client(HTTP_HOST="testserver")


@pytest.fixture
def application(db: Any) -> Any:
    """A public client registered by hand, with the loopback redirect URI."""
    from oauth2_provider.models import get_application_model

    return get_application_model().objects.create(
        name="registered client",
        client_id="registered-client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris=OAUTH_REDIRECT,
    )
