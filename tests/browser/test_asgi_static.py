"""Issue 31 item 3: a new project served with ``uvicorn yourproject.asgi:application``.

A fresh project ``yourproject`` (the example's settings, so the django CMS site and its
assistant page) gets two ASGI modules: ``asgi.py`` copied from docs/installation.rst
("Serving under ASGI and static files"), and ``startproject.py``, the ``asgi.py`` that
Django's ``startproject`` writes.  Each is served by uvicorn as the docs say, and Chromium
opens the assistant page as the editor.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import pytest

from tests.asgi import free_port
from tests.browser.conftest import (
    ROOT,
    ExampleSite,
    log_in,
    set_up_demo,
    site_env,
    uvicorn_serving,
)

pytestmark = [pytest.mark.browser, pytest.mark.lab]

SCRIPT = "/static/django_webfetch/cms/assistant.js"
STYLESHEET = "/static/django_webfetch/cms/assistant.css"


def documented_asgi_py() -> str:
    """The ``yourproject/asgi.py`` code block of docs/installation.rst, as a user copies it."""
    text = (ROOT / "docs" / "installation.rst").read_text()
    section = text.split("Serving under ASGI and static files", 1)[1]
    block = re.search(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", section)
    assert block is not None
    code = textwrap.dedent(block.group(1))
    assert code.startswith("# yourproject/asgi.py\n")
    return code


def startproject_asgi_py() -> str:
    """What ``django-admin startproject yourproject`` writes as ``yourproject/asgi.py``."""
    template = Path(django.__file__).parent / "conf/project_template/project_name/asgi.py-tpl"
    return template.read_text().replace("{{ project_name }}", "yourproject")


class Sites:
    def __init__(self, documented: ExampleSite, startproject: ExampleSite) -> None:
        self.documented = documented
        self.startproject = startproject


@pytest.fixture(scope="module")
def sites(lab_session: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sites]:
    directory = tmp_path_factory.mktemp("yourproject")
    package = directory / "yourproject"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text("from example_project.settings import *  # noqa\n")
    (package / "asgi.py").write_text(documented_asgi_py())
    (package / "startproject.py").write_text(startproject_asgi_py())
    env = site_env(lab_session, directory, directory)
    env["DJANGO_SETTINGS_MODULE"] = "yourproject.settings"
    ports = free_port(), free_port()
    documented, startproject = (
        ExampleSite(
            f"http://127.0.0.1:{port}", directory / "db.sqlite3", directory / f"{port}.log", env
        )
        for port in ports
    )
    # The example's migrated database (yourproject.settings is the example's settings,
    # star-imported: the same apps and migrations); ``migrate`` under yourproject.settings
    # then finds every migration applied.  A template of its own would migrate django CMS
    # and every app once more per run (about 7 CPU seconds).
    set_up_demo(documented, f"127.0.0.1:{ports[0]}", template_settings="example_project.settings")
    with (
        uvicorn_serving(documented, "yourproject.asgi:application", ports[0]),
        uvicorn_serving(startproject, "yourproject.startproject:application", ports[1]),
    ):
        yield Sites(documented, startproject)


def _open_assistant(browser: Any, site: ExampleSite) -> tuple[Any, Any, dict[str, int]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(30_000)
    page = context.new_page()
    log_in(page, site, "editor")
    statuses: dict[str, int] = {}
    page.on("response", lambda r: statuses.__setitem__(r.url.removeprefix(site.url), r.status))
    response = page.goto(f"{site.url}/assistant/")
    assert response is not None and response.status == 200
    page.wait_for_load_state("load")
    return context, page, statuses


def test_the_documented_asgi_py_serves_the_assistant_page_and_its_script(browser, sites, shots):
    context, page, statuses = _open_assistant(browser, sites.documented)
    try:
        assert statuses.get(SCRIPT) == 200, statuses
        assert statuses.get(STYLESHEET) == 200, statuses
        # The script ran: the page's "cannot work" notice is gone, the conversation list is
        # filled (empty list text), and the stylesheet applies.
        page.wait_for_selector("#script-missing", state="hidden")
        page.wait_for_selector("#conversation-list li")
        margin = page.eval_on_selector(
            ".webfetch-banner, .webfetch-chat", "e => getComputedStyle(e).borderRadius"
        )
        assert margin in ("6px", "8px")
        shots(page, "documented-asgi")
    finally:
        context.close()


def test_without_static_files_the_page_says_why_and_send_is_no_405(browser, sites, shots):
    context, page, statuses = _open_assistant(browser, sites.startproject)
    try:
        # startproject's asgi.py: Django serves no /static/ under uvicorn (django CMS's
        # catch-all redirects to the path with a slash, which is no page either).
        assert statuses.get(SCRIPT) in (301, 404), statuses
        assert all(status != 200 for url, status in statuses.items() if "assistant.js" in url)
        notice = page.locator("#script-missing")
        assert notice.is_visible()
        assert "cannot work without its script" in notice.inner_text()
        assert "ASGIStaticFilesHandler" in notice.inner_text()
        shots(page, "no-static-files")

        page.fill("#chat-input", "What does our page /about/ say?")
        with page.expect_navigation() as navigation:
            page.click("#chat-send")
        answer = navigation.value
        assert answer is not None and answer.status == 200  # never 405 Method Not Allowed
        assert answer.request.method == "POST"
        assert page.url == f"{sites.startproject.url}/assistant/"
        assert "Your message was not sent." in page.locator("#posted-without-script").inner_text()
        assert page.input_value("#chat-input") == "What does our page /about/ say?"
        shots(page, "sent-without-script")
        # Nothing was sent: no conversation was started.
        started = sites.startproject.query("SELECT COUNT(*) FROM django_webfetch_conversation")
        assert started == [(0,)]
    finally:
        context.close()


def test_with_javascript_off_send_answers_with_the_page(browser, sites):
    context = browser.new_context(java_script_enabled=False)
    context.set_default_timeout(30_000)
    try:
        page = context.new_page()
        log_in(page, sites.documented, "editor")
        page.goto(f"{sites.documented.url}/assistant/")
        assert page.locator("#script-missing").is_visible()
        page.fill("#chat-input", "hello")
        with page.expect_navigation() as navigation:
            page.click("#chat-send")
        assert navigation.value.status == 200
        assert page.locator("#posted-without-script").is_visible()
    finally:
        context.close()
