"""The example site's demonstration plugin (``example_project/plugins``, README.md): a
harmless template a newcomer tries instead of the suite's attack fixture.  Loaded from
``WEBFETCH_PLUGIN_DIRS`` as the README says, its one tool runs in the sandbox and reaches
only what its instance was granted, through the host-owned client."""

from __future__ import annotations

import os

import pytest

from django_webfetch.models import EgressEvent, ToolGroup
from django_webfetch.plugins import registry, services
from django_webfetch.plugins.runtime.host import capabilities
from django_webfetch.tools import ToolContext, default_registry, run_tool

pytestmark = pytest.mark.django_db

DEMO = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "example_project",
    "plugins",
)


@pytest.fixture
def demo(settings):
    settings.WEBFETCH_PLUGIN_DIRS = [DEMO]
    registry.reset()
    default_registry.reset()
    yield
    settings.WEBFETCH_PLUGIN_DIRS = []
    registry.reset()
    default_registry.reset()


def test_the_demo_plugin_loads_from_the_plugin_directory_alone(demo):
    """Its RECORD matches its files (a change to the package without a new RECORD refuses
    it), nothing of it is on the site's ``sys.path`` or imported here, and it declares one
    tool and two hosts."""
    import sys

    manifest = registry.get_manifest("demo")
    assert manifest is not None, registry.problems()
    assert not [p for p in registry.problems() if "demo" in p]
    assert [tool.name for tool in manifest.tools] == ["demo_page_title"]
    assert list(manifest.egress) == ["example.org", "www.example.org"]
    assert "webfetch_demo" not in sys.modules
    assert not any(os.path.realpath(p or ".") == os.path.realpath(DEMO) for p in sys.path)


@pytest.mark.skipif(not capabilities().get("isolated"), reason="no plugin sandbox here")
def test_the_demo_tool_runs_in_the_sandbox_and_reaches_only_its_grant(demo, user_factory):
    """Installed and its group enabled (what the README walks through), the tool runs in a
    plugin process; a URL outside the instance's grant is refused by the guard before any
    connection, and the refusal is recorded."""
    services.install("demo")
    ToolGroup.objects.filter(slug="demo").update(enabled=True)
    user = user_factory(staff=True)
    result = run_tool(
        "demo_page_title",
        {"url": "http://10.0.0.1/secret"},
        user=user,
        context=ToolContext(approved=True, call_id="demo"),
    )
    assert not result.ok
    assert result.error in {"egress_denied", "plugin_error"}, result
    event = EgressEvent.objects.filter(url_host="10.0.0.1").get()
    assert (event.decision, event.tool) == ("denied", "demo_page_title"), event
    assert event.reason in {"not_allowlisted", "address_class:private"}, event.reason
