"""Model factory fixtures for the Django tests (a pytest plugin listed in conftest.py)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

_counter = itertools.count(1)


@pytest.fixture
def user_factory(db: Any) -> Callable[..., Any]:
    from django.contrib.auth import get_user_model

    def make(
        *,
        superuser: bool = False,
        staff: bool = False,
        active: bool = True,
        username: str | None = None,
    ) -> Any:
        User = get_user_model()
        name = username or f"user{next(_counter)}"
        user = User.objects.create_user(
            username=name,
            password="x",
            is_active=active,
            is_staff=staff or superuser,
            is_superuser=superuser,
        )
        return user

    return make


@pytest.fixture
def editor(user_factory: Callable[..., Any]) -> Any:
    return user_factory(staff=True, username="editor")


@pytest.fixture
def superuser(user_factory: Callable[..., Any]) -> Any:
    return user_factory(superuser=True, username="root")


@pytest.fixture
def group_factory(db: Any) -> Callable[..., Any]:
    """Get (built-in) or create a ToolGroup and set fields on it."""
    from django_webfetch.models import ToolGroup

    def make(slug: str = "web", **fields: Any) -> Any:
        group, _ = ToolGroup.objects.get_or_create(slug=slug, defaults={"scope": "none"})
        for name, value in fields.items():
            setattr(group, name, value)
        group.save()
        return group

    return make


@pytest.fixture
def host_entry_factory(db: Any) -> Callable[..., Any]:
    from django_webfetch.models import HostListEntry, ToolGroup

    def make(group: Any = "web", value: str = "docs.example.org", list: str = "allow") -> Any:
        if isinstance(group, str):
            group = ToolGroup.objects.get(slug=group)
        return HostListEntry.objects.create(group=group, list=list, value=value)

    return make


@pytest.fixture
def endpoint_factory(db: Any) -> Callable[..., Any]:
    from django_webfetch.models import ConfiguredEndpoint, ToolGroup

    def make(
        base_url: str = "https://search.example.net/api/search", group: Any = "rag", **fields: Any
    ) -> Any:
        if isinstance(group, str):
            group = ToolGroup.objects.get(slug=group)
        fields.setdefault("name", f"endpoint {next(_counter)}")
        return ConfiguredEndpoint.objects.create(group=group, base_url=base_url, **fields)

    return make


@pytest.fixture
def site_host_factory(db: Any) -> Callable[..., Any]:
    from django_webfetch.models import SiteHost

    def make(host: str = "www.site.example", **fields: Any) -> Any:
        return SiteHost.objects.create(host=host, **fields)

    return make


@pytest.fixture
def tool_registry() -> Iterator[Any]:
    """The global registry, reloaded after the test (tests may register tools)."""
    from django_webfetch.tools import default_registry as registry

    registry.reset()
    yield registry
    registry.reset()


@pytest.fixture
def lab_settings(lab: Any, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Point the app at the lab's DNS server and CA; the runner's proxy variables are
    removed so they cannot decide a lab test (the guard itself is untouched)."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    settings.WEBFETCH_DNS_NAMESERVERS = lab.nameservers
    settings.WEBFETCH_CA_FILE = lab.ca_file
    return lab


@pytest.fixture(autouse=True)
def _fresh_throttle_history() -> Iterator[None]:
    """API rate limits count in Django's cache, keyed by user id: ids repeat from test to
    test (rolled back), so each test starts with an empty history."""
    from django.conf import settings

    if not settings.configured:
        yield
        return
    from django.core.cache import cache

    cache.clear()
    yield


# -- the background runner: the shipped default, one per test -----------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "inline_runner(reason): this test runs calls and runs in the request "
        '(WEBFETCH_RUNNER = "inline"); the suite runs the shipped background runner otherwise',
    )


@pytest.fixture(autouse=True)
def _runner_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked ``inline_runner`` runs its calls in the request, on purpose."""
    marker = request.node.get_closest_marker("inline_runner")
    if marker is None:
        yield
        return
    from django.test import override_settings

    with override_settings(WEBFETCH_RUNNER="inline"):
        yield


#: What a setting held before a test when it had no value.
_UNSET = object()


@pytest.fixture(autouse=True)
def _settings_come_back() -> Iterator[None]:
    """Each test leaves Django's settings as it found them: an override left active (an
    ``override_settings`` never exited, a setting assigned on ``django.conf.settings``)
    decided later tests on the same worker, in whatever order they ran (a leaked
    ``ROOT_URLCONF`` failed a test of another directory, issue 28).  Runs after the test's
    own fixtures have restored what they changed (``settings``, ``override_settings``)."""
    from django.conf import settings

    if not settings.configured:
        yield
        return
    before = settings._wrapped
    held = dict(vars(before))
    yield
    after = settings._wrapped
    if after is not before:
        pytest.fail("the test left a settings override active (override_settings not exited)")
    now = vars(after)
    changed = sorted(
        name
        for name in set(held) | set(now)
        if held.get(name, _UNSET) is not now.get(name, _UNSET)
        and held.get(name, _UNSET) != now.get(name, _UNSET)
    )
    if changed:
        pytest.fail(f"the test changed settings it did not restore: {', '.join(changed)}")


@pytest.fixture(scope="session", autouse=True)
def _cheap_database_restore() -> None:
    """Between transactional tests the migrated database comes back by SQLite's backup API,
    not by a flush and a deserialization (tests/dbrestore.py); and the test database is
    migrated once per run, not once per xdist worker (tests/dbshare.py)."""
    from tests import dbrestore, dbshare

    dbrestore.install()
    dbshare.install()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Before the test's fixtures (its database among them) are torn down, the background
    runner it started finishes what it is doing and stops: the next test starts its own,
    as a restarted process would, and no thread of one test writes into the next."""
    import sys

    module = sys.modules.get("django_webfetch.runs.runner")
    if module is None:
        return
    runner = module.runner
    if runner.running:
        runner.wait_idle(5)
        runner.stop(timeout=5)
    # The test's leases end with it: the process's heartbeat (``durable.keeper``) rests
    # instead of renewing them in the next test, which may have no database at all (its
    # failures were logged with a traceback, whose formatting raced with another thread's
    # ``ast.parse``: CPython 3.11's "AST constructor recursion depth mismatch").
    durable = sys.modules.get("django_webfetch.runs.durable")
    if durable is not None:
        durable.keeper.forget()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every database test commits for real (``transaction=True``), as a site does: the
    background runner starts work after the commit (``transaction.on_commit``) and reads it
    from its own connection, neither of which a test wrapped in one rolled-back transaction
    would ever see.  A test marked ``inline_runner`` keeps the cheaper rolled-back
    transaction when it asked for one."""
    for item in items:
        if item.get_closest_marker("inline_runner") is not None:
            continue
        marker = item.get_closest_marker("django_db")
        fixtures = getattr(item, "fixturenames", ())
        if marker is None and "db" not in fixtures:
            continue
        if marker is not None and marker.kwargs.get("transaction"):
            continue
        kwargs = dict(marker.kwargs) if marker is not None else {}
        # serialized_rollback: the rows the migrations made (built-in groups, content
        # types) come back after each test's flush, as in the suite's other transactional
        # tests (mixing the two kinds breaks the restore).
        kwargs["transaction"] = True
        kwargs["serialized_rollback"] = True
        args = marker.args if marker is not None else ()
        item.add_marker(pytest.mark.django_db(*args, **kwargs), append=False)
