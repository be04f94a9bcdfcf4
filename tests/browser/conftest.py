"""Browser tests: Playwright (Python) drives Debian's Chromium against the example project.

The example project runs as ``run.sh`` serves it (uvicorn, ASGI, with the background
runner) on loopback inside the test's network namespace (a child of the test process),
with a fresh SQLite database, the demo's pages and users, and the guard pointed at the
lab's DNS server and CA.  Chromium talks to it on loopback; the server reaches only the
lab's public-looking servers.  Nothing here downloads a browser: without
``/usr/bin/chromium`` (``apt-get install chromium``) the tests are skipped, and in CI
(``CI=true``) they fail instead.

Screenshots of every step go to ``tests/artifacts/browser/<test>/`` (git-ignored).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.asgi import free_port, uvicorn_command
from tests.exampledb import start_migrated

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _unavailable(why: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests must run in CI: {why}")
    pytest.skip(why)


@dataclass
class ExampleSite:
    url: str
    db: Path
    log: Path
    env: dict[str, str]

    def manage(self, *args: str) -> str:
        out = subprocess.run(
            [sys.executable, str(ROOT / "example_project" / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            # A far safety net against a hang, not a bound on the work: at a load of ~15 on
            # 2 cores a first ``migrate`` of django CMS took over 120 s.
            timeout=900,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.db, timeout=20)) as connection:
            return connection.execute(sql, params).fetchall()

    def egress_events(self) -> int:
        return self.query("SELECT COUNT(*) FROM django_webfetch_egressevent")[0][0]

    def server_log(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def site_env(lab_session: Any, directory: Path, *pythonpath: Path) -> dict[str, str]:
    """The environment of a site served as ``run.sh`` serves the example (the lab's DNS
    server and CA, a fresh SQLite database in ``directory``)."""
    from tests.lab import netns

    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
        and not k.startswith(("DJANGO_", "CELERY_", "DATABASE_URL"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="example_project.settings",
        PYTHONPATH=os.pathsep.join([str(ROOT), *map(str, pythonpath)]),
        WEBFETCH_EXAMPLE_DB=str(directory / "db.sqlite3"),
        WEBFETCH_DNS_NAMESERVERS=netns.DNS_V4,
        WEBFETCH_CA_FILE=lab_session.tls.ca_file,
        PYTHONWARNINGS="ignore",
        PYTHONUNBUFFERED="1",
    )
    return env


def set_up_demo(site: ExampleSite, domain: str, template_settings: str = "") -> None:
    """Migrated, demo pages and users created, the ``content`` and ``web`` tool groups
    enabled (an operator's choice, made here with the ORM as the admin would).  The three
    commands run in one ``manage.py shell`` (one start-up of Django instead of three).

    The database starts as a copy (SQLite's backup API) of the run's migrated one
    (:func:`tests.exampledb.migrated_template`) for ``template_settings`` (default: the
    site's own settings module); ``migrate`` then finds every migration applied."""
    template_env = site.env
    if template_settings:
        template_env = {**site.env, "DJANGO_SETTINGS_MODULE": template_settings}
    start_migrated(template_env, site.db)
    site.manage(
        "shell",
        "-c",
        "from django.core.management import call_command; "
        "call_command('migrate', interactive=False, verbosity=0); "
        f"call_command('demo_setup', domain={domain!r}); "
        "from django_webfetch.models import ToolGroup; "
        "ToolGroup.objects.filter(slug__in=['content', 'web']).update(enabled=True)",
    )


@contextlib.contextmanager
def uvicorn_serving(
    site: ExampleSite, application: str, port: int, lifespan: str = "off"
) -> Iterator[None]:
    """``application`` served by uvicorn as run.sh serves it, in a child process."""
    with open(site.log, "ab") as log:
        server = subprocess.Popen(
            uvicorn_command(sys.executable, application, port, lifespan=lifespan),
            cwd=ROOT,
            env=site.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)


@pytest.fixture(scope="module")
def example_site(
    lab_session: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ExampleSite]:
    """The example project served on loopback (see :func:`set_up_demo`)."""
    directory = tmp_path_factory.mktemp("example-site")
    port = free_port()
    env = site_env(lab_session, directory)
    site = ExampleSite(
        f"http://127.0.0.1:{port}", directory / "db.sqlite3", directory / "server.log", env
    )
    set_up_demo(site, f"127.0.0.1:{port}")
    # As run.sh serves it: uvicorn, ASGI (the stream, the background runner).
    with uvicorn_serving(site, "example_project.asgi:application", port, lifespan="on"):
        yield site


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One Chromium for the browser tests a worker runs one after the other, across their
    modules (issue 28: a launch and its reaping cost about a CPU second each time); every
    test still opens contexts of its own (``login``, ``browser.new_context()``): fresh
    cookies, storage and pages, closed at its end.  Not for the whole session: an idle
    Chromium still looks up Google's names now and then, and other directories' tests
    read their lab's DNS queries."""
    if not os.path.exists(CHROMIUM):
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (the test dependency group)")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Callable[[Any, str], Path]:
    """``shots(page, "step")`` saves a screenshot of the whole page under tests/artifacts/."""
    folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    counter = iter(range(1, 100))

    def shoot(page: Any, step: str) -> Path:
        path = folder / f"{next(counter):02d}-{step}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return shoot


@pytest.fixture
def login(browser: Any, example_site: ExampleSite) -> Iterator[Callable[..., Any]]:
    """``login("editor")``: a new browser context logged in through the admin's form."""
    contexts: list[Any] = []

    def open_as(username: str, *, width: int = 1280, height: int = 900) -> Any:
        context = browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(30_000)
        contexts.append(context)
        page = context.new_page()
        log_in(page, example_site, username)
        return page

    yield open_as
    for context in contexts:
        context.close()


def log_in(page: Any, site: ExampleSite, username: str) -> None:
    """Log ``page`` in as ``username`` through the admin's form (password = user name)."""
    _wait_until_served(page, site)
    page.goto(f"{site.url}/admin/login/?next=/")
    page.fill("#id_username", username)
    page.fill("#id_password", username)
    page.click("input[type=submit]")
    page.wait_for_load_state()
    assert "/admin/login/" not in page.url, f"login as {username} failed"


def _wait_until_served(page: Any, site: ExampleSite, timeout: float = 60) -> None:
    # Chromium polls the server (the test process itself never connects to loopback).
    deadline = time.monotonic() + timeout
    while True:
        try:
            response = page.goto(f"{site.url}/", timeout=5_000)
            if response is not None and response.status < 500:
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("the example site did not come up:\n" + site.server_log()[-3000:])
        time.sleep(0.3)
