"""newuser15 item 4: the host's notice ``plugin_cpu_limit_unavailable`` (a root host without
``CAP_SYS_RESOURCE``: plugin processes run without a per-call CPU limit in the kernel) is
said where it matters: at a plugin tool's call and in ``webfetch plugin list``, not by every
management command whose system checks load the registry (``plugins/notices.py``)."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from django_webfetch.models import ToolGroup
from django_webfetch.plugins import notices, registry, services
from django_webfetch.plugins.runtime import host
from django_webfetch.tools import ToolContext, default_registry, run_tool
from tests.exampledb import start_migrated

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "example_project" / "plugins")


def _said(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if host.CPU_LIMIT_UNAVAILABLE in r.getMessage()]


@pytest.fixture
def demo(settings):
    settings.WEBFETCH_PLUGIN_DIRS = [DEMO]
    registry.reset()
    default_registry.reset()
    yield
    settings.WEBFETCH_PLUGIN_DIRS = []
    registry.reset()
    default_registry.reset()


@pytest.mark.django_db
@pytest.mark.skipif(not host.capabilities().get("isolated"), reason="no plugin sandbox here")
def test_the_checks_hold_the_notice_and_the_first_call_says_it(
    demo, user_factory, caplog, monkeypatch
):
    """``manage.py check`` reads the demo plugin's manifest in a plugin process (the kernel
    refuses that process's CPU limit as it refuses a call's) and says nothing of it; the
    first call of the plugin's tool says it, once."""
    services.install("demo")
    ToolGroup.objects.filter(slug="demo").update(enabled=True)
    monkeypatch.setattr(host, "_cpu_limit_refused", False)  # said once per process
    registry.reset()
    caplog.set_level(logging.WARNING, logger="django_webfetch.plugins")

    call_command("check")
    assert registry.get_manifest("demo") is not None  # read in its plugin process
    assert _said(caplog) == []

    for n in range(2):
        result = run_tool(
            "demo_page_title",
            {"url": "http://10.0.0.1/"},
            user=user_factory(staff=True),
            context=ToolContext(approved=True, call_id=f"notice-{n}"),
        )
        assert not result.ok  # refused by the guard, from inside the plugin process
    expected = 0 if notices.cpu_limit_available() else 1
    assert len(_said(caplog)) == expected, _said(caplog)


@pytest.mark.long
def test_management_commands_print_no_notice_and_plugin_list_says_it(tmp_path):
    """Through ``run.sh manage`` as the README runs it, with the demo plugin installed and
    ``WEBFETCH_PLUGIN_DIRS`` set: ``check`` and ``webfetch mcp --help`` print no notice on
    stderr; ``webfetch plugin list`` says the CPU limit's absence on a line of its own
    (where the kernel refuses it), and nothing on stderr."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "DATABASE_URL", "WEBFETCH_"))
    }
    env.update(
        WEBFETCH_EXAMPLE_DB=str(tmp_path / "db.sqlite3"),
        WEBFETCH_PLUGIN_DIRS=DEMO,
        PYTHONWARNINGS="ignore",
    )
    start_migrated(env, tmp_path / "db.sqlite3")

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["sh", "example_project/run.sh", "manage", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    installed = manage("webfetch", "plugin", "install", "demo")
    checked = manage("check")
    helped = manage("webfetch", "mcp", "--help")
    listed = manage("webfetch", "plugin", "list")
    for done in (installed, checked, helped, listed):
        assert host.CPU_LIMIT_UNAVAILABLE not in done.stderr, done.args
    assert "demo (demo 1.0" in listed.stdout  # its manifest was read: a plugin process ran
    said = [line for line in listed.stdout.splitlines() if host.CPU_LIMIT_UNAVAILABLE in line]
    if notices.cpu_limit_available():
        assert said == []
    else:
        assert said == [f"this host: {notices.WITHOUT_CPU_LIMIT}"]
