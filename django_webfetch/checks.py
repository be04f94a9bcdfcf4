"""System checks.  Ids are stable and never reused; each is documented in docs/checks.rst.

This module only defines the checks; ``apps.py`` registers them (``CHECKS`` below lists each
with its tags).  Checks that read the database are registered with ``Tags.database`` as
Django asks: they run with ``manage.py check --database default`` and before ``migrate``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning
from django.db import DatabaseError

from .checking import from_database
from .conf import BOUND_SETTINGS, SETTING_NAMES, conf
from .exceptions import WebFetchConfigurationError
from .invocation import manage_command
from .net.errors import PolicyError
from .net.policy import HARD_LIMITS

if TYPE_CHECKING:
    from .plugins.registry import Problem

__all__ = ["CHECKS"]

_PROXY_ENV = ("http_proxy", "https_proxy", "all_proxy")


def _readable(name: str) -> bool:
    try:
        getattr(conf, name)
    except WebFetchConfigurationError:
        return False
    return True


def check_settings(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for name in SETTING_NAMES:
        try:
            getattr(conf, name)
        except WebFetchConfigurationError as exc:
            errors.append(
                Error(
                    f"{exc} Every network tool is refused (policy_unavailable) until it is fixed.",
                    hint=f"See the {name} entry in the settings documentation.",
                    id="django_webfetch.E001",
                )
            )
    return errors


def check_bounds(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    warnings: list[CheckMessage] = []
    for name, field in BOUND_SETTINGS.items():
        if not _readable(name):
            continue
        raw = conf.raw_bound(name)
        ceiling = HARD_LIMITS[field][1]
        if raw > ceiling:
            warnings.append(
                Warning(
                    f"{name}={raw!r} is above the hard ceiling {ceiling!r}; {ceiling!r} is used.",
                    hint="Settings may lower a bound, never raise it.",
                    id="django_webfetch.W001",
                )
            )
    return warnings


def check_nat64_prefixes(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    if not _readable("WEBFETCH_NAT64_PREFIXES"):
        return []
    from .net.ipclass import parse_nat64_prefixes

    try:
        parse_nat64_prefixes(conf.WEBFETCH_NAT64_PREFIXES)
    except PolicyError as exc:
        return [
            Error(
                f"WEBFETCH_NAT64_PREFIXES is invalid: {exc}. "
                "Every address check is refused until it is fixed.",
                hint="Use RFC 6052 prefix lengths (/32, /40, /48, /56, /64, /96) with no "
                "bits set outside the prefix.",
                id="django_webfetch.E002",
            )
        ]
    return []


def check_nameservers(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    if not _readable("WEBFETCH_DNS_NAMESERVERS"):
        return []
    import ipaddress

    servers = conf.WEBFETCH_DNS_NAMESERVERS
    if servers is None:
        return []
    bad = []
    for server in servers:
        try:
            ipaddress.ip_address(server)
        except ValueError:
            bad.append(server)
    if bad or not servers:
        return [
            Error(
                "WEBFETCH_DNS_NAMESERVERS must be a non-empty list of IP addresses"
                + (f"; not addresses: {', '.join(map(repr, bad[:5]))}." if bad else "."),
                hint="Use None for the system resolver configuration.",
                id="django_webfetch.E003",
            )
        ]
    return []


def check_ca_file(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    if not _readable("WEBFETCH_CA_FILE"):
        return []
    path = conf.WEBFETCH_CA_FILE
    if path is not None and not (os.path.isfile(path) and os.access(path, os.R_OK)):
        return [
            Error(
                f"WEBFETCH_CA_FILE {path!r} is not a readable file; every https fetch fails.",
                id="django_webfetch.E004",
            )
        ]
    return []


def _celery_installed() -> bool:
    return importlib.util.find_spec("celery") is not None


def check_celery_installed(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    if not _readable("WEBFETCH_ASYNC_RUNS") or not conf.WEBFETCH_ASYNC_RUNS:
        return []
    if not _celery_installed():
        return [
            Error(
                "WEBFETCH_ASYNC_RUNS is on but Celery is not installed.",
                hint='pip install "django-webfetch[celery]"',
                id="django_webfetch.E005",
            )
        ]
    return []


def check_self_approval(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    if (
        _readable("WEBFETCH_ALLOW_SELF_APPROVAL")
        and conf.WEBFETCH_ALLOW_SELF_APPROVAL
        and not settings.DEBUG
    ):
        return [
            Warning(
                "WEBFETCH_ALLOW_SELF_APPROVAL is on with DEBUG off: the user who asked the "
                "assistant can approve its network calls.",
                hint="Leave self-approval off in production.",
                id="django_webfetch.W005",
            )
        ]
    return []


def check_tools(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    from .tools.registry import default_registry as registry

    registry.load()
    return [
        Error(
            f"Tool {problem}",
            hint="Fix or uninstall the plugin; the tool is not offered.",
            id="django_webfetch.E008",
        )
        for problem in registry.problems
    ]


def check_diagnostics(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """The error-analysis settings (the code group): project root, log files, log format."""
    messages: list[CheckMessage] = []
    if _readable("WEBFETCH_PROJECT_ROOT"):
        root = conf.WEBFETCH_PROJECT_ROOT
        if root is not None and not os.path.isdir(root):
            messages.append(
                Error(
                    f"WEBFETCH_PROJECT_ROOT {root!r} is not a directory; the code tools "
                    "refuse every path.",
                    hint="Point it (or BASE_DIR) at the project's source directory.",
                    id="django_webfetch.E020",
                )
            )
        elif root is not None and os.path.dirname(os.path.realpath(root)) == os.path.realpath(root):
            messages.append(
                Error(
                    "WEBFETCH_PROJECT_ROOT is the file-system root; the code tools refuse it.",
                    hint="Point it at the project's source directory.",
                    id="django_webfetch.E022",
                )
            )
    if _readable("WEBFETCH_LOG_FORMAT"):
        from .diagnostics.logs import LogFormatError, compile_format

        try:
            compile_format(conf.WEBFETCH_LOG_FORMAT)
        except LogFormatError as exc:
            messages.append(
                Error(
                    f"WEBFETCH_LOG_FORMAT cannot be parsed: {exc}.",
                    hint="Use the %-style format of the logging formatter that writes "
                    "WEBFETCH_LOG_FILES; it must contain %(asctime)s and %(levelname)s.",
                    id="django_webfetch.E021",
                )
            )
    if _readable("WEBFETCH_LOG_FILES"):
        for path in conf.WEBFETCH_LOG_FILES:
            if not os.path.isfile(path):
                problem = "does not exist" if not os.path.exists(path) else "is not a file"
            elif not os.access(path, os.R_OK):
                problem = "is not readable"
            else:
                continue
            messages.append(
                Warning(
                    f"WEBFETCH_LOG_FILES: {path!r} {problem}; get_last_exception and "
                    "probe_url cannot read its errors.",
                    hint="Name the files your logging handlers write (LOGGING), readable by "
                    "the process that runs the tools.",
                    id="django_webfetch.W020",
                )
            )
    return messages


def _proxy_configured() -> bool:
    if _readable("WEBFETCH_PROXY") and conf.WEBFETCH_PROXY:
        return True
    return any(os.environ.get(k) or os.environ.get(k.upper()) for k in _PROXY_ENV)


def check_database(
    app_configs: Sequence[Any] | None = None,
    databases: Iterable[str] | None = None,
    **kwargs: Any,
) -> list[CheckMessage]:
    return from_database(_database_messages, databases)


def _database_messages() -> Iterable[CheckMessage]:
    from .models import ConfiguredEndpoint, EgressScope, HostListEntry, ListKind, SiteHost
    from .net.hosts import parse_list_entry

    for entry in HostListEntry.objects.select_related("group"):
        invalid = entry.list not in ListKind.values
        try:
            parse_list_entry(entry.value)
        except PolicyError:
            invalid = True
        if invalid:
            yield Error(
                f"Host list entry {entry.pk} of group {entry.group.slug!r} is invalid; the "
                "guard refuses every request of that group.",
                hint="Fix or delete the entry in the admin.",
                obj=entry,
                id="django_webfetch.E006",
            )

    for site_host in SiteHost.objects.all():
        try:
            for raw in site_host.list_entries():
                parse_list_entry(raw)
        except PolicyError:
            yield Error(
                f"Site host {site_host.pk} is invalid; the guard refuses every request of "
                "every group.",
                hint="Fix or delete it in the admin.",
                obj=site_host,
                id="django_webfetch.E007",
            )

    from django.apps import apps

    if apps.is_installed("django.contrib.sites"):
        from django.contrib.sites.models import Site

        from .egress import site_domain_entry

        for site in Site.objects.all():
            if site_domain_entry(site.domain) is None:
                yield Warning(
                    f"Site {site.pk} has a domain the guard cannot read as a host, so it is "
                    "not treated as a host of this installation.",
                    hint="Write the domain as host or host:port (no scheme, no path).",
                    obj=site,
                    id="django_webfetch.W006",
                )

    if not settings.DEBUG:
        for endpoint in ConfiguredEndpoint.objects.filter(allow_private=True):
            yield Warning(
                f"Configured endpoint {endpoint.pk} of group {endpoint.group.slug!r} may "
                "reach private addresses while DEBUG is off.",
                hint="Only point a group at an internal service you trust; metadata "
                "addresses stay refused.",
                obj=endpoint,
                id="django_webfetch.W002",
            )

    from .models import ToolGroup

    if _proxy_configured():
        for group in ToolGroup.objects.filter(enabled=True, allow_via_proxy=True):
            if not HostListEntry.objects.filter(group=group, list=ListKind.ALLOW).exists():
                yield Warning(
                    f"Group {group.slug!r} allows requests through a proxy and a proxy is "
                    "configured, but the group has no allowlist: every proxied request is "
                    "refused.",
                    hint="Add allowlist entries, or turn allow_via_proxy off.",
                    obj=group,
                    id="django_webfetch.W003",
                )

    for group in ToolGroup.objects.filter(enabled=True, scope=EgressScope.CONFIGURED_ENDPOINT):
        if not ConfiguredEndpoint.objects.filter(group=group, enabled=True).exists():
            yield Warning(
                f"Group {group.slug!r} is enabled with the configured_endpoint scope but has "
                "no enabled endpoint: every request is refused.",
                obj=group,
                id="django_webfetch.W004",
            )


# -- secrets in the admin, the sites framework, the API mount -------------------------------

_ADMIN_PATH_OPTIONS = ("list_filter", "search_fields", "ordering", "sortable_by", "date_hierarchy")


def _admin_paths(model_admin: Any) -> Iterable[tuple[str, str]]:
    """(option, lookup path) of every field path a ModelAdmin filters, searches or orders on."""
    for option in _ADMIN_PATH_OPTIONS:
        value = getattr(model_admin, option, None)
        if not value:
            continue
        items = [value] if isinstance(value, str) else list(value)
        for item in items:
            if isinstance(item, (tuple, list)) and item and isinstance(item[0], str):
                yield option, item[0]  # ("field", FilterClass)
            elif isinstance(item, str):
                yield option, item
            else:
                parameter = getattr(item, "parameter_name", None)
                if isinstance(parameter, str):
                    yield option, parameter
    for item in getattr(model_admin, "list_display", ()) or ():
        target = getattr(model_admin, item, None) if isinstance(item, str) else item
        order_field = getattr(target, "admin_order_field", None)
        if isinstance(order_field, str):
            yield "list_display", order_field
        elif isinstance(item, str):
            yield "list_display", item


def check_admin_secrets(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """E009: no ModelAdmin (ours or the project's) filters, searches, orders or lists a
    field marked secret, directly or through a relation."""
    from django.contrib.admin.sites import all_sites

    from .models.fields import touches_secret

    errors: list[CheckMessage] = []
    for site in all_sites:
        for model, model_admin in site._registry.items():
            for option, path in _admin_paths(model_admin):
                if touches_secret(model, path):
                    errors.append(
                        Error(
                            f"{type(model_admin).__name__}.{option} uses {path!r}, which "
                            "reaches a secret field: answered queries on it are an oracle "
                            "that recovers the secret.",
                            hint="Remove it; a secret is write-only (see docs/admin.rst).",
                            obj=type(model_admin),
                            id="django_webfetch.E009",
                        )
                    )
    return errors


def check_sites(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """W007: without django.contrib.sites, own-site detection has fewer sources.
    E010: django.contrib.sites without SITE_ID (the admin login fails with a 500)."""
    from django.apps import apps

    if not apps.is_installed("django.contrib.sites"):
        return [
            Warning(
                "django.contrib.sites is not installed: the hosts of this installation are "
                "taken from ALLOWED_HOSTS and SiteHost rows only, so own-site detection is "
                "weaker.",
                hint="Add 'django.contrib.sites' to INSTALLED_APPS and set SITE_ID.",
                id="django_webfetch.W007",
            )
        ]
    if getattr(settings, "SITE_ID", None) is None:
        return [
            Error(
                "django.contrib.sites is installed but SITE_ID is not set: the admin login "
                "and own-site detection fail.",
                hint="Set SITE_ID = 1 (see docs/installation.rst).",
                id="django_webfetch.E010",
            )
        ]
    return []


def check_api_mount(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """E011: the API URLs are mounted but rest_framework is not installed."""
    from django.apps import apps
    from django.urls import NoReverseMatch, reverse

    if apps.is_installed("rest_framework"):
        return []
    try:
        reverse("django_webfetch:api-root")
    except NoReverseMatch:
        return []
    except ImportError as exc:
        if "rest_framework" not in str(exc):
            return []
    except Exception:
        return []
    return [
        Error(
            "The django_webfetch API URLs are mounted but 'rest_framework' is not in "
            "INSTALLED_APPS.",
            hint="Add 'rest_framework' to INSTALLED_APPS (see docs/installation.rst).",
            id="django_webfetch.E011",
        )
    ]


def _visibility_timeout() -> float | None:
    """The Redis/SQS transport's visibility timeout the project's Celery app uses."""
    options: Any = None
    if importlib.util.find_spec("celery") is not None:
        from celery import current_app

        options = current_app.conf.broker_transport_options
    if not options:
        options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {}
    value = options.get("visibility_timeout") if isinstance(options, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def check_operations(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """Settings of a production run (docs/operations.rst)."""
    messages: list[CheckMessage] = []
    if _readable("WEBFETCH_ASYNC_RUNS") and conf.WEBFETCH_ASYNC_RUNS:
        from .runs import step_seconds

        timeout = _visibility_timeout()
        if timeout is not None and timeout <= step_seconds():
            messages.append(
                Warning(
                    f"The broker's visibility_timeout ({timeout:g} s) is not longer than a "
                    f"tool call may run ({step_seconds():g} s): the broker hands a running "
                    "call's message to another worker while the first still runs it.",
                    hint="Set broker_transport_options visibility_timeout to 300 or more.",
                    id="django_webfetch.W060",
                )
            )
    messages.extend(_check_sqlite_writers())
    messages.extend(_check_open_bounds())
    messages.extend(_check_lease())
    try:
        from django.urls import NoReverseMatch, reverse

        mount = reverse("django_webfetch:not-found")
    except (ImportError, NoReverseMatch):
        mount = None
    except Exception:  # the project's URLconf does not import; Django reports that
        mount = None
    if mount == "/":
        messages.append(
            Warning(
                "The django_webfetch API is mounted at the site root: its JSON 404 answers "
                "every path that no earlier URL pattern matched.",
                hint='Mount it under a prefix of its own: path("api/webfetch/", include(...)).',
                id="django_webfetch.W061",
            )
        )
    return messages


#: One principal may hold at most this share of what the process may hold open.
OPEN_SHARE = 4


def _check_lease() -> list[CheckMessage]:
    """W064: ``WEBFETCH_LEASE_SECONDS`` below the floor (``durable.MIN_LEASE_SECONDS``)."""
    if not _readable("WEBFETCH_LEASE_SECONDS"):
        return []
    from .runs.durable import MIN_LEASE_SECONDS

    lease = conf.WEBFETCH_LEASE_SECONDS
    if lease >= MIN_LEASE_SECONDS:
        return []
    return [
        Warning(
            f"WEBFETCH_LEASE_SECONDS ({lease:g} s) is below {MIN_LEASE_SECONDS:g} s: a "
            "database that stalls for a moment (a checkpoint, a failover) keeps a live "
            "process from renewing its leases, and another worker takes its running calls "
            "and runs over while it still works on them.",
            hint="Keep the default (15) or set it to 5 or more.",
            id="django_webfetch.W064",
        )
    ]


def _check_open_bounds() -> list[CheckMessage]:
    """W063: one principal may hold open more than a quarter of what the process may
    (``WEBFETCH_OPEN_PER_PRINCIPAL`` against ``WEBFETCH_OPEN_PER_PROCESS``)."""
    if not (_readable("WEBFETCH_OPEN_PER_PRINCIPAL") and _readable("WEBFETCH_OPEN_PER_PROCESS")):
        return []
    per_principal = conf.WEBFETCH_OPEN_PER_PRINCIPAL
    per_process = conf.WEBFETCH_OPEN_PER_PROCESS
    wide = [k for k in per_principal if per_principal[k] * OPEN_SHARE > per_process[k]]
    if not wide:
        return []
    return [
        Warning(
            f"One principal may hold open more than a quarter of what the process may "
            f"({', '.join(wide)}): a few users can take what every other user needs.",
            hint="Lower WEBFETCH_OPEN_PER_PRINCIPAL or raise WEBFETCH_OPEN_PER_PROCESS.",
            id="django_webfetch.W063",
        )
    ]


def _check_sqlite_writers() -> list[CheckMessage]:
    """W062: runs advance off the request (the background runner's threads, or Celery
    workers) on SQLite without ``BEGIN IMMEDIATE``: concurrent writers fail "database is
    locked" instead of waiting for each other."""
    if not (_readable("WEBFETCH_ASYNC_RUNS") and _readable("WEBFETCH_RUNNER")):
        return []
    from .runs import off_request

    if not off_request():
        return []
    messages: list[CheckMessage] = []
    databases: dict[str, dict[str, Any]] = settings.DATABASES
    for alias, database in databases.items():
        options: dict[str, Any] = database.get("OPTIONS") or {}
        if (
            database.get("ENGINE") == "django.db.backends.sqlite3"
            and str(options.get("transaction_mode", "")).upper() != "IMMEDIATE"
        ):
            messages.append(
                Warning(
                    f"Database {alias!r} is SQLite without transaction_mode IMMEDIATE, and "
                    "runs advance off the request (background runner threads or Celery "
                    'workers): concurrent writers fail with "database is locked".',
                    hint='Set "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20}.',
                    id="django_webfetch.W062",
                )
            )
    return messages


# -- plugins (DESIGN.md §8) --------------------------------------------------------------------


#: The registry's refusals (``registry.Problem``) reported by W033, by their reason code
#: alone: those that say only that the sandbox could not be built (an error stops every
#: management command, ``migrate`` and ``webfetch plugin list`` included).  Every other
#: reason, known or not, is E030's: decided by ``Problem.reason``, never by the refusal's
#: text, which quotes names a distribution chose (docs/decisions/0064-protocol-states-and-
#: problem-reasons.rst).
_SANDBOX_REASONS = frozenset({"plugin_isolation_unavailable"})


def problem_check(reason: str) -> str:
    """The one system check id that reports a registry refusal of reason ``reason``."""
    if reason in _SANDBOX_REASONS:
        return "django_webfetch.W033"
    return "django_webfetch.E030"


def _plugin_sandbox(refused: Sequence[Problem] = ()) -> list[CheckMessage]:
    """W033: plugins are installed and this host cannot build their sandbox, or (a host
    that builds it) some plugins' sandboxes could not be built; ``refused`` are the
    registry's refusals for that reason (``problem_check``)."""
    from .plugins.registry import plugin_entry_points
    from .plugins.runtime.bubblewrap import REASONS
    from .plugins.runtime.host import capabilities
    from .plugins.shown import shown

    eps, unreadable = plugin_entry_points()  # one distribution at a time: never raises
    if not eps and not unreadable:
        return []
    found = capabilities()
    names = sorted({name for p in refused for name in p.names})
    which = f" Not run: {shown(', '.join(names))}." if names else ""
    if found.get("isolated"):
        if not refused:
            return []
        # This host builds the sandbox, yet a plugin's could not be built: said, never
        # dropped (each refusal's text, escaped).
        return [
            Warning(
                f"The plugin sandbox could not be built for some plugins; nothing of their "
                f"packages is imported.{which} {shown('; '.join(p.message for p in refused))}",
                hint="See docs/plugins.rst, 'Containment'.",
                id="django_webfetch.W033",
            )
        ]
    reason = str(found.get("reason", "sandbox_failed"))
    return [
        Warning(
            f"Untrusted plugins do not run here: the plugin sandbox cannot be built "
            f"({reason}: {REASONS.get(reason, '')}); nothing of their packages is imported."
            f"{which}",
            hint="Install bubblewrap and allow unprivileged user namespaces and seccomp "
            "(docs/plugins.rst, 'Containment').",
            id="django_webfetch.W033",
        )
    ]


def _untrust_hint() -> str:
    """What unticking ``trusted`` does on this host."""
    from .plugins.runtime.host import capabilities

    if capabilities().get("isolated"):
        return "Untick 'trusted' to run it in an isolated plugin process."
    return (
        "This host cannot build the plugin sandbox (check W033): unticking 'trusted' stops "
        "the plugin from running here."
    )


def _plugin_uids() -> list[CheckMessage]:
    """E033: ``WEBFETCH_PLUGIN_UID_RANGE`` holds a user or group of this machine (a root
    site would give a plugin process that identity)."""
    import grp
    import pwd

    if not _readable("WEBFETCH_PLUGIN_UID_RANGE"):
        return []  # E001
    first, count = conf.WEBFETCH_PLUGIN_UID_RANGE
    taken = sorted(
        {u.pw_uid for u in pwd.getpwall() if first <= u.pw_uid < first + count}
        | {g.gr_gid for g in grp.getgrall() if first <= g.gr_gid < first + count}
    )
    if not taken:
        return []
    return [
        Error(
            f"WEBFETCH_PLUGIN_UID_RANGE holds ids of this machine's users or groups "
            f"({', '.join(map(str, taken[:5]))}): on a site run as root, a plugin process "
            "could run as one of them.",
            hint="Move the range to ids no account uses (default 2000000000, 1000000).",
            id="django_webfetch.E033",
        )
    ]


def _cpu_notice_held(check: Callable[..., list[CheckMessage]]) -> Callable[..., list[CheckMessage]]:
    """A plugin check starts plugin processes (the sandbox probe, a manifest's read) but
    runs no tool: the host's ``plugin_cpu_limit_unavailable`` waits for a call
    (``plugins.notices``), not printed by every management command."""

    @functools.wraps(check)
    def run(*args: Any, **kwargs: Any) -> list[CheckMessage]:
        from .plugins.notices import held

        with held():
            return check(*args, **kwargs)

    return run


@_cpu_notice_held
def check_plugins(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    from .plugins.registry import refusals
    from .plugins.shown import shown

    found = refusals()
    messages: list[CheckMessage] = [
        Error(
            shown(problem.message),
            hint="The whole plugin is refused: none of its tools is offered.",
            id="django_webfetch.E030",
        )
        for problem in found
        if problem_check(problem.reason) == "django_webfetch.E030"
    ]
    sandbox = [p for p in found if problem_check(p.reason) == "django_webfetch.W033"]
    messages.extend(_plugin_sandbox(sandbox))
    from .plugins.tools import tool_problems

    messages.extend(
        Error(
            shown(problem),
            hint="Tools of two plugins claim this name: neither plugin's is offered.",
            id="django_webfetch.E030",
        )
        for problem in tool_problems()
    )
    messages.extend(_plugin_uids())
    if (
        _readable("WEBFETCH_PLUGIN_REDIS_URL")
        and conf.WEBFETCH_PLUGIN_REDIS_URL
        and importlib.util.find_spec("redis") is None
    ):
        messages.append(
            Error(
                "WEBFETCH_PLUGIN_REDIS_URL is set but the redis package is not installed; "
                "every plugin request is refused.",
                hint='pip install "django-webfetch[celery]"',
                id="django_webfetch.E031",
            )
        )
    return messages


def _site_packages() -> set[str]:
    """The interpreter's own package directories (``registry.interpreter_package_dirs``)."""
    from .plugins.registry import interpreter_package_dirs

    return interpreter_package_dirs()


def check_plugin_path(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """E035: a directory of ``sys.path`` other than the interpreter's package directories
    (``PYTHONPATH``, ``sys.path.append`` in settings) holds a plugin distribution: the
    site's imports and every library's entry-point discovery reach what is in it
    (docs/decisions/0049-plugin-directories-off-the-site-path.rst)."""
    from importlib.metadata import distributions

    from .plugins.closure import bounded
    from .plugins.registry import dist_plugin_entry_points, plugin_dirs
    from .plugins.shown import shown

    own = _site_packages()
    on_path = [os.path.realpath(entry or os.getcwd()) for entry in sys.path]
    messages: list[CheckMessage] = []
    for directory in plugin_dirs():
        real = os.path.realpath(directory)
        where = next((p for p in on_path if p == real), "") or next(
            (p for p in sorted(own) if real.startswith(p.rstrip(os.sep) + os.sep)), ""
        )
        if where:
            messages.append(
                Error(
                    f"WEBFETCH_PLUGIN_DIRS lists {directory!r}, which is "
                    + (
                        f"the sys.path directory {where!r}"
                        if where == real
                        else f"inside the interpreter's package directory {where!r}"
                    )
                    + ": the site's imports, .pth files and every library's entry-point "
                    "discovery reach what is installed there, so a plugin's code can run in "
                    "the site's processes outside the sandbox.",
                    hint="Give plugins a directory of their own, off sys.path and outside "
                    "site-packages (docs/plugins.rst, 'Installing a plugin').",
                    id="django_webfetch.E035",
                )
            )
    # A plugin directory reported above is not reported again for the plugins it holds.
    found: dict[str, list[str]] = {os.path.realpath(d): [] for d in plugin_dirs()}
    for path in on_path:
        if path in own or path in found or not os.path.isdir(path):
            continue
        names: list[str] = []
        for dist in map(bounded, distributions(path=[path])):  # its metadata read bounded
            # An entry_points.txt that cannot be read or decoded counts as a plugin
            # distribution when its bytes name the group (or cannot be read): fail closed.
            if dist_plugin_entry_points(dist):
                name = ""
                with contextlib.suppress(Exception):
                    name = str(dist.metadata["Name"] or "")
                names.append((name or "?")[:100])
        if names:
            found[path] = sorted(set(names))
    return (
        messages
        + _site_package_plugins()
        + [
            Error(
                f"{path!r} is on sys.path (PYTHONPATH or sys.path.append) and holds the plugin "
                f"distribution(s) {shown(', '.join(names))}: the site imports from it and every "
                "library loads entry points from it, so a plugin's code can run in the site's "
                "processes outside the sandbox.",
                hint="Take the directory off sys.path and list it in WEBFETCH_PLUGIN_DIRS "
                "(docs/plugins.rst, 'Installing a plugin').",
                id="django_webfetch.E035",
            )
            for path, names in found.items()
            if names
        ]
    )


def _site_package_plugins() -> list[CheckMessage]:
    """W036: a plugin distribution installed among the site's own packages (the
    interpreter's ``site-packages``): the interpreter imports a name it tries (``copy``
    tries ``org``, httpx ``brotli``) from there as any process of the site starts, before
    any refusal can run, so its code can run in the site whatever its instance's trust
    (issue 30, round 25, finding 3; decision 0065)."""
    from .plugins.registry import site_package_plugins
    from .plugins.shown import shown

    return [
        Warning(
            shown(
                f"The plugin distribution {name} is installed among the site's own packages "
                f"({directory!r}): its code can run in the site's processes, outside the "
                "sandbox, whatever its instance's trust (the site's interpreter imports "
                "from there any name it tries, as it starts)."
            ),
            hint="Unless the site vouches for it as its own code, uninstall it there and "
            "install it with pip install --no-deps --target into a directory listed in "
            "WEBFETCH_PLUGIN_DIRS (docs/plugins.rst, 'Installing a plugin').",
            id="django_webfetch.W036",
        )
        for name, directory in site_package_plugins()
    ]


@_cpu_notice_held
def check_plugin_instances(
    app_configs: Sequence[Any] | None = None,
    databases: Iterable[str] | None = None,
    **kwargs: Any,
) -> list[CheckMessage]:
    if not databases:
        return []
    from .plugins.manifest import ManifestError, parse_egress_entry
    from .plugins.models import PluginInstance
    from .plugins.registry import get_manifest
    from .plugins.shown import shown

    messages: list[CheckMessage] = []
    try:
        instances = list(PluginInstance.objects.all())
    except DatabaseError:
        return []
    for instance in instances:
        try:
            for raw in [*instance.egress_hosts, *instance.egress_allow_private]:
                parse_egress_entry(raw)
        except (ManifestError, TypeError):
            messages.append(
                Error(
                    shown(
                        f"Plugin instance {instance.alias!r} has an invalid egress grant; "
                        "every request of the instance is refused."
                    ),
                    hint="Fix the grant with the admin; "
                    f"{manage_command('webfetch', 'plugin', 'list')} shows every grant.",
                    obj=instance,
                    id="django_webfetch.E032",
                )
            )
        if get_manifest(instance.plugin) is None:
            messages.append(
                Warning(
                    shown(
                        f"Plugin instance {instance.alias!r} belongs to {instance.plugin!r}, "
                        "which is not installed (or was refused): it has no effective grant."
                    ),
                    hint="Is its directory in WEBFETCH_PLUGIN_DIRS of this process? "
                    f"({manage_command('webfetch', 'plugin', 'list')} says whether it was "
                    "refused, and why.)",
                    obj=instance,
                    id="django_webfetch.W030",
                )
            )
        if instance.egress_allow_private and not settings.DEBUG:
            messages.append(
                Warning(
                    shown(
                        f"Plugin instance {instance.alias!r} may reach private addresses for "
                        f"{', '.join(instance.egress_allow_private[:5])} while DEBUG is off."
                    ),
                    hint="Only for an internal service you trust; metadata stays refused.",
                    obj=instance,
                    id="django_webfetch.W031",
                )
            )
        problem = instance.trust_problem() if instance.trusted else ""
        if problem:
            # W034 only: its code does not run in the site's processes now, so W032 ("is
            # trusted: its code runs inside the site's processes") would be untrue.
            messages.append(
                Warning(
                    shown(
                        f"Plugin instance {instance.alias!r} is not trusted now: {problem}. "
                        "Its code does not run in the site's processes (it runs in the "
                        "sandbox where there is one, nowhere where there is none)."
                    ),
                    hint=shown(
                        "Review the installed package, then: "
                        f"{manage_command('webfetch', 'plugin', 'trust', instance.alias)} "
                        "(or untick and tick 'trusted' in the admin)."
                    )
                    if get_manifest(instance.plugin) is not None
                    # Nothing to confirm while the plugin is not installed (W030 says so).
                    else "Is its directory in WEBFETCH_PLUGIN_DIRS of this process? "
                    f"({manage_command('webfetch', 'plugin', 'list')} says whether it was "
                    "refused, and why.)",
                    obj=instance,
                    id="django_webfetch.W034",
                )
            )
        elif instance.trusted:
            messages.append(
                Warning(
                    shown(
                        f"Plugin instance {instance.alias!r} is trusted: its code runs inside "
                        "the site's processes, with the site's settings, database and "
                        "network, guarded only by the audit hook."
                    ),
                    hint=_untrust_hint(),
                    obj=instance,
                    id="django_webfetch.W032",
                )
            )
    return messages


#: OAuth settings that must hold for the MCP sign-in (``oauth_provider_settings`` sets them);
#: an override that changes one weakens it (W070).
_OAUTH_STRICT = (
    "PKCE_REQUIRED",
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD",
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT",
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT",
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE",
)
#: ... and the ones that must keep this app's value: a client's document is fetched through
#: the guard, and only for a user signed in at the consent page.
_OAUTH_OURS = {
    "CIMD_METADATA_FETCHER": "django_webfetch.oauth.cimd.GuardedMetadataFetcher",
    "CIMD_REGISTRATION_PERMISSION_CLASSES": ("django_webfetch.oauth.cimd.SignedInUserOnly",),
}


def check_oauth(app_configs: Sequence[Any] | None = None, **kwargs: Any) -> list[CheckMessage]:
    """E070: OAuth is on but the toolkit is missing or not set up with
    ``oauth_provider_settings``; W070: an override weakens it; W071: open registration."""
    from django.apps import apps

    try:
        resource = conf.WEBFETCH_OAUTH_RESOURCE
    except WebFetchConfigurationError:
        return []  # reported by check_settings
    if resource is None:
        return []
    provider = getattr(settings, "OAUTH2_PROVIDER", None)
    if (
        not apps.is_installed("oauth2_provider")
        or not isinstance(provider, dict)
        or provider.get("OAUTH2_PROTECTED_RESOURCE_IDENTIFIER") != resource
        or provider.get("OAUTH2_VALIDATOR_CLASS")
        != "django_webfetch.oauth.validator.OAuth2Validator"
    ):
        return [
            Error(
                "WEBFETCH_OAUTH_RESOURCE is set but django-oauth-toolkit is not installed or "
                "not configured for it.",
                hint="Add 'oauth2_provider' to INSTALLED_APPS and set OAUTH2_PROVIDER = "
                "oauth_provider_settings(WEBFETCH_OAUTH_RESOURCE) (docs/mcp.rst).",
                id="django_webfetch.E070",
            )
        ]
    messages: list[CheckMessage] = []
    weakened = [name for name in _OAUTH_STRICT if provider.get(name) is not True]
    weakened += [
        name
        for name, ours in _OAUTH_OURS.items()
        if provider.get("CIMD_ENABLED")
        and (tuple(provider.get(name) or ()) if isinstance(ours, tuple) else provider.get(name))
        != ours
    ]
    if weakened:
        messages.append(
            Warning(
                "OAUTH2_PROVIDER weakens the MCP sign-in: "
                + ", ".join(weakened)
                + " not as oauth_provider_settings() sets it.",
                hint="Remove these overrides of oauth_provider_settings().",
                id="django_webfetch.W070",
            )
        )
    if provider.get("DCR_ENABLED"):
        messages.append(
            Warning(
                "Dynamic Client Registration is open: anyone may register an OAuth client.",
                hint="Clients can identify themselves with a Client ID Metadata Document; "
                "leave dynamic_registration off unless a client you use needs it.",
                id="django_webfetch.W071",
            )
        )
    return messages


_persistent_connections_warned = False


def persistent_connections() -> list[str]:
    """The aliases of the databases that keep a connection open after a request
    (``CONN_MAX_AGE`` not 0) without a pool of the backend's own."""
    aliases = []
    databases: dict[str, dict[str, Any]] = settings.DATABASES
    for alias, settings_dict in databases.items():
        pooled = bool((settings_dict.get("OPTIONS") or {}).get("pool"))
        if settings_dict.get("CONN_MAX_AGE", 0) != 0 and not pooled:
            aliases.append(alias)
    return aliases


def warn_persistent_connections_under_asgi(sender: Any = None, **kwargs: Any) -> None:
    """``request_started``: under ASGI, a persistent connection (``CONN_MAX_AGE`` not 0) is
    opened by the thread of one request and never reused or closed by another, so a busy
    server runs the database out of connections.  Logged once per process, as
    ``django_webfetch.W072``: no system check can tell which server will serve the
    project."""
    global _persistent_connections_warned
    if _persistent_connections_warned:
        return
    from django.core.handlers.asgi import ASGIHandler

    if not (isinstance(sender, type) and issubclass(sender, ASGIHandler)):
        return
    _persistent_connections_warned = True
    aliases = persistent_connections()
    if aliases:
        import logging

        logging.getLogger("django_webfetch").warning(
            "django_webfetch.W072: served under ASGI with persistent database connections "
            "(CONN_MAX_AGE not 0) for %s: each request's thread opens its own connection and "
            "none is reused or closed, until the database refuses new ones. Set "
            "CONN_MAX_AGE = 0 and use the backend's pool (PostgreSQL: OPTIONS['pool'], "
            "psycopg[pool]).",
            ", ".join(aliases),
        )


#: Every check of this module with its tags, in the order ``apps.py`` registers them.
CHECKS: tuple[tuple[Callable[..., list[CheckMessage]], tuple[str, ...]], ...] = (
    (check_settings, (Tags.security,)),
    (check_bounds, (Tags.security,)),
    (check_nat64_prefixes, (Tags.security,)),
    (check_nameservers, (Tags.security,)),
    (check_ca_file, (Tags.security,)),
    (check_celery_installed, (Tags.compatibility,)),
    (check_self_approval, (Tags.security,)),
    (check_tools, (Tags.security,)),
    (check_diagnostics, (Tags.security,)),
    (check_database, (Tags.security, Tags.database)),
    (check_admin_secrets, (Tags.security, Tags.admin)),
    (check_sites, (Tags.security,)),
    (check_api_mount, (Tags.urls,)),
    (check_operations, (Tags.compatibility,)),
    (check_plugins, (Tags.security,)),
    (check_plugin_path, (Tags.security,)),
    (check_plugin_instances, (Tags.security, Tags.database)),
    (check_oauth, (Tags.security,)),
)
